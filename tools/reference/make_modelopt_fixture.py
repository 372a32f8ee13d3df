#!/usr/bin/env python
"""NVFP4 (W4A4) + FP8-KV ModelOpt export of a tiny random Qwen3.5, plus dequant/emulation references.

    nice -n 10 /work/venv/bin/python tools/reference/make_modelopt_fixture.py

Writes
  tests/fixtures/qwen35-tiny-nvfp4-src/  bf16 source checkpoint (plain `model.*` + `mtp.*`, single file)
  tests/fixtures/qwen35-tiny-nvfp4/      ModelOpt 0.47 export (config.json + quantization_config,
                                         hf_quant_config.json, model.safetensors, generation_config.json),
                                         expected.safetensors, modules.json

The flow mirrors ModelOpt's examples/llm_ptq/hf_ptq.py for an MTP model: quantize the HF text model with
NVFP4_DEFAULT_CFG + FP8_KV_CFG (max calibration), set `model._mtp_layer_prefixes = ["mtp"]` and pass the
untouched bf16 `mtp.*` tensors as `extra_state_dict` to `export_hf_checkpoint`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from safetensors import safe_open

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_qwen35_fixtures as M  # noqa: E402

SRC = M.FIX / "qwen35-tiny-nvfp4-src"
OUT = M.FIX / "qwen35-tiny-nvfp4"
SEED = 4242
T_PROMPT = 100  # > 1 GDN chunk
CALIB_SHAPE = (8, 64)

# ModelOpt 0.47's NVFP4 fake-quant op asserts CUDA tensors; calibration (max) and export work on CPU.
FAKEQUANT_OK = torch.cuda.is_available()

E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


# ---------------------------------------------------------------- NVFP4 helpers (doc §1–§3)


def e2m1_rne(x: torch.Tensor) -> torch.Tensor:
    """f32 -> E2M1 value with RNE on the magnitude code and saturation at 6 (doc §1)."""
    a = x.abs()
    # interval rule: [0,.25]->0 (.25,.75)->.5 [.75,1.25]->1 (1.25,1.75)->1.5 [1.75,2.5]->2 (2.5,3.5)->3 [3.5,5]->4 (5,inf)->6
    v = torch.zeros_like(a)
    v = torch.where(a > 0.25, 0.5, v)
    v = torch.where(a >= 0.75, 1.0, v)
    v = torch.where(a > 1.25, 1.5, v)
    v = torch.where(a >= 1.75, 2.0, v)
    v = torch.where(a > 2.5, 3.0, v)
    v = torch.where(a >= 3.5, 4.0, v)
    v = torch.where(a > 5.0, 6.0, v)
    return torch.where(x < 0, -v, v)


def fake_quant_act(x: torch.Tensor, input_scale: float) -> torch.Tensor:
    """W4A4 activation fake-quant exactly as doc §2: SF = e4m3((1/input_scale)*amax16/6),
    q = E2M1_RNE(x/input_scale/SF), x' = E2M1[q]*SF*input_scale.  Computed in f32 along the last dim."""
    shp = x.shape
    xf = x.float().reshape(-1, shp[-1] // 16, 16)
    inv = 1.0 / torch.tensor(input_scale, dtype=torch.float32)
    amax = xf.abs().amax(-1, keepdim=True)
    sf = (inv * amax / 6.0).to(torch.float8_e4m3fn).float()
    safe = torch.where(sf == 0, torch.ones_like(sf), sf)
    q = e2m1_rne(xf * inv / safe)
    q = torch.where(sf == 0, torch.zeros_like(q), q)
    return (q * sf * torch.tensor(input_scale, dtype=torch.float32)).reshape(shp).to(x.dtype)


def dequant_weight(packed: torch.Tensor, wscale: torch.Tensor, wscale2: torch.Tensor) -> torch.Tensor:
    """U8 [out,in/2] (even element = low nibble), E4M3 [out,in/16], f32 [] -> f32 [out,in] (doc §2/§3)."""
    lo = (packed & 0x0F).long()
    hi = (packed >> 4).long()
    codes = torch.stack([lo, hi], -1).reshape(packed.shape[0], -1)
    vals = E2M1[codes]
    s = wscale.float().repeat_interleave(16, dim=1)
    return vals * s * wscale2.float()


def quantize_weight(w: torch.Tensor, group_amax: torch.Tensor):
    """Independent NVFP4 weight quantizer (doc §2): returns (packed U8, E4M3 scales, f32 weight_scale_2).

    group_amax = max |w| over the fused group (q/k/v, gate/up, in_proj_qkv/in_proj_z: modules sharing an input)."""
    wf = w.float()
    ws2 = group_amax.float() / (6.0 * 448.0)
    blocks = wf.reshape(wf.shape[0], -1, 16)
    s = blocks.abs().amax(-1) / (6.0 * ws2)
    s = torch.where(s == 0, torch.ones_like(s), s).clamp(2.0**-9, 448.0)
    sc = s.to(torch.float8_e4m3fn)
    q = e2m1_rne(blocks / (sc.float()[..., None] * ws2))
    lut = {float(v): i for i, v in enumerate(E2M1.tolist()) if i < 8}
    mag = torch.zeros_like(q, dtype=torch.uint8)
    for v, i in lut.items():
        mag = torch.where(q.abs() == v, torch.tensor(i, dtype=torch.uint8), mag)
    code = mag | torch.where(blocks < 0, 8, 0).to(torch.uint8)  # sign from x<0: tiny negatives -> 0x8 (-0)
    code = code.reshape(wf.shape[0], -1)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed, sc, ws2


# ---------------------------------------------------------------- build + quantize + export


def build_src():
    cfg = M.text_config(tie=False)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    model, mtp = M.build_random_model(cfg, SEED)
    model = model.to(torch.bfloat16)
    mtp = {k: v.to(torch.bfloat16) for k, v in mtp.items()}
    if SRC.exists():
        shutil.rmtree(SRC)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        SRC.mkdir(parents=True)
        sd = {}
        with safe_open(str(Path(tmp) / "model.safetensors"), "pt") as sf:
            for k in sf.keys():
                sd[k] = sf.get_tensor(k)
        sd.update(mtp)
        M.save_st(sd, SRC / "model.safetensors")
        c = json.loads((Path(tmp) / "config.json").read_text())
    c["mtp_num_hidden_layers"] = 1
    c["mtp_use_dedicated_embeddings"] = False
    (SRC / "config.json").write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    M.write_generation_config(SRC)
    return mtp


def quantize_and_export(mtp: dict, calib_ids: torch.Tensor, report: dict):
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    from modelopt.torch.quantization.utils.core_utils import update_quant_cfg_with_kv_cache_quant

    model = M.load_hf(SRC, torch.bfloat16)
    cfg = update_quant_cfg_with_kv_cache_quant(mtq.NVFP4_DEFAULT_CFG, mtq.FP8_KV_CFG["quant_cfg"])

    def forward_loop(m):
        with torch.no_grad():
            for row in calib_ids:
                m(input_ids=row[None], use_cache=False)

    model = mtq.quantize(model, cfg, forward_loop=forward_loop)

    # record per-module quantizer state before export mutates the model
    mods = {"linear": {}, "other_with_quantizers": {}}
    wq_fake = {}
    for name, m in model.named_modules():
        wq = getattr(m, "weight_quantizer", None)
        iq = getattr(m, "input_quantizer", None)
        if isinstance(m, torch.nn.Linear) or wq is not None:
            ent = {
                "class": type(m).__name__,
                "weight_quantizer_enabled": bool(wq is not None and wq.is_enabled),
                "input_quantizer_enabled": bool(iq is not None and iq.is_enabled),
            }
            key = "linear" if isinstance(m, torch.nn.Linear) else "other_with_quantizers"
            mods[key][name] = ent
            if wq is not None and wq.is_enabled and isinstance(m, torch.nn.Linear) and FAKEQUANT_OK:
                with torch.no_grad():
                    wq_fake[name] = wq(m.weight.detach()).float()
        for qn in ("k_bmm_quantizer", "v_bmm_quantizer"):
            q = getattr(m, qn, None)
            if q is not None:
                mods.setdefault("kv_bmm_quantizers", {})[f"{name}.{qn}"] = {
                    "enabled": bool(q.is_enabled),
                    "amax": None if getattr(q, "amax", None) is None else float(q.amax.float().max()),
                }
    # modelopt's own fake-quant forward (bf16 compute) for a sanity comparison
    prompt = torch.randint(0, M.PROMPT_HI, (T_PROMPT,), generator=torch.Generator().manual_seed(SEED + 1))
    mo_logits = None
    if FAKEQUANT_OK:
        with torch.no_grad():
            mo_logits = model(input_ids=prompt[None], use_cache=False).logits[0].float()

    model._mtp_layer_prefixes = ["mtp"]
    if OUT.exists():
        shutil.rmtree(OUT)
    with warnings.catch_warnings(record=True) as wlist:
        warnings.simplefilter("always")
        export_hf_checkpoint(model, dtype=torch.bfloat16, export_dir=OUT, extra_state_dict=mtp)
    report["export warnings"] = sorted({str(w.message)[:200] for w in wlist})
    M.write_generation_config(OUT)
    return mods, wq_fake, prompt, mo_logits


# ---------------------------------------------------------------- references from the exported files


def export_tensors() -> dict:
    return M.read_safetensors_dir(OUT)


def dequantized_f32_model(ex: dict):
    """Qwen3_5ForCausalLM in f32 whose weights are taken ONLY from the export (NVFP4 ones dequantized)."""
    from transformers import AutoConfig, Qwen3_5ForCausalLM

    cfg = AutoConfig.from_pretrained(str(SRC))
    cfg._attn_implementation = "eager"
    model = Qwen3_5ForCausalLM(cfg).eval()
    sd = {}
    qmods = sorted(k[: -len(".weight_scale")] for k in ex if k.endswith(".weight_scale"))
    for k, v in ex.items():
        if k.startswith("mtp.") or k.endswith((".weight_scale", ".weight_scale_2", ".input_scale", "_scale")):
            continue
        mod = k[: -len(".weight")] if k.endswith(".weight") else None
        if mod in qmods:
            sd[k] = dequant_weight(v, ex[mod + ".weight_scale"], ex[mod + ".weight_scale_2"])
        else:
            sd[k] = v.float()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight" or not cfg.tie_word_embeddings]
    assert not missing and not unexpected, (missing, unexpected)
    return model, qmods


def modelopt_qdq(x: torch.Tensor, input_scale: float) -> torch.Tensor:
    """ModelOpt's own CPU NVFP4QTensor quantize/dequantize with weights_scaling_factor_2 = input_scale
    (SF = e4m3(amax/(6*input_scale)), q = x/(SF*input_scale)) - used only to measure agreement."""
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

    s2 = torch.tensor(input_scale, dtype=torch.float32)
    qt, sc, _ = NVFP4QTensor.quantize(x.float().clone(), 16, weights_scaling_factor_2=s2)
    return qt.dequantize(dtype=torch.float32, scale=sc, double_scale=s2, block_sizes={-1: 16})


ACT_STATS = {"elements": 0, "code_differs_from_modelopt_qtensor": 0, "last_ulp_differs (product order)": 0}


@torch.no_grad()
def run_w4a4(model, ex, qmods, prompt, kv8: bool, stats: bool = False):
    hooks = []

    def hook(m, args, s):
        y = fake_quant_act(args[0], s)
        if stats:
            try:
                z = modelopt_qdq(args[0], s).reshape(y.shape)
                ACT_STATS["elements"] += y.numel()
                big = (z - y).abs() > 1e-5 * y.abs()
                ACT_STATS["code_differs_from_modelopt_qtensor"] += int(big.sum())
                ACT_STATS["last_ulp_differs (product order)"] += int(((z != y) & ~big).sum())
            except Exception as e:  # noqa: BLE001
                ACT_STATS["error"] = f"{type(e).__name__}: {e}"[:200]
        return (y,)

    for name in qmods:
        mod = model.get_submodule(name)
        s = float(ex[name + ".input_scale"])
        hooks.append(mod.register_forward_pre_hook(lambda m, args, s=s: hook(m, args, s)))
    orig = None
    if kv8:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as mq

        for i, t in enumerate(model.config.layer_types):
            if t == "full_attention":
                attn = model.model.layers[i].self_attn
                attn._k_scale = float(ex[f"model.layers.{i}.self_attn.k_proj.k_scale"])
                attn._v_scale = float(ex[f"model.layers.{i}.self_attn.v_proj.v_scale"])
        orig = mq.eager_attention_forward

        def kv8_eager(module, q, k, v, *a, **kw):
            # the cache stores e4m3_satfinite(k / k_scale); reading back gives e4m3 * k_scale (doc §4)
            k = (k.float() / module._k_scale).to(torch.float8_e4m3fn).float() * module._k_scale
            v = (v.float() / module._v_scale).to(torch.float8_e4m3fn).float() * module._v_scale
            return orig(module, q, k.to(q.dtype), v.to(q.dtype), *a, **kw)

        mq.eager_attention_forward = kv8_eager
    try:
        return model(input_ids=prompt[None], use_cache=False).logits[0].float()
    finally:
        for h in hooks:
            h.remove()
        if orig is not None:
            mq.eager_attention_forward = orig


def main():
    torch.set_num_threads(1)
    report: dict = {}
    mtp = build_src()
    calib_ids = torch.randint(0, M.PROMPT_HI, CALIB_SHAPE, generator=torch.Generator().manual_seed(SEED + 2))
    mods, wq_fake, prompt, mo_logits = quantize_and_export(mtp, calib_ids, report)

    ex = export_tensors()
    hfq = json.loads((OUT / "hf_quant_config.json").read_text())
    cfgj = json.loads((OUT / "config.json").read_text())
    src = M.read_safetensors_dir(SRC)

    # --- modules.json
    quantized = sorted(k[: -len(".weight_scale")] for k in ex if k.endswith(".weight_scale"))
    linears = sorted(mods["linear"])
    excluded = [n for n in linears if n not in quantized]
    kv_scales = sorted(k for k in ex if k.endswith(("k_scale", "v_scale")))
    dtypes = {}
    for k, v in sorted(ex.items()):
        dtypes.setdefault(str(v.dtype).replace("torch.", ""), []).append(k)
    modules = {
        "producer": hfq.get("producer"),
        "quant_algo": hfq["quantization"].get("quant_algo"),
        "kv_cache_quant_algo": hfq["quantization"].get("kv_cache_quant_algo"),
        "exclude_modules": hfq["quantization"].get("exclude_modules"),
        "quantized_linear_modules": quantized,
        "excluded_linear_modules": excluded,
        "non_linear_modules_with_quantizers": mods["other_with_quantizers"],
        "kv_bmm_quantizers": mods.get("kv_bmm_quantizers", {}),
        "kv_scale_tensors": kv_scales,
        "mtp_tensors_in_export": sorted(k for k in ex if k.startswith("mtp.")),
        "linear_quantizer_state": mods["linear"],
        "tensor_names_by_dtype": {k: len(v) for k, v in dtypes.items()},
        "scale_tensors": {
            k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
            for k, v in sorted(ex.items())
            if k.endswith(("_scale", "_scale_2"))
        },
    }
    # fused-group sharing of weight_scale_2 / input_scale
    groups = {}
    for q in quantized:
        parent, leaf = q.rsplit(".", 1)
        groups.setdefault(parent, {})[leaf] = {
            "weight_scale_2": float(ex[q + ".weight_scale_2"]),
            "input_scale": float(ex[q + ".input_scale"]),
        }
    modules["per_parent_scales"] = groups
    (OUT / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")

    # --- checks: unquantized tensors unchanged, dequant == modelopt weight fake-quant
    unchanged = []
    for k, v in ex.items():
        if k in src and v.dtype == src[k].dtype and v.shape == src[k].shape:
            unchanged.append(bool(torch.equal(v, src[k])))
    report["unquantized export tensors identical to source"] = f"{sum(unchanged)}/{len(unchanged)}"
    worst = 0.0
    for name, fq in wq_fake.items():
        if name in quantized:
            dq = dequant_weight(ex[name + ".weight"], ex[name + ".weight_scale"], ex[name + ".weight_scale_2"])
            worst = max(worst, M.maxabs(dq.to(torch.bfloat16), fq))
    report["max|my dequant (bf16) - modelopt weight fake-quant|"] = worst if FAKEQUANT_OK else "skipped (needs CUDA)"

    # independent re-quantization of every NVFP4 weight from the bf16 source (byte-for-byte)
    fused = {}
    for n in quantized:
        parent, leaf = n.rsplit(".", 1)
        key = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gu", "up_proj": "gu",
               "in_proj_qkv": "gdn_in", "in_proj_z": "gdn_in"}.get(leaf, leaf)
        fused.setdefault((parent, key), []).append(n)
    mism = []
    for members in fused.values():
        amax = torch.stack([src[m + ".weight"].float().abs().max() for m in members]).max()
        for m in members:
            pk, sc, ws2 = quantize_weight(src[m + ".weight"], amax)
            ok = (
                torch.equal(pk, ex[m + ".weight"])
                and torch.equal(sc.view(torch.uint8), ex[m + ".weight_scale"].view(torch.uint8))
                and torch.equal(ws2.reshape(()).view(torch.int32), ex[m + ".weight_scale_2"].reshape(()).view(torch.int32))
            )
            if not ok:
                mism.append(m)
    report["independent re-quantization byte-exact (fused groups share amax)"] = (
        "ALL MATCH" if not mism else f"mismatch: {mism}"
    )
    report["fused groups used"] = sorted({"/".join(sorted(x.rsplit(".", 1)[1] for x in v)) for v in fused.values()})

    # activation fake-quant vs modelopt's input quantizer (on a fresh quantizer replica is hard; use the math
    # check on random data against an independent torch float8 path instead): E2M1 table round trip
    x = torch.randn(4, 64) * 3
    fq = fake_quant_act(x, 0.01)
    report["act fake-quant sanity: max rel err"] = float(((fq - x).abs() / x.abs().clamp_min(1e-3)).median())

    # --- references
    model32, qmods = dequantized_f32_model(ex)
    assert qmods == quantized
    with torch.no_grad():
        w4a16 = model32(input_ids=prompt[None], use_cache=False).logits[0].float()
    w4a4 = run_w4a4(model32, ex, qmods, prompt, kv8=False, stats=True)
    report["W4A4 act fake-quant (doc/kernel formula) vs ModelOpt NVFP4QTensor qdq"] = dict(ACT_STATS)
    w4a4_kv8 = run_w4a4(model32, ex, qmods, prompt, kv8=True)
    bf = M.load_hf(SRC, torch.float32)
    with torch.no_grad():
        bf16_logits = bf(input_ids=prompt[None], use_cache=False).logits[0].float()
    bf16c = M.load_hf(SRC, torch.bfloat16)
    with torch.no_grad():
        bf16c_logits = bf16c(input_ids=prompt[None], use_cache=False).logits[0].float()

    report["max|w4a16 - bf16|"] = M.maxabs(w4a16, bf16_logits)
    report["max|w4a4 - bf16|"] = M.maxabs(w4a4, bf16_logits)
    report["max|w4a4 - w4a16|"] = M.maxabs(w4a4, w4a16)
    report["max|w4a4_kv8 - w4a4|"] = M.maxabs(w4a4_kv8, w4a4)
    if mo_logits is not None:
        report["max|modelopt fake-quant (bf16 compute) - w4a4 emulation (f32)|"] = M.maxabs(mo_logits, w4a4)
        report["max|modelopt fake-quant (bf16 compute) - bf16 (f32 compute)|"] = M.maxabs(mo_logits, bf16_logits)
        report["argmax agreement modelopt vs w4a4"] = float((mo_logits.argmax(-1) == w4a4.argmax(-1)).float().mean())
    report["max|HF bf16 compute - f32 compute of bf16 weights|"] = M.maxabs(bf16c_logits, bf16_logits)
    report["argmax agreement w4a4 vs bf16"] = float((w4a4.argmax(-1) == bf16_logits.argmax(-1)).float().mean())

    # does transformers load the export? (needs the modelopt quantizer integration; record the outcome)
    try:
        from transformers import AutoModelForCausalLM

        AutoModelForCausalLM.from_pretrained(str(OUT), attn_implementation="eager")
        report["transformers from_pretrained(export)"] = "loaded"
    except Exception as e:  # noqa: BLE001
        report["transformers from_pretrained(export)"] = f"{type(e).__name__}: {str(e)[:200]}"

    M.save_st(
        {
            "prompt_ids": prompt,
            "calib_ids": calib_ids,
            "bf16_logits": bf16_logits,
            "w4a16_logits": w4a16,
            "w4a4_logits": w4a4,
            "w4a4_kv8_logits": w4a4_kv8,
        },
        OUT / "expected.safetensors",
    )
    report["quantized"] = quantized
    report["excluded"] = excluded
    report["kv_scales"] = {k: float(ex[k]) for k in kv_scales}
    report["hf_quant_config"] = hfq
    report["config.quantization_config"] = cfgj.get("quantization_config")
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
