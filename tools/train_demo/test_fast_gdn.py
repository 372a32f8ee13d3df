#!/usr/bin/env python3
"""fast_gdn.chunk_gated_delta_rule against transformers' torch_chunk_gated_delta_rule:
`python tools/train_demo/test_fast_gdn.py` (needs the training venv's torch and transformers).

Outputs, final state and the gradients of every input agree, in fp32 and under bf16
autocast, for a length that is not a multiple of the chunk, with and without an initial
state, with grouped value heads (more value heads than key heads, as in the model).
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fast_gdn import chunk_gated_delta_rule  # noqa: E402
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule  # noqa: E402


def inputs(seed, batch=2, seq=150, k_heads=2, v_heads=4, dim=16, with_state=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seq, k_heads, dim, generator=g)
    k = torch.randn(batch, seq, k_heads, dim, generator=g)
    v = torch.randn(batch, seq, v_heads, dim, generator=g)
    decay = -torch.rand(batch, seq, v_heads, generator=g) * 0.5
    beta = torch.rand(batch, seq, v_heads, generator=g)
    state = torch.randn(batch, v_heads, dim, dim, generator=g) * 0.1 if with_state else None
    return [q, k, v, decay, beta], state


def run(fn, tensors, state, autocast):
    leaves = [t.clone().requires_grad_(True) for t in tensors]
    q, k, v, decay, beta = leaves
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out, final = fn(q, k, v, g=decay, beta=beta, initial_state=state, output_final_state=True,
                        use_qk_l2norm_in_kernel=True)
    (out.float().square().sum() + final.float().sum()).backward()
    return [out.float(), final.float()] + [t.grad for t in leaves]


def check(autocast, with_state, tol):
    tensors, state = inputs(7 + with_state, with_state=with_state)
    ref = run(torch_chunk_gated_delta_rule, tensors, state, autocast)
    new = run(chunk_gated_delta_rule, tensors, state, autocast)
    names = ["output", "final state", "dq", "dk", "dv", "dg", "dbeta"]
    for name, a, b in zip(names, ref, new):
        err = ((a - b).abs().max() / a.abs().max().clamp(min=1e-6)).item()
        assert err <= tol, f"autocast={autocast} state={with_state}: {name} differs by {err:.2e} (relative)"
    print(f"ok: autocast={autocast} initial_state={with_state}")


if __name__ == "__main__":
    torch.set_num_threads(2)
    for with_state in (False, True):
        check(False, with_state, 1e-5)
        check(True, with_state, 2e-2)  # bf16 matmuls in both; a different solve blocking
    print("fast_gdn matches transformers")
