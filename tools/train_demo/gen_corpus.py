#!/usr/bin/env python3
"""Seeded synthetic multi-turn agent conversations in the Qwen3.5 chat format.

Two families of conversations:

* coding-agent sessions with a ``bash`` tool (ls, cat, grep, sed, find, git, python,
  pytest, pip ... over a randomly generated repository, with synthetic outputs);
* typed function calling over a pool of invented tools (integer, number, boolean, enum,
  array and object parameters), with distractor tools, per-conversation tool-name and
  parameter-name aliases (canonical names 85% of the time), parallel and sequential
  calls, turns that need no tool and requests that no listed tool can serve.

Each output line is one conversation: ``tools`` (OpenAI format), ``messages``,
``enable_thinking`` (False: every reasoning_content is empty, the model's default mode),
``text`` (rendered by chatfmt.render, identical to the chat template) and ``spans``
(character ranges of the assistant turns to train on, i.e. those after the last user
query). The held-out split uses a different seed; a quarter of its tool names, and a few
tools, never occur in the training split (a generalisation probe that evaluate.py reports
apart from the headline numbers).

Usage: gen_corpus.py --out DIR [--seed 1234] [--n-train 20000] [--n-heldout 300]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatfmt import render  # noqa: E402
from corpus.bash_agent import bash_conversation  # noqa: E402
from corpus.typed_base import TOOLS  # noqa: E402
from corpus.typed_convs import typed_conversation  # noqa: E402


# ----------------------------------------------------------------------------- main


def make(r, split, bash_frac=0.4):
    while True:
        conv = bash_conversation(r, split) if r.random() < bash_frac else typed_conversation(r, split)
        if conv is not None:
            break
    spans = []
    conv["text"] = render(conv["messages"], conv["tools"], spans=spans)
    conv["spans"] = spans
    return conv


def check_split_disjoint():
    train_names = {n for t in TOOLS if not t.heldout_only for n in t.names}
    held = {n for t in TOOLS for n in t.held_names} | {n for t in TOOLS if t.heldout_only for n in t.names}
    assert not (train_names & held), train_names & held
    allnames = [n for t in TOOLS for n in t.names + t.held_names]
    assert len(allnames) == len(set(allnames)), "duplicate tool alias"
    for t in TOOLS:
        assert all(p.aliases[0] == p.name for p in t.params), (t.key, "first alias must be the canonical name")
    for t in TOOLS:  # keep schemas free of characters some Jinja tojson filters HTML-escape
        s = json.dumps(t.instantiate(random.Random(0), "train")[0])
        assert not any(ch in s for ch in "<>&'"), (t.key, s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--heldout-seed", type=int, default=None, help="default: seed + 1000003")
    ap.add_argument("--n-train", type=int, default=20000)
    ap.add_argument("--n-heldout", type=int, default=300)
    args = ap.parse_args()
    check_split_disjoint()
    os.makedirs(args.out, exist_ok=True)
    hs = args.heldout_seed if args.heldout_seed is not None else args.seed + 1000003
    for split, seed, n in (("train", args.seed, args.n_train), ("heldout", hs, args.n_heldout)):
        r = random.Random(seed)
        path = os.path.join(args.out, f"{split}.jsonl")
        chars = 0
        with open(path, "w") as f:
            for i in range(n):
                conv = make(r, split)
                conv = {"id": f"{split}-{i:06d}", "split": split, **conv}
                chars += len(conv["text"])
                f.write(json.dumps(conv, ensure_ascii=False) + "\n")
        print(f"{split}: {n} conversations, {chars / 1e6:.2f}M chars -> {path}")


if __name__ == "__main__":
    main()
