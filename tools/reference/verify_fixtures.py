#!/usr/bin/env python
"""Re-check the committed fixtures from disk alone (no regeneration) and print max-abs differences.

    nice -n 10 /work/venv/bin/python tools/reference/verify_fixtures.py

* qwen35-tiny-f32 / qwen35-tiny-bf16-vl: reload with AutoModelForCausalLM (eager, torch fallbacks),
  recompute prompt/decode/chunk logits, and recompute prompt + MTP logits with the independent
  token-by-token reference (qwen35_ref.py) straight from the safetensors files.
* qwen35-tiny-nvfp4: re-derive w4a16 / w4a4 / w4a4_kv8 logits from the exported files, re-quantize every
  NVFP4 weight from qwen35-tiny-nvfp4-src and compare bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_modelopt_fixture as MO  # noqa: E402
import make_qwen35_fixtures as M  # noqa: E402
import qwen35_ref as ref  # noqa: E402


def check_text(name: str, out: dict):
    d = M.FIX / name
    e = load_file(str(d / "expected.safetensors"))
    r = out.setdefault(name, {})
    ids = e["prompt_ids"]
    dtypes = [torch.float32] + ([torch.bfloat16] if "prompt_logits_bf16" in e else [])
    for dt in dtypes:
        sfx = "" if dt == torch.float32 else "_bf16"
        hf = M.load_hf(d, dt)
        pl, g, dl = M.hf_prefill_and_greedy(hf, ids, e["greedy_ids" + sfx].numel())
        r["prompt_logits" + sfx] = M.maxabs(pl, e["prompt_logits" + sfx])
        r["decode_logits" + sfx] = M.maxabs(dl, e["decode_logits" + sfx])
        r["greedy_ids" + sfx + " equal"] = bool(torch.equal(g, e["greedy_ids" + sfx]))
        if dt == torch.float32:
            split = int(e["chunk_split"][0])
            a, b = M.hf_chunked(hf, ids, split)
            r["chunk_logits"] = M.maxabs(torch.cat([a, b]), e["chunk_logits"])
            with torch.no_grad():
                h = hf.model(input_ids=ids[None], use_cache=False).last_hidden_state[0].float()
            r["prompt_hidden"] = M.maxabs(h, e["prompt_hidden"])
            W = ref.to_f32(M.read_safetensors_dir(d))
            rc = M.ref_cfg_from_hf(hf.config)
            lp, _, ld = M.ref_main(W, rc, ids, e["greedy_ids"])
            r["independent ref prompt_logits"] = M.maxabs(lp, e["prompt_logits"])
            r["independent ref decode_logits"] = M.maxabs(ld, e["decode_logits"])
            ml, dl2, di = M.ref_mtp(W, rc, ids, e["prompt_hidden"], int(e["greedy_ids"][0]), e["mtp_draft_ids"].numel())
            r["mtp_logits (recomputed)"] = M.maxabs(ml, e["mtp_logits"])
            r["mtp_draft_logits (recomputed)"] = M.maxabs(dl2, e["mtp_draft_logits"])
            r["mtp_draft_ids equal"] = bool(torch.equal(di, e["mtp_draft_ids"]))


def check_nvfp4(out: dict):
    r = out.setdefault("qwen35-tiny-nvfp4", {})
    e = load_file(str(MO.OUT / "expected.safetensors"))
    ex = MO.export_tensors()
    src = M.read_safetensors_dir(MO.SRC)
    model, q = MO.dequantized_f32_model(ex)
    with torch.no_grad():
        w4a16 = model(input_ids=e["prompt_ids"][None], use_cache=False).logits[0].float()
    r["w4a16_logits"] = M.maxabs(w4a16, e["w4a16_logits"])
    r["w4a4_logits"] = M.maxabs(MO.run_w4a4(model, ex, q, e["prompt_ids"], kv8=False), e["w4a4_logits"])
    r["w4a4_kv8_logits"] = M.maxabs(MO.run_w4a4(model, ex, q, e["prompt_ids"], kv8=True), e["w4a4_kv8_logits"])
    bf = M.load_hf(MO.SRC, torch.float32)
    with torch.no_grad():
        r["bf16_logits"] = M.maxabs(bf(input_ids=e["prompt_ids"][None], use_cache=False).logits[0], e["bf16_logits"])
    mods = json.loads((MO.OUT / "modules.json").read_text())
    assert mods["quantized_linear_modules"] == q
    bad = []
    groups = {}
    for n in q:
        parent, leaf = n.rsplit(".", 1)
        key = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gu", "up_proj": "gu",
               "in_proj_qkv": "gdn_in", "in_proj_z": "gdn_in"}.get(leaf, leaf)
        groups.setdefault((parent, key), []).append(n)
    for members in groups.values():
        amax = torch.stack([src[m + ".weight"].float().abs().max() for m in members]).max()
        for m in members:
            pk, sc, ws2 = MO.quantize_weight(src[m + ".weight"], amax)
            if not (torch.equal(pk, ex[m + ".weight"]) and torch.equal(sc.view(torch.uint8), ex[m + ".weight_scale"].view(torch.uint8))
                    and float(ws2) == float(ex[m + ".weight_scale_2"])):
                bad.append(m)
    r["re-quantized weights byte-exact"] = not bad


MUTATIONS = [
    "gqa_tiled", "q_gate_blocks", "gated_norm_1plus", "gated_norm_sigmoid", "conv_flip",
    "rope_interleaved", "attn_gate_silu", "norm_plain_w", "mtp_concat_swapped",
]


def check_mutations(name: str, out: dict):
    """Max |Δ| between stored logits and the reference with one deliberate bug (should be >> 1e-3)."""
    d = M.FIX / name
    e = load_file(str(d / "expected.safetensors"))
    hf = M.load_hf(d, torch.float32)
    W = ref.to_f32(M.read_safetensors_dir(d))
    rc = M.ref_cfg_from_hf(hf.config)
    r = out.setdefault(name + " mutations (max|Δ| prompt_logits / mtp_logits)", {})
    for mut in MUTATIONS:
        ref.MUT.clear()
        ref.MUT.add(mut)
        try:
            lp, h = ref.forward(e["prompt_ids"], W, rc, ref.ModelState(rc))
            ml, _, _ = M.ref_mtp(W, rc, e["prompt_ids"], h, int(e["greedy_ids"][0]), 1)
            r[mut] = [round(M.maxabs(lp, e["prompt_logits"]), 4), round(M.maxabs(ml, e["mtp_logits"]), 4)]
        finally:
            ref.MUT.clear()


def main():
    torch.set_num_threads(1)
    out: dict = {}
    if "--mutations" in sys.argv:
        check_mutations("qwen35-tiny-f32", out)
        print(json.dumps(out, indent=2))
        return
    check_text("qwen35-tiny-f32", out)
    check_text("qwen35-tiny-bf16-vl", out)
    check_nvfp4(out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
