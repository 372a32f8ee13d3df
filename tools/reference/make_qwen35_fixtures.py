#!/usr/bin/env python
"""Generate tiny random Qwen3.5 hybrid-text-model reference fixtures under tests/fixtures/.

Deterministic (fixed seeds), CPU only, HF transformers torch fallbacks (no FLA / causal-conv1d),
eager attention.  See tools/reference/README.md for the exact commands and what every tensor means.

    nice -n 10 /work/venv/bin/python tools/reference/make_qwen35_fixtures.py [--only NAME]

Variants written:
  qwen35-tiny-f32      plain `model.*` Qwen3_5ForCausalLM save, f32, tied embeddings, single file
  qwen35-tiny-bf16-vl  VL-wrapper release layout, bf16 (A_log / linear_attn.norm.weight stored F32),
                       untied, sharded into 3 files + index, legacy config fields
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import qwen35_ref as ref  # noqa: E402

ROOT = HERE.parents[1]
FIX = ROOT / "tests" / "fixtures"

# ---------------------------------------------------------------- shared model definition

# special ids (vocab 256): mirror the real family (bos == eos == <|endoftext|>, extra <|im_end|>)
ENDOFTEXT = 253
IM_END = 254
PROMPT_HI = 248  # prompt tokens are drawn from [0, PROMPT_HI)

TEXT_DIMS = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=16,
    linear_conv_kernel_dim=4,
    hidden_act="silu",
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    attention_bias=False,
    bos_token_id=ENDOFTEXT,
    eos_token_id=ENDOFTEXT,
)
ROPE_THETA = 1.0e6
PARTIAL_ROTARY = 0.25
LAYER_TYPES = ["linear_attention", "linear_attention", "linear_attention", "full_attention"]

GENERATION_CONFIG = {
    "bos_token_id": ENDOFTEXT,
    "eos_token_id": [IM_END, ENDOFTEXT],
    "pad_token_id": ENDOFTEXT,
    "do_sample": True,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "5.23.0",
}

T_PROMPT = 150  # > 2 GDN chunks of 64
N_GREEDY = 8
CHUNK_SPLIT = 70  # chunk_logits: forward ids[:70], then ids[70:] with the cache
MTP_DRAFT_STEPS = 3


def text_config(tie: bool, rope_parameters=None, **extra):
    from transformers import Qwen3_5TextConfig

    rp = rope_parameters or {"rope_type": "default", "rope_theta": ROPE_THETA, "partial_rotary_factor": PARTIAL_ROTARY}
    return Qwen3_5TextConfig(
        **TEXT_DIMS, layer_types=list(LAYER_TYPES), rope_parameters=rp, tie_word_embeddings=tie, **extra
    )


def rand_tensor(name: str, shape, gen: torch.Generator, hidden: int) -> torch.Tensor:
    """Every parameter gets a non-trivial random value, chosen by name (see README 'Randomisation')."""
    shape = tuple(shape)
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(0.02, 2.0, generator=gen).log()
    if name.endswith("dt_bias"):
        return torch.empty(shape).uniform_(-1.5, 1.0, generator=gen)
    if name.endswith("linear_attn.norm.weight"):  # gated norm: plain weight around 1
        return 1.0 + 0.2 * torch.randn(shape, generator=gen)
    if name.endswith("conv1d.weight"):
        return 0.5 * torch.randn(shape, generator=gen)
    if "norm" in name:  # zero-centred (1+w) norms incl. q_norm/k_norm/mtp norms
        return 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
        return (2.0 / math.sqrt(hidden)) * torch.randn(shape, generator=gen)
    assert len(shape) == 2, name
    return torch.randn(shape, generator=gen) / math.sqrt(shape[1])


def mtp_shapes(cfg) -> dict:
    H, I, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    p = "mtp.layers.0."
    return {
        "mtp.fc.weight": (H, 2 * H),
        "mtp.pre_fc_norm_embedding.weight": (H,),
        "mtp.pre_fc_norm_hidden.weight": (H,),
        "mtp.norm.weight": (H,),
        p + "input_layernorm.weight": (H,),
        p + "post_attention_layernorm.weight": (H,),
        p + "self_attn.q_proj.weight": (2 * nh * d, H),
        p + "self_attn.k_proj.weight": (nkv * d, H),
        p + "self_attn.v_proj.weight": (nkv * d, H),
        p + "self_attn.o_proj.weight": (H, nh * d),
        p + "self_attn.q_norm.weight": (d,),
        p + "self_attn.k_norm.weight": (d,),
        p + "mlp.gate_proj.weight": (I, H),
        p + "mlp.up_proj.weight": (I, H),
        p + "mlp.down_proj.weight": (H, I),
    }


def build_random_model(cfg, seed: int):
    """Qwen3_5ForCausalLM (f32, eager) with every parameter randomised + random mtp.* tensors."""
    from transformers import Qwen3_5ForCausalLM

    torch.manual_seed(seed)
    cfg._attn_implementation = "eager"
    model = Qwen3_5ForCausalLM(cfg).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            p.copy_(rand_tensor(name, p.shape, gen, cfg.hidden_size))
    mtp = {n: rand_tensor(n, s, gen, cfg.hidden_size) for n, s in sorted(mtp_shapes(cfg).items())}
    return model, mtp


def load_hf(path: Path, dtype):
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, attn_implementation="eager").eval()
    return m


def read_safetensors_dir(path: Path) -> dict:
    out = {}
    for f in sorted(path.glob("*.safetensors")):
        if f.name == "expected.safetensors":
            continue
        with safe_open(str(f), "pt") as sf:
            for k in sf.keys():
                out[k] = sf.get_tensor(k)
    return out


def ref_cfg_from_hf(hf_cfg) -> ref.TextCfg:
    rp = hf_cfg.rope_parameters
    return ref.TextCfg(
        dict(
            hidden_size=hf_cfg.hidden_size,
            intermediate_size=hf_cfg.intermediate_size,
            num_hidden_layers=hf_cfg.num_hidden_layers,
            num_attention_heads=hf_cfg.num_attention_heads,
            num_key_value_heads=hf_cfg.num_key_value_heads,
            head_dim=hf_cfg.head_dim,
            linear_num_key_heads=hf_cfg.linear_num_key_heads,
            linear_num_value_heads=hf_cfg.linear_num_value_heads,
            linear_key_head_dim=hf_cfg.linear_key_head_dim,
            linear_value_head_dim=hf_cfg.linear_value_head_dim,
            linear_conv_kernel_dim=hf_cfg.linear_conv_kernel_dim,
            rms_norm_eps=hf_cfg.rms_norm_eps,
            layer_types=list(hf_cfg.layer_types),
            rope_theta=rp["rope_theta"],
            partial_rotary_factor=rp.get("partial_rotary_factor", 1.0),
            tie_word_embeddings=hf_cfg.tie_word_embeddings,
        )
    )


# ---------------------------------------------------------------- HF runs


@torch.no_grad()
def hf_prefill_and_greedy(model, ids: torch.Tensor, n: int):
    """One cached prefill forward, then n-1 single-token cached decode steps (HF recurrent path).

    Returns prompt_logits [T,V] f32, greedy_ids [n], decode_logits [n,V] f32 (row 0 = last prefill row)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids[None], past_key_values=cache, use_cache=True)
    prompt_logits = out.logits[0]
    rows = [prompt_logits[-1]]
    toks = [int(rows[-1].float().argmax())]
    for _ in range(n - 1):
        out = model(input_ids=torch.tensor([[toks[-1]]]), past_key_values=cache, use_cache=True)
        rows.append(out.logits[0, -1])
        toks.append(int(rows[-1].float().argmax()))
    return prompt_logits.float(), torch.tensor(toks, dtype=torch.int64), torch.stack(rows).float()


@torch.no_grad()
def hf_generate(model, ids, n):
    out = model.generate(
        ids[None], max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0, use_cache=True,
        top_k=None, top_p=None, temperature=None,
    )
    return out[0, ids.numel():]


@torch.no_grad()
def hf_chunked(model, ids, split):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    a = model(input_ids=ids[None, :split], past_key_values=cache, use_cache=True).logits[0]
    b = model(input_ids=ids[None, split:], past_key_values=cache, use_cache=True).logits[0]
    return a.float(), b.float()


def pick_prompt(seed: int, checks) -> torch.Tensor:
    """Deterministically pick the first prompt (seeds seed, seed+1, ...) whose greedy continuation, for every
    (model, min_margin) in checks, avoids the EOS ids and has top1-top2 logit margin >= min_margin at every
    step, so that an implementation within tolerance reproduces the greedy ids."""
    for s in range(seed, seed + 200):
        ids = torch.randint(0, PROMPT_HI, (T_PROMPT,), generator=torch.Generator().manual_seed(s), dtype=torch.int64)
        ok = True
        for model, min_margin in checks:
            _, g, dl = hf_prefill_and_greedy(model, ids, N_GREEDY)
            if set(g.tolist()) & {ENDOFTEXT, IM_END} or top2_margin(dl) < min_margin:
                ok = False
                break
        if ok:
            print(f"prompt seed {s}", file=sys.stderr)
            return ids
    raise RuntimeError("no prompt seed satisfied the margin checks")


def top2_margin(rows: torch.Tensor) -> float:
    t = rows.float().topk(2, dim=-1).values
    return float((t[:, 0] - t[:, 1]).min())


def maxabs(a, b) -> float:
    return float((a.detach().float() - b.detach().float()).abs().max())


# ---------------------------------------------------------------- reference (independent) runs


def ref_main(W, rcfg, ids, greedy):
    st = ref.ModelState(rcfg)
    lp, h = ref.forward(ids, W, rcfg, st)
    ld, _ = ref.forward(greedy[:-1], W, rcfg, st)
    return lp, h, torch.cat([lp[-1:], ld])


def ref_mtp(W, rcfg, ids, hidden, first_greedy: int, steps: int):
    """First pass over the prompt (rows t=0..T-2), then a `steps`-long draft chain from the last slot."""
    st = ref.MtpState()
    T = ids.numel()
    rows = []
    for t in range(T - 1):
        lg, _ = ref.mtp_step(int(ids[t + 1]), hidden[t], t, W, rcfg, st)
        rows.append(lg)
    mtp_logits = torch.stack(rows)
    # draft chain: slot T-1 gets the sampled token, steps 2.. feed the MTP's own normed output back
    tok, h, pos = first_greedy, hidden[T - 1], T - 1
    drows, dids = [], []
    for _ in range(steps):
        lg, m = ref.mtp_step(tok, h, pos, W, rcfg, st)
        drows.append(lg)
        tok = int(lg.argmax())
        dids.append(tok)
        h, pos = m, pos + 1
    return mtp_logits, torch.stack(drows), torch.tensor(dids, dtype=torch.int64)


# ---------------------------------------------------------------- writers


def write_generation_config(d: Path):
    (d / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n")


def save_st(tensors: dict, path: Path):
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
    path.chmod(0o644)


def assert_no_eos(*id_tensors):
    for t in id_tensors:
        bad = set(t.tolist()) & {ENDOFTEXT, IM_END}
        assert not bad, f"greedy output hits an EOS id {bad}; change the seed"


# ---------------------------------------------------------------- variant: f32, plain layout, tied


def make_f32(report: dict):
    name = "qwen35-tiny-f32"
    out = FIX / name
    seed = 1235
    rope_params = {
        "rope_type": "default",
        "rope_theta": ROPE_THETA,
        "partial_rotary_factor": PARTIAL_ROTARY,
        "mrope_section": [2, 1, 1],
        "mrope_interleaved": True,
    }
    cfg = text_config(tie=True, rope_parameters=rope_params)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    model, mtp = build_random_model(cfg, seed)

    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        out.mkdir(parents=True)
        sd = {}
        with safe_open(str(Path(tmp) / "model.safetensors"), "pt") as sf:
            for k in sf.keys():
                sd[k] = sf.get_tensor(k)
        assert "lm_head.weight" not in sd, "tied save should drop lm_head.weight"
        sd.update(mtp)
        save_st(sd, out / "model.safetensors")
        c = json.loads((Path(tmp) / "config.json").read_text())
    c["mtp_num_hidden_layers"] = 1
    c["mtp_use_dedicated_embeddings"] = False
    (out / "config.json").write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    write_generation_config(out)

    hf = load_hf(out, torch.float32)
    ids = pick_prompt(seed + 1, [(hf, 0.05)])
    check_config(hf.config, tie=True, report=report, name=name)
    exp = common_expected(hf, model, ids, out, report, name)
    save_st(exp, out / "expected.safetensors")


# ---------------------------------------------------------------- variant: bf16, VL layout, sharded


F32_STORED = ("linear_attn.A_log", "linear_attn.norm.weight")


def make_bf16_vl(report: dict):
    name = "qwen35-tiny-bf16-vl"
    out = FIX / name
    seed = 5678
    cfg = text_config(tie=False)
    model, mtp = build_random_model(cfg, seed)

    # --- checkpoint tensors in release layout/dtypes
    sd = {}
    for k, v in model.state_dict().items():
        if k.startswith("model."):
            k = "model.language_model." + k[len("model.") :]
        sd[k] = v.clone() if k.endswith(F32_STORED) else v.to(torch.bfloat16)
    for k, v in mtp.items():
        sd[k] = v.to(torch.bfloat16)
    gen = torch.Generator().manual_seed(seed + 7)
    fake_visual = {
        "model.visual.patch_embed.proj.weight": (32, 3, 2, 4, 4),
        "model.visual.patch_embed.proj.bias": (32,),
        "model.visual.blocks.0.attn.qkv.weight": (96, 32),
        "model.visual.merger.linear_fc2.weight": (64, 128),
    }
    for k, s in fake_visual.items():
        sd[k] = (0.02 * torch.randn(s, generator=gen)).to(torch.bfloat16)

    # make the in-memory model hold exactly what the file holds (for the reload check)
    with torch.no_grad():
        for k, p in model.named_parameters():
            fk = "model.language_model." + k[len("model.") :] if k.startswith("model.") else k
            p.copy_(sd[fk].to(torch.float32))

    # --- shards: split layer 1 across files 1/2, MTP + visual in file 3
    def shard_of(k: str) -> int:
        if k.startswith(("mtp.", "model.visual.")):
            return 3
        if "embed_tokens" in k or ".layers.0." in k or (".layers.1." in k and ".mlp." not in k):
            return 1
        return 2

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    n = 3
    fname = lambda i: f"model-{i:05d}-of-{n:05d}.safetensors"  # noqa: E731
    shards = {i: {} for i in range(1, n + 1)}
    for k in sorted(sd):
        shards[shard_of(k)][k] = sd[k]
    weight_map = {}
    for i, t in shards.items():
        save_st(t, out / fname(i))
        weight_map.update({k: fname(i) for k in t})
    total = sum(v.numel() * v.element_size() for v in sd.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")

    # --- config: VL wrapper with legacy text fields (full_attention_interval, top-level rope_theta)
    text = {k: v for k, v in TEXT_DIMS.items()}
    text.update(
        {
            "model_type": "qwen3_5_text",
            "full_attention_interval": 4,
            "rope_theta": ROPE_THETA,
            "partial_rotary_factor": PARTIAL_ROTARY,
            "tie_word_embeddings": False,
            "attn_output_gate": True,
            "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": False,
            "mamba_ssm_dtype": "float32",
            "dtype": "bfloat16",
            "use_cache": True,
        }
    )
    vl = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": 251,
        "video_token_id": 252,
        "vision_start_token_id": 249,
        "vision_end_token_id": 250,
        "tie_word_embeddings": False,
        "transformers_version": "5.23.0",
        "text_config": text,
        "vision_config": {
            "model_type": "qwen3_5",  # old-checkpoint quirk: HF rewrites it to qwen3_5_vision
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "in_channels": 3,
            "patch_size": 4,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
            "num_position_embeddings": 16,
        },
    }
    (out / "config.json").write_text(json.dumps(vl, indent=2) + "\n")
    write_generation_config(out)

    # f32 compute of the bf16 (+F32) weights
    hf32 = load_hf(out, torch.float32)
    hf16 = load_hf(out, torch.bfloat16)
    ids = pick_prompt(seed + 1, [(hf32, 0.05), (hf16, 0.1)])
    check_config(hf32.config, tie=False, report=report, name=name)
    for k, p in hf32.named_parameters():
        fk = "model.language_model." + k[len("model.") :] if k.startswith("model.") else k
        assert torch.equal(p.detach(), sd[fk].float()), f"f32 load changed {k}"
    exp = common_expected(hf32, model, ids, out, report, name)

    # bf16 compute (HF rounds the F32-stored A_log / norm.weight to bf16)
    for k, p in hf16.named_parameters():
        assert p.dtype == torch.bfloat16, k
    pl16, g16, dl16 = hf_prefill_and_greedy(hf16, ids, N_GREEDY)
    assert_no_eos(g16)
    gen16 = hf_generate(hf16, ids, N_GREEDY)
    r = report[name]
    r["bf16: generate() == manual greedy"] = bool(torch.equal(gen16, g16))
    r["bf16 vs f32 compute: max|prompt_logits diff|"] = maxabs(pl16, exp["prompt_logits"])
    same = int((g16 == exp["greedy_ids"]).long().cumprod(0).sum())
    r["bf16 greedy_ids == f32 greedy_ids (common prefix length)"] = same
    r["bf16 vs f32 compute: max|decode_logits diff| over rows 0..prefix"] = maxabs(
        dl16[: same + 1], exp["decode_logits"][: same + 1]
    )
    r["greedy_ids_bf16"] = g16.tolist()
    for k, p in hf16.named_parameters():
        if k.endswith(F32_STORED):
            fk = "model.language_model." + k[len("model.") :]
            r.setdefault("bf16 load rounds F32-stored tensors", []).append(
                [k, bool(torch.equal(p.float(), sd[fk].to(torch.bfloat16).float())), maxabs(p, sd[fk])]
            )
    r["bf16 decode top1-top2 min margin"] = top2_margin(dl16)
    exp["prompt_logits_bf16"] = pl16
    exp["decode_logits_bf16"] = dl16
    exp["greedy_ids_bf16"] = g16
    save_st(exp, out / "expected.safetensors")


# ---------------------------------------------------------------- shared expected + checks


def check_config(hf_cfg, tie: bool, report: dict, name: str):
    assert list(hf_cfg.layer_types) == LAYER_TYPES, hf_cfg.layer_types
    rp = hf_cfg.rope_parameters
    assert rp["rope_type"] == "default" and rp["rope_theta"] == ROPE_THETA, rp
    assert rp["partial_rotary_factor"] == PARTIAL_ROTARY, rp
    assert hf_cfg.tie_word_embeddings == tie
    assert hf_cfg.model_type == "qwen3_5_text", hf_cfg.model_type
    report.setdefault(name, {})["hf parsed rope_parameters"] = dict(rp)


def common_expected(hf, mem_model, ids, out: Path, report: dict, name: str) -> dict:
    r = report.setdefault(name, {})
    r["HF class loaded"] = type(hf).__name__
    pl, g, dl = hf_prefill_and_greedy(hf, ids, N_GREEDY)
    assert_no_eos(g)
    with torch.no_grad():
        nocache = hf(input_ids=ids[None], use_cache=False).logits[0].float()
        hidden = hf.model(input_ids=ids[None], use_cache=False).last_hidden_state[0].float()
        mem = mem_model(input_ids=ids[None], use_cache=False).logits[0].float()
    r["prefill use_cache=True vs False max diff"] = maxabs(pl, nocache)
    r["in-memory model vs reloaded checkpoint max diff"] = maxabs(mem, pl)
    r["generate() == manual greedy"] = bool(torch.equal(hf_generate(hf, ids, N_GREEDY), g))
    a, b = hf_chunked(hf, ids, CHUNK_SPLIT)
    r["chunk: first forward vs prompt_logits[:70] max diff"] = maxabs(a, pl[:CHUNK_SPLIT])
    r["chunk: continuation vs prompt_logits[70:] max diff"] = maxabs(b, pl[CHUNK_SPLIT:])
    r["decode top1-top2 min margin"] = top2_margin(dl)

    # independent token-by-token reference, weights read straight from the files
    W = ref.to_f32(read_safetensors_dir(out))
    rcfg = ref_cfg_from_hf(hf.config)
    lp, h_ref, ld = ref_main(W, rcfg, ids, g)
    r["independent ref vs HF: prompt_logits max diff"] = maxabs(lp, pl)
    r["independent ref vs HF: decode_logits max diff"] = maxabs(ld, dl)
    r["independent ref vs HF: final hidden max diff"] = maxabs(h_ref, hidden)
    mtp_logits, d_logits, d_ids = ref_mtp(W, rcfg, ids, hidden, int(g[0]), MTP_DRAFT_STEPS)
    r["prompt_logits max |x|"] = float(pl.abs().max())
    r["greedy_ids"] = g.tolist()
    r["mtp_draft_ids"] = d_ids.tolist()
    return {
        "prompt_ids": ids,
        "prompt_logits": pl,
        "prompt_hidden": hidden,
        "greedy_ids": g,
        "decode_logits": dl,
        "chunk_split": torch.tensor([CHUNK_SPLIT], dtype=torch.int64),
        "chunk_logits": torch.cat([a, b]),
        "mtp_logits": mtp_logits,
        "mtp_draft_logits": d_logits,
        "mtp_draft_ids": d_ids,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["qwen35-tiny-f32", "qwen35-tiny-bf16-vl"])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    report: dict = {}
    if args.only in (None, "qwen35-tiny-f32"):
        make_f32(report)
    if args.only in (None, "qwen35-tiny-bf16-vl"):
        make_bf16_vl(report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
