"""A training-speed replacement for transformers' PyTorch chunked gated delta rule.

Without flash-linear-attention (never on a CPU), transformers runs
``torch_chunk_gated_delta_rule``: the same chunked algorithm as FLA, with a Python loop
over 64-token chunks. Its loop reads ``x[:, :, i]`` and writes ``out[:, :, i] = ...``;
autograd turns every such select into a full-size zero tensor plus a copy and an add in
the backward pass, so the backward costs O(chunks x sequence). Profiled on a 2 x 3000
byte batch of the demo model, that zero/copy/add traffic was about 40% of a training step.

``chunk_gated_delta_rule`` below computes the same function with the same operations per
chunk, but takes the chunks with ``unbind`` (whose backward is one stack) and gathers the
outputs in a list, and it solves both triangular systems in one call. ``install()``
points the Qwen3.5 modeling module at it; the layers look the function up at call time.
``test_fast_gdn.py`` checks outputs, final state and gradients against transformers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.models.qwen3_5 import modeling_qwen3_5
from transformers.models.qwen3_5.modeling_qwen3_5 import l2norm


def chunk_gated_delta_rule(query, key, value, g, beta, chunk_size: int = 64, initial_state=None,
                           output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                           **kwargs):
    """Same arguments, shapes and results as transformers' ``torch_chunk_gated_delta_rule``."""
    initial_dtype = query.dtype
    batch, seq_len, k_heads, k_dim = key.shape
    v_heads, v_dim = value.shape[-2:]
    if k_heads != v_heads:
        query = query.repeat_interleave(v_heads // k_heads, dim=2)
        key = key.repeat_interleave(v_heads // k_heads, dim=2)
    query, key, value, beta, decay = [
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        for x in (query, key, value, beta, g)
    ]
    if use_qk_l2norm_in_kernel:
        query, key = l2norm(query, dim=-1, eps=1e-6), l2norm(key, dim=-1, eps=1e-6)
    query = query * query.shape[-1] ** -0.5

    pad = (chunk_size - seq_len % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad)) for x in (beta, decay))
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1])
                                  for x in (query, key, k_beta, v_beta)]
    decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).triu(1)
    cum_decay = decay.cumsum(dim=3)
    pairwise = (cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3)).masked_fill(upper, float("-inf")).exp()
    ut_system = (k_beta @ key.transpose(-1, -2)) * pairwise
    intra = (query @ key.transpose(-1, -2)) * pairwise
    decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1)
    # One solve for both right-hand sides: [v_beta | decayed_k_beta].
    solved = torch.linalg.solve_triangular(ut_system, torch.cat([v_beta, decayed_k_beta], dim=-1),
                                           upper=False, unitriangular=True)
    new_values, k_cumdecay = solved.split([v_dim, k_dim], dim=-1)

    state = (torch.zeros(batch, v_heads, k_dim, v_dim, dtype=new_values.dtype, device=new_values.device)
             if initial_state is None else initial_state.to(new_values))
    query = query * cum_decay.exp().unsqueeze(-1)
    key = key * (cum_decay[..., -1:] - cum_decay).exp().unsqueeze(-1)
    chunk_decay = cum_decay[..., -1].exp()[..., None, None]

    device_type = query.device.type
    if torch.is_autocast_enabled(device_type):
        # The loop's matmuls would cast these operands chunk by chunk; cast them once.
        mm_dtype = torch.get_autocast_dtype(device_type)
        query, key, k_cumdecay, intra = (x.to(mm_dtype) for x in (query, key, k_cumdecay, intra))
    outs = []
    for q_i, k_i, nv_i, kc_i, a_i, d_i in zip(query.unbind(2), key.unbind(2), new_values.unbind(2),
                                              k_cumdecay.unbind(2), intra.unbind(2), chunk_decay.unbind(2)):
        v_new = nv_i - kc_i @ state
        outs.append(q_i @ state + a_i @ v_new)
        state = state * d_i + k_i.transpose(-1, -2) @ v_new
    out = torch.stack(outs, dim=2).reshape(batch, v_heads, -1, v_dim)[:, :, :seq_len]
    out = out.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return out, (state if output_final_state else None)


def install():
    """Make transformers' Qwen3.5 linear-attention layers use ``chunk_gated_delta_rule``."""
    modeling_qwen3_5.torch_chunk_gated_delta_rule = chunk_gated_delta_rule
