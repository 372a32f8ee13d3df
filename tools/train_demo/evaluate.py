#!/usr/bin/env python3
"""Evaluate the demo model on the held-out synthetic split; writes eval.json.

For held-out assistant turns (those after the last user query; prompt rendered with the
chat template in MODEL/tokenizer_config.json up to that turn, generation prompt included,
thinking on or off as in the conversation) the model greedily generates a reply. Reported
(the eval.json layout is documented in tools/train_demo/README.md):

* tool calls (reference turn has calls), per group: ``bash`` and ``typed_seen`` (tools
  seen in training, new requests and values) and ``procedural_heldout`` (tools whose
  names and schemas never occur in training, gen_corpus.py asserts it). Per turn: XML
  parses; right function; parameter names in the schema; values valid for their JSON
  type/enum; required parameters present; schema-valid arguments (all three, and a
  listed function); well formed (XML parses and schema-valid); exact match;
* no-call turns: share answered without a tool call (for the held-out tools: "no call when
  no tool fits" on the turns where the offered tools do not fit or no tool is needed);
  overall call/no-call decision accuracy;
* MTP: teacher-forced top-1 agreement of the MTP head with the real token t+2 (on the
  assistant tokens of held-out conversations, and on all tokens), next to the main head's
  next-token accuracy;
* speculative decoding, simulated exactly under greedy decoding on the generated replies:
  tokens per target forward for linear MTP chains of k drafts (k = 1..K; step i>1 feeds the
  MTP its own previous output and draft, vLLM style, with its own KV cache that keeps the
  first-pass entries and drops the provisional ones) and for a tree (top-2 at the first
  draft step, top-1 chains after; the target verifies both paths in one forward and keeps
  the longer accepted one). 1.0 = no speculation.

Usage: evaluate.py --model models/demo --corpus WORK/corpus [--max-prompts 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chatfmt import ENDOFTEXT, IM_END, convert_value, parse_tool_calls  # noqa: E402
from demo_model import load_release  # noqa: E402


class SimpleKV:
    """Minimal KV cache for the single MTP attention layer (what Qwen3_5Attention needs)."""

    def __init__(self):
        self.k = self.v = None

    def update(self, k, v, layer_idx, *args, **kwargs):
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]

    def crop(self, n):
        self.k, self.v = self.k[:, :, :n], self.v[:, :, :n]


def group_of(kind):
    """Metric group of a held-out conversation kind (gen_corpus families)."""
    if kind.startswith("proc_"):
        return "procedural_heldout"
    return "bash" if kind.startswith("bash_") else "typed_seen"


# ----------------------------------------------------------------------------- items


def build_items(corpus_dir, tok, max_prompts, seed):
    """Up to two assistant turns (after the last user query) per held-out conversation."""
    rng = random.Random(seed)
    items = []
    with open(os.path.join(corpus_dir, "heldout.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    for rec in recs:
        msgs = rec["messages"]
        lq = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > lq]
        pick = turns[:1] + (rng.sample(turns[1:], 1) if len(turns) > 1 else [])
        for i in pick:
            prompt = tok.apply_chat_template(msgs[:i], tools=rec["tools"], tokenize=False, add_generation_prompt=True,
                                             enable_thinking=rec["enable_thinking"])
            items.append({"id": rec["id"], "turn": i, "kind": rec["kind"], "tools": rec["tools"], "prompt": prompt,
                          "ref": msgs[i], "thinking": rec["enable_thinking"]})
    rng.shuffle(items)
    return recs, items[:max_prompts]


REPLY_TEXT_BYTES = 1500  # the reply budget in text: about what 400 v1 tokens hold; the longest reference reply is 574 bytes


def reply_budget(tok, recs, text_bytes=REPLY_TEXT_BYTES):
    """max_new_tokens holding text_bytes of reply at this tokenizer's bytes per token on
    every evaluated kind of reference reply (the assistant turns after each held-out
    conversation's last user query), so that a byte-level checkpoint gets as much text
    as a BPE one and the budget does not move with --max-prompts."""
    n_bytes = n_tokens = 0
    for rec in recs:
        msgs = rec["messages"]
        lq = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        for i in (i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > lq):
            render = dict(tools=rec["tools"], tokenize=False, enable_thinking=rec["enable_thinking"])
            prompt = tok.apply_chat_template(msgs[:i], add_generation_prompt=True, **render)
            reply = tok.apply_chat_template(msgs[:i + 1], **render)[len(prompt):]
            n_bytes += len(reply.encode())
            n_tokens += len(tok(reply)["input_ids"])
    return max(1, round(text_bytes * n_tokens / max(1, n_bytes)))


def score_calls(text, item):
    """Score one generated reply against the reference turn."""
    body = text.split("</think>")[-1] if "</think>" in text else text
    calls, ok = parse_tool_calls(body)
    ref_calls = [c["function"] for c in (item["ref"].get("tool_calls") or [])]
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in item["tools"]}
    res = {"ref_call": bool(ref_calls), "gen_call": bool(calls) or "<tool_call>" in body, "group": group_of(item["kind"])}
    if not ref_calls:
        return res
    ref_names = sorted(c["name"] for c in ref_calls)
    n_args = n_valid = 0
    listed = names_ok = types_ok = req_ok = bool(calls)
    gen_parsed = []
    for c in calls:
        sch = schemas.get(c["name"])
        if sch is None:
            listed = False
            n_args += len(c["raw_args"])
            gen_parsed.append((c["name"], None))
            continue
        vals = {}
        for k, raw in c["raw_args"].items():
            n_args += 1
            ps = sch.get("properties", {}).get(k)
            if ps is None:
                names_ok = False
                continue
            v, valid = convert_value(raw, ps)
            n_valid += valid
            types_ok &= valid
            vals[k] = v
        if any(r not in c["raw_args"] for r in sch.get("required", [])):
            req_ok = False
        gen_parsed.append((c["name"], vals))
    res["xml_ok"] = ok and bool(calls)
    res["name_correct"] = sorted(c["name"] for c in calls) == ref_names
    res["param_names_ok"] = listed and names_ok
    res["types_ok"] = listed and types_ok
    res["required_ok"] = listed and req_ok
    res["schema_valid"] = listed and names_ok and types_ok and req_ok
    res["well_formed"] = res["xml_ok"] and res["schema_valid"]
    res["n_args"], res["n_valid_args"] = n_args, n_valid
    ref_sorted = sorted((c["name"], json.dumps(c["arguments"], sort_keys=True)) for c in ref_calls)
    gen_sorted = sorted((n, json.dumps(v, sort_keys=True)) for n, v in gen_parsed)
    res["exact"] = ref_sorted == gen_sorted
    return res


RATES = {"well_formed_rate": "well_formed", "xml_parse_rate": "xml_ok", "function_name_accuracy": "name_correct",
         "param_names_in_schema_rate": "param_names_ok", "value_types_valid_rate": "types_ok",
         "required_present_rate": "required_ok", "schema_valid_args_rate": "schema_valid", "exact_call_match": "exact"}


def aggregate(rows):
    """Rates over the turns whose reference has calls (all in [0, 1])."""
    call_rows = [r for r in rows if r["ref_call"]]
    out = {"n": len(call_rows)}
    if call_rows:
        for key, field in RATES.items():
            out[key] = sum(r[field] for r in call_rows) / len(call_rows)
        na = sum(r["n_args"] for r in call_rows)
        out["arg_type_validity"] = (sum(r["n_valid_args"] for r in call_rows) / na) if na else 0.0
    return out


def no_call(rows):
    """Turns whose reference has no call: share answered without one."""
    nc = [r for r in rows if not r["ref_call"]]
    return {"n": len(nc), "answered_without_call_rate": (sum(not r["gen_call"] for r in nc) / len(nc)) if nc else None}


def call_metrics(rows):
    """The tool-call part of eval.json from scored rows (score_calls plus "kind")."""
    groups = {g: [r for r in rows if r["group"] == g] for g in ("bash", "typed_seen", "procedural_heldout")}
    held = groups["procedural_heldout"]
    return {
        # Tools seen in training (bash and the hand-written typed tools; new requests and values).
        "tool_calls": aggregate(groups["bash"] + groups["typed_seen"]),
        # Procedural tools whose names and schemas never occur in training.
        "heldout_tools": {**aggregate(held),
                          # offered tools do not fit the request, or no tool is needed (proc_nofit, proc_chat)
                          "no_call_when_no_tool_fits": no_call([r for r in held if r["kind"] in ("proc_nofit", "proc_chat")])},
        "tool_calls_all": aggregate(rows),
        "tool_calls_by_group": {g: aggregate(v) for g, v in groups.items()},
        "no_call_turns": {**no_call(rows), "by_group": {g: no_call(v) for g, v in groups.items()}},
        "call_decision_accuracy": sum(r["gen_call"] == r["ref_call"] for r in rows) / max(1, len(rows)),
    }


# ----------------------------------------------------------------------------- speculation


@torch.no_grad()
def mtp_first_pass(model, h, ids, start, end, kv):
    """MTP entries for positions start..end (inclusive) from true hidden states; returns m[end]."""
    T = end - start + 1
    pos = torch.arange(start, end + 1).unsqueeze(0)
    mask = None
    if T > 1 and len(kv) > 0:
        past = len(kv)
        mask = (torch.arange(past + T).unsqueeze(0) <= (past + torch.arange(T)).unsqueeze(1))[None, None]
    m = model.mtp_forward(h[:, start:end + 1], ids[:, start + 1:end + 2], pos, attention_mask=mask, past_key_values=kv)
    return m[:, -1:]


@torch.no_grad()
def mtp_chain(model, m, first, pos0, k, kv):
    """Drafts 2..k: feed (previous MTP output, previous draft) at consecutive positions."""
    drafts = [first]
    for i in range(1, k):
        pos = torch.tensor([[pos0 + i]])
        m = model.mtp_forward(m, torch.tensor([[drafts[-1]]]), pos, past_key_values=kv)
        drafts.append(int(model.lm.lm_head(m)[0, -1].argmax()))
    return drafts


@torch.no_grad()
def simulate(model, ids, h, tgt, L, k, tree):
    """Tokens per target forward for one generated sequence. ids [1, L+N] (prompt + greedy
    output); h [1, L+N, H] target hiddens after the final norm; tgt[t] = target argmax at
    position t. State: tokens known up to n+1, hiddens up to n."""
    total = ids.shape[1]
    kv = SimpleKV()
    done = 0  # MTP first-pass entries in the cache: positions 0..done-1
    n = L - 1
    forwards = produced = 0
    while n + 1 < total - 1:
        m = mtp_first_pass(model, h, ids, done, n, kv)
        done = n + 1
        logits = model.lm.lm_head(m)[0, -1]
        top = logits.topk(2).indices.tolist()
        best = 0
        for b in (top[:2] if tree else top[:1]):
            drafts = mtp_chain(model, m, b, n, k, kv)
            kv.crop(done)
            a = 0
            while a < k and n + 2 + a < total and drafts[a] == tgt[n + 2 + a]:  # d_{a+1} guesses position n+2+a
                a += 1
            best = max(best, a)
        gain = min(best + 1, total - 1 - (n + 1))
        produced += gain
        forwards += 1
        n += gain
    return produced, forwards


# ----------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--corpus", required=True, help="directory with heldout.jsonl")
    ap.add_argument("--out", help="default: MODEL/eval.json")
    ap.add_argument("--max-prompts", type=int, default=200)
    ap.add_argument("--max-new-tokens", type=int, default=0,
                    help="reply budget in tokens (0: the tokens of 1500 bytes of reply text for this tokenizer)")
    ap.add_argument("--mtp-convs", type=int, default=100, help="held-out conversations for teacher-forced MTP agreement")
    ap.add_argument("--spec-k", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.time()

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    model = load_release(args.model)
    eos = [tok.convert_tokens_to_ids(IM_END), tok.convert_tokens_to_ids(ENDOFTEXT)]
    recs, items = build_items(args.corpus, tok, args.max_prompts, args.seed)
    args.max_new_tokens = args.max_new_tokens or reply_budget(tok, recs)
    print(f"{len(items)} held-out prompts, at most {args.max_new_tokens} new tokens each", flush=True)

    rows, examples = [], []
    spec = {f"linear_k{k}": [0, 0] for k in range(1, args.spec_k + 1)}
    spec[f"tree2_k{args.spec_k}"] = [0, 0]
    tf_mismatch = tf_total = 0
    for j, it in enumerate(items):
        pids = torch.tensor([tok(it["prompt"])["input_ids"]])
        L = pids.shape[1]
        with torch.no_grad():
            out = model.lm.generate(pids, max_new_tokens=args.max_new_tokens, do_sample=False, eos_token_id=eos,
                                    pad_token_id=eos[1])
        gen = out[0, L:].tolist()
        text = tok.decode(gen, skip_special_tokens=False)
        text_clean = text.split(IM_END)[0]
        r = score_calls(text_clean, it)
        r["kind"] = it["kind"]
        rows.append(r)
        if len(examples) < 12:
            examples.append({"id": it["id"], "turn": it["turn"], "thinking": it["thinking"],
                             "prompt_tail": it["prompt"][-300:], "generated": text,
                             "reference": {k: v for k, v in it["ref"].items() if k != "role"}, "score": r})
        # speculation on the greedy sequence
        if len(gen) >= 2:
            with torch.no_grad():
                h = model.lm.model(input_ids=out).last_hidden_state
                tgt = model.lm.lm_head(h)[0].argmax(-1).tolist()
            tf_total += len(gen)
            tf_mismatch += sum(tgt[L - 1 + i] != gen[i] for i in range(len(gen)))
            tgt_next = [None] * out.shape[1]  # tgt_next[p] = target token at position p (= argmax at p-1)
            for p in range(1, out.shape[1]):
                tgt_next[p] = tgt[p - 1]
            for key in spec:
                k = int(key.split("_k")[1])
                p_, f_ = simulate(model, out, h, tgt_next, L, k, key.startswith("tree"))
                spec[key][0] += p_
                spec[key][1] += f_
        if (j + 1) % 10 == 0:
            print(f"  {j + 1}/{len(items)} prompts, {time.time() - t0:.0f}s", flush=True)

    # teacher-forced MTP agreement on held-out conversations
    agree = {"mtp_asst": [0, 0], "mtp_all": [0, 0], "main_asst": [0, 0], "main_all": [0, 0]}
    for rec in recs[:args.mtp_convs]:
        enc = tok(rec["text"], return_offsets_mapping=True)
        ids = torch.tensor([enc["input_ids"]])
        asst = [any(a <= s < b for a, b in rec["spans"]) for s, _ in enc["offset_mapping"]]
        T = ids.shape[1]
        with torch.no_grad():
            h = model.lm.model(input_ids=ids).last_hidden_state
            main = model.lm.lm_head(h)[0].argmax(-1)
            m = model.mtp_forward(h[:, :-1], ids[:, 1:], torch.arange(T - 1).unsqueeze(0))
            mtp = model.lm.lm_head(m[:, :-1])[0].argmax(-1)
        for t in range(T - 1):
            ok = int(main[t] == ids[0, t + 1])
            agree["main_all"][0] += ok
            agree["main_all"][1] += 1
            if asst[t + 1]:
                agree["main_asst"][0] += ok
                agree["main_asst"][1] += 1
        for t in range(T - 2):
            ok = int(mtp[t] == ids[0, t + 2])
            agree["mtp_all"][0] += ok
            agree["mtp_all"][1] += 1
            if asst[t + 2]:
                agree["mtp_asst"][0] += ok
                agree["mtp_asst"][1] += 1

    res = {
        "model": args.model,
        "heldout_prompts": len(rows),
        **call_metrics(rows),
        "mtp_teacher_forced": {
            "conversations": min(args.mtp_convs, len(recs)),
            "mtp_top1_agreement_assistant_tokens": agree["mtp_asst"][0] / max(1, agree["mtp_asst"][1]),
            "mtp_top1_agreement_all_tokens": agree["mtp_all"][0] / max(1, agree["mtp_all"][1]),
            "main_next_token_accuracy_assistant_tokens": agree["main_asst"][0] / max(1, agree["main_asst"][1]),
            "main_next_token_accuracy_all_tokens": agree["main_all"][0] / max(1, agree["main_all"][1]),
            "assistant_tokens": agree["mtp_asst"][1],
        },
        "speculative_decoding": {
            "tokens_per_target_forward": {k: (v[0] / v[1] if v[1] else None) for k, v in spec.items()},
            "target_forwards": {k: v[1] for k, v in spec.items()},
            "no_speculation": 1.0,
            "note": "greedy, simulated on the generated replies (decode phase, prefill excluded); "
                    "tree2 = top-2 first drafts, top-1 chains after, best accepted path",
            "teacher_forced_vs_cached_greedy_mismatch_rate": tf_mismatch / max(1, tf_total),
        },
        "settings": {"max_prompts": args.max_prompts, "max_new_tokens": args.max_new_tokens, "spec_k": args.spec_k,
                     "seed": args.seed, "threads": args.threads},
        "seconds": round(time.time() - t0, 1),
        "examples": examples,
    }
    out = args.out or os.path.join(args.model, "eval.json")
    with open(out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    brief = {k: v for k, v in res.items() if k not in ("examples",)}
    print(json.dumps(brief, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
