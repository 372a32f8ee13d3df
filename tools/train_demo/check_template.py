#!/usr/bin/env python3
"""Check that the chat template in MODEL_DIR/tokenizer_config.json renders corpus
conversations exactly like gen_corpus/chatfmt formats the training text.

For every checked conversation:
* apply_chat_template(messages, tools) == record["text"] (full conversation);
* for every trained assistant turn i, apply_chat_template(messages[:i], tools,
  add_generation_prompt=True, enable_thinking=record["enable_thinking"]) is a prefix
  of record["text"] that ends right where the turn's trained span starts (modulo the
  think prefix the generation prompt already contains);
* the text tokenizes to the same ids with transformers' tokenizer and with the raw
  `tokenizers` file.

Usage: check_template.py --model models/demo --corpus DIR [--limit 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from tokenizers import Tokenizer
from transformers import AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatfmt import render  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--limit", type=int, default=2000)
    args = ap.parse_args()
    hf = AutoTokenizer.from_pretrained(args.model)
    raw = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    n_conv = n_prompt = 0
    for split in ("train", "heldout"):
        with open(os.path.join(args.corpus, f"{split}.jsonl")) as f:
            for k, line in enumerate(f):
                if k >= args.limit:
                    break
                rec = json.loads(line)
                msgs, tools, text = rec["messages"], rec["tools"], rec["text"]
                got = hf.apply_chat_template(msgs, tools=tools, tokenize=False)
                if got != text:
                    i = next(j for j in range(min(len(got), len(text))) if got[j] != text[j]) if got[:len(text)] != text[:len(got)] else min(len(got), len(text))
                    print(f"MISMATCH {rec['id']} at char {i}:\n template: {got[i - 80:i + 80]!r}\n corpus:   {text[i - 80:i + 80]!r}")
                    sys.exit(1)
                if k < 200 and hf(text)["input_ids"] != raw.encode(text).ids:
                    print(f"TOKENIZE MISMATCH {rec['id']}")
                    sys.exit(1)
                n_conv += 1
                spans = iter(rec["spans"])
                lq = max(i for i, m in enumerate(msgs) if m["role"] == "user")
                for i, m in enumerate(msgs):
                    if m["role"] != "assistant" or i <= lq:
                        continue
                    start, _ = next(spans)
                    for think in (rec["enable_thinking"],):
                        p = hf.apply_chat_template(msgs[:i], tools=tools, tokenize=False, add_generation_prompt=True,
                                                   enable_thinking=think)
                        assert p == render(msgs[:i], tools, add_generation_prompt=True, enable_thinking=think)
                        if not text.startswith(p):
                            print(f"PROMPT NOT A PREFIX {rec['id']} turn {i}:\n{p[-200:]!r}\n---\n{text[len(p) - 200:len(p) + 50]!r}")
                            sys.exit(1)
                        assert len(p) >= start and text[start:len(p)] in ("<think>\n", "<think>\n\n</think>\n\n"), text[start:len(p)]
                        n_prompt += 1
    print(f"OK: {n_conv} conversations and {n_prompt} generation prompts render identically")


if __name__ == "__main__":
    main()
