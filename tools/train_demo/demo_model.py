"""Demo model: transformers' Qwen3_5ForCausalLM backbone plus a Qwen3.5 MTP head.

The MTP head follows the spec (reference/qwen35-architecture.md §7, vLLM
`Qwen3_5MultiTokenPredictor`):

    e  = RMSNorm_zc(embed[x_{t+1}]; mtp.pre_fc_norm_embedding)
    hh = RMSNorm_zc(h_t; mtp.pre_fc_norm_hidden)        # h_t: main hidden after model.norm
    u  = mtp.fc(concat([e, hh]))                         # embedding first, hidden second
    u  = mtp.layers.0(u)                                 # full gated-attention block, RoPE pos t
    m_t = RMSNorm_zc(u; mtp.norm);  logits = lm_head(m_t) -> predicts x_{t+2}

Embedding and lm_head are shared with the main model (tied embeddings here).

Release layout (VL wrapper, like the published Qwen3.5 checkpoints):
``model.language_model.*`` for the text model, ``lm_head.weight`` only when untied,
``mtp.*`` for the head; config.json has the text fields in ``text_config``.
"""

from __future__ import annotations

import copy
import json
import os
import re

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

# Qwen3.5 checkpoints store these two GDN tensors as F32 (spec §2); everything else BF16.
F32_SUFFIXES = ("linear_attn.A_log", "linear_attn.norm.weight")


def text_config(vocab_size: int, hidden: int = 256, intermediate: int = 768, layers: int = 8, heads: int = 4,
                kv_heads: int = 2, head_dim: int = 64, lin_k_heads: int = 4, lin_v_heads: int = 8,
                lin_head_dim: int = 64, max_pos: int = 65536, rope_theta: float = 1e7,
                bos_id: int | None = None, eos_ids: list[int] | None = None, pad_id: int | None = None) -> Qwen3_5TextConfig:
    assert layers % 4 == 0, "layer count must be a multiple of 4 for the [lin, lin, lin, full] pattern"
    rot_half = int(head_dim * 0.25) // 2
    a = rot_half // 3 + (1 if rot_half % 3 else 0)
    b = rot_half // 3 + (1 if rot_half % 3 == 2 else 0)
    mrope = [a, b, rot_half - a - b]  # sums to rotary_dim / 2, like [11, 11, 10] for the 27B
    cfg = Qwen3_5TextConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim, hidden_act="silu",
        max_position_embeddings=max_pos, initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True,
        tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0,
        linear_conv_kernel_dim=4, linear_key_head_dim=lin_head_dim, linear_value_head_dim=lin_head_dim,
        linear_num_key_heads=lin_k_heads, linear_num_value_heads=lin_v_heads,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta, "partial_rotary_factor": 0.25,
                         "mrope_section": mrope, "mrope_interleaved": True},
        bos_token_id=bos_id, eos_token_id=eos_ids, pad_token_id=pad_id,
    )
    return cfg


class MTPHead(nn.Module):
    """Qwen3.5 multi-token-prediction module (one full-attention decoder layer)."""

    def __init__(self, cfg: Qwen3_5TextConfig):
        super().__init__()
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        mcfg = copy.deepcopy(cfg)
        mcfg.num_hidden_layers = 1
        mcfg.layer_types = ["full_attention"]
        mcfg._attn_implementation = cfg._attn_implementation or "sdpa"
        self.mcfg = mcfg
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(h, eps=eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(h, eps=eps)
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(mcfg, 0)])
        self.norm = Qwen3_5RMSNorm(h, eps=eps)

    def init_weights(self, std: float):
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                nn.init.normal_(mod.weight, std=std)
            elif isinstance(mod, Qwen3_5RMSNorm):
                nn.init.zeros_(mod.weight)

    def forward(self, next_embeds, hidden, position_embeddings, attention_mask=None, past_key_values=None):
        e = self.pre_fc_norm_embedding(next_embeds)
        hh = self.pre_fc_norm_hidden(hidden)
        u = self.fc(torch.cat([e, hh], dim=-1))
        u = self.layers[0](u, position_embeddings=position_embeddings, attention_mask=attention_mask,
                           past_key_values=past_key_values)
        return self.norm(u)


class DemoModel(nn.Module):
    def __init__(self, cfg: Qwen3_5TextConfig):
        super().__init__()
        cfg._attn_implementation = "sdpa"
        self.lm = Qwen3_5ForCausalLM(cfg)
        self.lm.config._attn_implementation = "sdpa"
        self.mtp = MTPHead(self.lm.config)
        self.mtp.init_weights(cfg.initializer_range)

    @property
    def config(self):
        return self.lm.config

    def embed(self, ids):
        return self.lm.model.embed_tokens(ids)

    def rope(self, x, position_ids):
        return self.lm.model.rotary_emb(x, position_ids)

    def mtp_forward(self, hidden, next_ids, position_ids, attention_mask=None, past_key_values=None):
        """hidden [B,T,H] (after final norm, or MTP output for chained drafts), next_ids [B,T]
        (token t+1 at each position t), position_ids [B,T]. Returns m [B,T,H]."""
        pe = self.rope(hidden, position_ids)
        return self.mtp(self.embed(next_ids), hidden, pe, attention_mask=attention_mask,
                        past_key_values=past_key_values)


# ------------------------------------------------------------------------- release I/O


def release_state_dict(model: DemoModel, keep_f32: bool = True) -> dict[str, torch.Tensor]:
    out = {}
    tied = model.config.tie_word_embeddings
    for k, v in model.lm.state_dict().items():
        if k == "lm_head.weight":
            if tied:
                continue
            name = k
        else:
            assert k.startswith("model."), k
            name = "model.language_model." + k[len("model."):]
        out[name] = v
    for k, v in model.mtp.state_dict().items():
        out["mtp." + k] = v
    res = {}
    for k, v in out.items():
        dt = torch.float32 if (keep_f32 and k.endswith(F32_SUFFIXES)) else torch.bfloat16
        res[k] = v.detach().to(dt).contiguous()
    return res


def release_config(cfg: Qwen3_5TextConfig) -> dict:
    tc = {
        "model_type": "qwen3_5_text",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": cfg.hidden_act,
        "max_position_embeddings": cfg.max_position_embeddings,
        "initializer_range": cfg.initializer_range,
        "rms_norm_eps": cfg.rms_norm_eps,
        "use_cache": True,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "rope_parameters": dict(cfg.rope_parameters),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "linear_conv_kernel_dim": cfg.linear_conv_kernel_dim,
        "linear_key_head_dim": cfg.linear_key_head_dim,
        "linear_value_head_dim": cfg.linear_value_head_dim,
        "linear_num_key_heads": cfg.linear_num_key_heads,
        "linear_num_value_heads": cfg.linear_num_value_heads,
        "layer_types": list(cfg.layer_types),
        "full_attention_interval": 4,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "mamba_ssm_dtype": "float32",
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "pad_token_id": cfg.pad_token_id,
        "dtype": "bfloat16",
    }
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": tc,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "dtype": "bfloat16",
        "transformers_version": "5.23.0",
    }


def save_release(model: DemoModel, out_dir: str, generation_config: dict | None = None):
    os.makedirs(out_dir, exist_ok=True)
    sd = release_state_dict(model)
    save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(release_config(model.config), f, indent=2)
        f.write("\n")
    if generation_config is not None:
        with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
            json.dump(generation_config, f, indent=2)
            f.write("\n")
    return sd


def load_grown(model: DemoModel, source: DemoModel) -> list[str]:
    """Load `source` into `model`, which may be wider (a larger `intermediate_size`) or deeper
    (more decoder layers appended after `source`'s, in the same [lin, lin, lin, full] pattern).

    The extra gate/up rows keep `model`'s random initialisation and the extra down_proj
    columns are zero; an appended layer keeps its random initialisation except its output
    projections (attention o_proj, GDN out_proj, MLP down_proj), which are zero, so it adds
    nothing to the residual stream. Either way the grown model computes exactly what
    `source` computes, and the new weights start learning from the first step (the zeroed
    ones receive gradients through the random ones). Every other tensor must match in shape.
    Returns the names of the grown or added tensors."""
    n_src = source.config.num_hidden_layers
    if model.config.layer_types[:n_src] != source.config.layer_types:
        raise ValueError(f"cannot grow {source.config.layer_types} into {model.config.layer_types}: "
                         "the source's layers must be a prefix of the target's")
    target, grown = model.state_dict(), []
    source_sd = source.state_dict()
    for name, value in source_sd.items():
        dest = target[name]
        if dest.shape == value.shape:
            dest.copy_(value)
            continue
        wide = name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"))
        if not wide or dest.ndim != 2 or any(d < v for d, v in zip(dest.shape, value.shape)):
            raise ValueError(f"{name}: cannot grow {tuple(value.shape)} into {tuple(dest.shape)}")
        if name.endswith("down_proj.weight"):
            dest.zero_()
        dest[: value.shape[0], : value.shape[1]].copy_(value)
        grown.append(name)
    for name, dest in target.items():
        if name in source_sd:
            continue
        layer = re.match(r"lm\.model\.layers\.(\d+)\.", name)
        if layer is None or int(layer.group(1)) < n_src:
            raise ValueError(f"{name}: missing from the source checkpoint")
        if name.endswith(("self_attn.o_proj.weight", "linear_attn.out_proj.weight", "mlp.down_proj.weight")):
            dest.zero_()
        grown.append(name)
    model.load_state_dict(target, strict=True)
    return grown


def load_release(model_dir: str, dtype=torch.float32) -> DemoModel:
    """Rebuild the demo model from a release directory (text_config + remapped weights)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        full = json.load(f)
    tc = dict(full.get("text_config", full))
    for k in ("model_type", "architectures", "attn_output_gate", "full_attention_interval", "mtp_num_hidden_layers",
              "mtp_use_dedicated_embeddings", "mamba_ssm_dtype", "dtype"):
        tc.pop(k, None)
    cfg = Qwen3_5TextConfig(**tc)
    model = DemoModel(cfg)
    sd = load_file(os.path.join(model_dir, "model.safetensors"))
    lm_sd, mtp_sd = {}, {}
    for k, v in sd.items():
        v = v.to(dtype)
        if k.startswith("model.language_model."):
            lm_sd["model." + k[len("model.language_model."):]] = v
        elif k.startswith("mtp."):
            mtp_sd[k[len("mtp."):]] = v
        elif k == "lm_head.weight":
            lm_sd[k] = v
        else:
            raise KeyError(k)
    if cfg.tie_word_embeddings:
        lm_sd["lm_head.weight"] = lm_sd["model.embed_tokens.weight"]
    model.lm.load_state_dict(lm_sd, strict=True)
    model.mtp.load_state_dict(mtp_sd, strict=True)
    model.to(dtype)
    if cfg.tie_word_embeddings:
        model.lm.lm_head.weight = model.lm.model.embed_tokens.weight
    model.eval()
    return model
