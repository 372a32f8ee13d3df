"""Independent plain-torch fp32 reference of the Qwen3.5 hybrid text model and its MTP head.

Written from docs/spec (shared/reference/qwen35-architecture.md), NOT from HF code:
  * GDN core is the token-by-token recurrence (spec §4 step 8), not the chunked form;
  * attention is an explicit per-position causal loop over a KV cache;
  * MTP head (spec §7) — HF has no implementation, so this is the only source of `mtp_*` fixtures.

Weights are read from a plain dict ``name -> tensor`` (any dtype; upcast to fp32 here) using the
text-model names ``model.*`` / ``lm_head.weight`` / ``mtp.*`` (callers strip ``language_model.``).
Everything is computed in fp32.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# Deliberately-wrong variants, switched on only by verify_fixtures.py --mutations to show that the
# fixtures discriminate them.  Empty in normal use.
MUT: set = set()


class TextCfg:
    """The handful of text-config fields the math needs (already resolved: layer_types, rope)."""

    def __init__(self, d: dict):
        self.hidden = d["hidden_size"]
        self.inter = d["intermediate_size"]
        self.n_layers = d["num_hidden_layers"]
        self.n_heads = d["num_attention_heads"]
        self.n_kv = d["num_key_value_heads"]
        self.head_dim = d["head_dim"]
        self.lk_heads = d["linear_num_key_heads"]
        self.lv_heads = d["linear_num_value_heads"]
        self.lk_dim = d["linear_key_head_dim"]
        self.lv_dim = d["linear_value_head_dim"]
        self.conv_k = d["linear_conv_kernel_dim"]
        self.eps = d["rms_norm_eps"]
        self.layer_types = d["layer_types"]
        self.rope_theta = d["rope_theta"]
        self.rot_dim = int(self.head_dim * d["partial_rotary_factor"])
        self.tie = d["tie_word_embeddings"]


def rms_zc(x, w, eps):
    """Zero-centred RMSNorm (spec §3A): x*rsqrt(mean x^2 + eps)*(1+w)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (w if "norm_plain_w" in MUT else 1.0 + w)


def l2n(x):
    """Spec §3C: x * rsqrt(sum x^2 + 1e-6) (eps inside the sum, hard-coded)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def rope(x, pos, cfg: TextCfg):
    """NeoX partial rotary on dims [0, rot_dim) of x [heads, head_dim] at integer position pos."""
    r = cfg.rot_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, r, 2, dtype=torch.float32) / r))
    ang = torch.tensor(float(pos), dtype=torch.float32) * inv
    cos = torch.cat([ang.cos(), ang.cos()])
    sin = torch.cat([ang.sin(), ang.sin()])
    if "rope_interleaved" in MUT:  # GPT-J style pairs (x0,x1),(x2,x3)...
        xe, xo = x[..., 0:r:2], x[..., 1:r:2]
        c, s_ = ang.cos(), ang.sin()
        rot = torch.stack([xe * c - xo * s_, xo * c + xe * s_], -1).flatten(-2)
        return torch.cat([rot, x[..., r:]], -1)
    x1, x2 = x[..., : r // 2], x[..., r // 2 : r]
    rot = torch.cat([x1 * cos[: r // 2] - x2 * sin[: r // 2], x2 * cos[r // 2 :] + x1 * sin[r // 2 :]], -1)
    return torch.cat([rot, x[..., r:]], -1)


def mlp(x, W, p):
    return F.silu(x @ W[p + "gate_proj.weight"].T) * (x @ W[p + "up_proj.weight"].T) @ W[p + "down_proj.weight"].T


class AttnCache:
    def __init__(self):
        self.k = []  # list of [n_kv, d] (after norm + rope)
        self.v = []


def attn_step(x, pos, W, p, cfg: TextCfg, cache: AttnCache):
    """Gated full attention for ONE token x [H] at position pos (spec §5)."""
    d, H, Hkv = cfg.head_dim, cfg.n_heads, cfg.n_kv
    qg = (x @ W[p + "q_proj.weight"].T).view(H, 2 * d)
    q, gate = qg[:, :d], qg[:, d:].reshape(-1)
    if "q_gate_blocks" in MUT:  # [all q | all gate] instead of interleaved per head
        flat = qg.reshape(-1)
        q, gate = flat[: H * d].view(H, d), flat[H * d :]
    k = (x @ W[p + "k_proj.weight"].T).view(Hkv, d)
    v = (x @ W[p + "v_proj.weight"].T).view(Hkv, d)
    q = rms_zc(q, W[p + "q_norm.weight"], cfg.eps)
    k = rms_zc(k, W[p + "k_norm.weight"], cfg.eps)
    q, k = rope(q, pos, cfg), rope(k, pos, cfg)
    cache.k.append(k)
    cache.v.append(v)
    K = torch.stack(cache.k)  # [S, Hkv, d]
    V = torch.stack(cache.v)
    out = []
    grp = H // Hkv
    for h in range(H):
        kv = h // grp
        s = (K[:, kv] @ q[h]) / math.sqrt(d)
        pr = torch.softmax(s, 0)
        out.append(pr @ V[:, kv])
    o = torch.cat(out) * (F.silu(gate) if "attn_gate_silu" in MUT else torch.sigmoid(gate))
    return o @ W[p + "o_proj.weight"].T


class GdnState:
    def __init__(self, cfg: TextCfg):
        C = 2 * cfg.lk_heads * cfg.lk_dim + cfg.lv_heads * cfg.lv_dim
        self.conv = torch.zeros(cfg.conv_k - 1, C)  # last k-1 PRE-conv qkv rows
        self.S = torch.zeros(cfg.lv_heads, cfg.lk_dim, cfg.lv_dim)


def gdn_step(x, W, p, cfg: TextCfg, st: GdnState):
    """Gated DeltaNet for ONE token x [H] (spec §4), token-by-token recurrence."""
    Hk, Hv, dk, dv = cfg.lk_heads, cfg.lv_heads, cfg.lk_dim, cfg.lv_dim
    K = Hk * dk
    qkv = x @ W[p + "in_proj_qkv.weight"].T  # [C]
    z = (x @ W[p + "in_proj_z.weight"].T).view(Hv, dv)
    b = x @ W[p + "in_proj_b.weight"].T
    a = x @ W[p + "in_proj_a.weight"].T
    win = torch.cat([st.conv, qkv[None]], 0)  # [k, C], last row = current token
    st.conv = win[1:].clone()
    cw = W[p + "conv1d.weight"][:, 0, :]  # [C, k]; tap k-1 multiplies the current token
    if "conv_flip" in MUT:
        cw = cw.flip(-1)
    c = F.silu((win.T * cw).sum(-1))
    q, k, v = c[:K].view(Hk, dk), c[K : 2 * K].view(Hk, dk), c[2 * K :].view(Hv, dv)
    beta = torch.sigmoid(b)
    g = -torch.exp(W[p + "A_log"]) * F.softplus(a + W[p + "dt_bias"])
    q = l2n(q) / math.sqrt(dk)
    k = l2n(k)
    rep = Hv // Hk
    o = torch.empty(Hv, dv)
    for j in range(Hv):
        kv = j % Hk if "gqa_tiled" in MUT else j // rep
        kh, qh = k[kv], q[kv]
        S = st.S[j] * torch.exp(g[j])
        mem = S.T @ kh
        delta = beta[j] * (v[j] - mem)
        S = S + torch.outer(kh, delta)
        st.S[j] = S
        o[j] = S.T @ qh
    # gated RMSNorm: plain weight, silu gate, per head
    gw = W[p + "norm.weight"] + (1.0 if "gated_norm_1plus" in MUT else 0.0)
    gz = torch.sigmoid(z) if "gated_norm_sigmoid" in MUT else F.silu(z)
    y = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + cfg.eps) * gw * gz
    return y.reshape(-1) @ W[p + "out_proj.weight"].T


class ModelState:
    def __init__(self, cfg: TextCfg):
        self.pos = 0
        self.layers = [GdnState(cfg) if t == "linear_attention" else AttnCache() for t in cfg.layer_types]


def block(x, pos, W, p, kind, cfg, st):
    h = rms_zc(x, W[p + "input_layernorm.weight"], cfg.eps)
    if kind == "linear_attention":
        h = gdn_step(h, W, p + "linear_attn.", cfg, st)
    else:
        h = attn_step(h, pos, W, p + "self_attn.", cfg, st)
    x = x + h
    return x + mlp(rms_zc(x, W[p + "post_attention_layernorm.weight"], cfg.eps), W, p + "mlp.")


def lm_head(W, cfg):
    return W["model.embed_tokens.weight"] if cfg.tie or "lm_head.weight" not in W else W["lm_head.weight"]


@torch.no_grad()
def forward(ids, W, cfg: TextCfg, st: ModelState):
    """Run tokens one at a time; returns (logits [T,V], final-normed hidden [T,H])."""
    hs = []
    for tok in ids.tolist():
        x = W["model.embed_tokens.weight"][tok]
        for i, kind in enumerate(cfg.layer_types):
            x = block(x, st.pos, W, f"model.layers.{i}.", kind, cfg, st.layers[i])
        hs.append(rms_zc(x, W["model.norm.weight"], cfg.eps))
        st.pos += 1
    h = torch.stack(hs)
    return h @ lm_head(W, cfg).T, h


class MtpState:
    def __init__(self):
        self.cache = AttnCache()


@torch.no_grad()
def mtp_step(next_tok, h, pos, W, cfg: TextCfg, st: MtpState):
    """One MTP position (spec §7): combine embed(next_tok) and the hidden h, one full-attn block.

    Returns (draft logits [V], m = mtp.norm output [H])."""
    e = rms_zc(W["model.embed_tokens.weight"][next_tok], W["mtp.pre_fc_norm_embedding.weight"], cfg.eps)
    hh = rms_zc(h, W["mtp.pre_fc_norm_hidden.weight"], cfg.eps)
    u = (torch.cat([hh, e]) if "mtp_concat_swapped" in MUT else torch.cat([e, hh])) @ W["mtp.fc.weight"].T
    u = block(u, pos, W, "mtp.layers.0.", "full_attention", cfg, st.cache)
    m = rms_zc(u, W["mtp.norm.weight"], cfg.eps)
    return m @ lm_head(W, cfg).T, m


def to_f32(W: dict) -> dict:
    out = {}
    for k, v in W.items():
        k = k.replace("model.language_model.", "model.")
        out[k] = v.to(torch.float32)
    return out
