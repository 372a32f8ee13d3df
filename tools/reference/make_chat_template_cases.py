"""Render a few held-out demo conversations with transformers' apply_chat_template, so
the Rust chat-template engine can be checked against it without Python.

Usage (after tools/train_demo has generated its corpus and tokenizer):
    /work/venv/bin/python tools/reference/make_chat_template_cases.py \
        --tokenizer models/demo --corpus tools/train_demo/work/corpus/heldout.jsonl \
        --out tests/fixtures/chat-template/cases.json
"""
import argparse
import json
import random

from transformers import AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.tokenizer)
    rows = [json.loads(l) for l in open(a.corpus)]
    random.Random(a.seed).shuffle(rows)
    cases = []
    for r in rows[: a.n]:
        msgs, tools, think = r["messages"], r.get("tools") or None, r.get("enable_thinking", True)
        full = tok.apply_chat_template(msgs, tools=tools, tokenize=False, enable_thinking=think)
        # A generation prompt after the first user turn.
        first_user = next(i for i, m in enumerate(msgs) if m["role"] == "user")
        prefix = msgs[: first_user + 1]
        prompt = tok.apply_chat_template(prefix, tools=tools, tokenize=False, add_generation_prompt=True,
                                         enable_thinking=think)
        cases.append({"messages": msgs, "tools": tools, "enable_thinking": think, "expected": full})
        cases.append({"messages": prefix, "tools": tools, "enable_thinking": think,
                      "add_generation_prompt": True, "expected": prompt})
    json.dump(cases, open(a.out, "w"), indent=1, ensure_ascii=False)
    print(f"wrote {len(cases)} cases to {a.out}")


if __name__ == "__main__":
    main()
