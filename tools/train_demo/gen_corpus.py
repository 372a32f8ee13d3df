#!/usr/bin/env python3
"""Seeded synthetic multi-turn agent conversations in the Qwen3.5 chat format.

Three families of conversations (the generators live in corpus/):

* procedural tools (corpus/procedural_*.py): tool names and JSON schemas drawn per
  conversation from word lists, 1-8 tools per request with similar-named distractors,
  calls that copy the name and parameter names from the tools block and the values from
  the request, plus requests no listed tool serves and questions that need no tool;
* coding-agent sessions with a ``bash`` tool (corpus/bash_agent.py: ls, cat, grep, sed,
  find, git, python, pytest, pip ... over an invented repository, synthetic outputs);
* typed function calling over 26 hand-written tools (corpus/typed_*.py: integer, number,
  boolean, enum, array and object parameters, parallel and sequential calls, no-tool turns);
* copy drills, training split only and opt-in (`--mix ...,copy=0.15`;
  corpus/copy_drills.py: lists of made-up words, identifiers, numbers and codes to repeat,
  and ids to echo);
* distractor-heavy procedural turns, training split only and opt-in (`--mix ...,distract=W`;
  3-8 tools, nearly every distractor sharing the target's verb or entity).

Each output line is one conversation: ``tools`` (OpenAI format), ``messages``,
``enable_thinking`` (False: every reasoning_content is empty, the model's default mode),
``text`` (rendered by chatfmt.render, identical to the chat template) and ``spans``
(character ranges of the assistant turns to train on, i.e. those after the last user
query), plus ``kind`` (``proc_*``, ``distract_*``, ``bash_*``, ``typed_*`` or ``copy_*``).

The held-out split uses seed + 1000003. Its procedural tools come from the held-out
vocabulary (corpus/vocab.py); after writing both splits the generator asserts that no
held-out tool name, parameter name or name word occurs in any training tool
(corpus/disjoint.py). Its bash and hand-written typed conversations use the training tools
(new requests and values): they measure the tools seen in training.

Usage: gen_corpus.py --out DIR [--seed 1234] [--n-train 20000] [--n-heldout 300]
                     [--mix proc=0.5,bash=0.3,typed=0.2[,copy=W]]
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
from corpus.copy_drills import copy_conversation  # noqa: E402
from corpus.disjoint import SplitTracker, check_vocab  # noqa: E402
from corpus.procedural_convs import distractor_conversation, proc_conversation  # noqa: E402
from corpus.typed_base import TOOLS  # noqa: E402
from corpus.typed_convs import typed_conversation  # noqa: E402

FAMILIES = {"proc": proc_conversation, "bash": bash_conversation, "typed": typed_conversation,
            "copy": copy_conversation, "distract": distractor_conversation}
DEFAULT_MIX = "proc=0.5,bash=0.3,typed=0.2"  # copy drills are opt-in: --mix ...,copy=0.15
TRAIN_ONLY = {"copy", "distract"}  # families the held-out split leaves out


def parse_mix(s):
    mix = {}
    for part in s.split(","):
        k, v = part.split("=")
        assert k in FAMILIES, f"unknown family {k}"
        mix[k] = float(v)
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def make(r, split, mix):
    """One rendered conversation, its family drawn from `mix`."""
    fams, weights = list(mix), [mix[k] for k in mix]
    while True:
        x, acc, fam = r.random(), 0.0, fams[-1]
        for k, w in zip(fams, weights):
            acc += w
            if x < acc:
                fam = k
                break
        conv = FAMILIES[fam](r, split)
        if conv is not None:
            break
    spans = []
    conv["text"] = render(conv["messages"], conv["tools"], spans=spans)
    conv["spans"] = spans
    return conv


def check_handwritten():
    allnames = [n for t in TOOLS for n in t.names]
    assert len(allnames) == len(set(allnames)), "duplicate tool alias"
    for t in TOOLS:
        assert all(p.aliases[0] == p.name for p in t.params), (t.key, "first alias must be the canonical name")


def generate(out, seed=1234, heldout_seed=None, n_train=20000, n_heldout=300, mix=DEFAULT_MIX, log=print):
    """Write OUT/train.jsonl and OUT/heldout.jsonl; assert the splits are disjoint."""
    check_vocab()
    check_handwritten()
    mix = parse_mix(mix) if isinstance(mix, str) else mix
    os.makedirs(out, exist_ok=True)
    hs = heldout_seed if heldout_seed is not None else seed + 1000003
    tracker = SplitTracker()
    for split, sd, n in (("train", seed, n_train), ("heldout", hs, n_heldout)):
        r = random.Random(sd)
        split_mix = mix if split == "train" else parse_mix(",".join(
            f"{k}={v}" for k, v in mix.items() if k not in TRAIN_ONLY))
        path = os.path.join(out, f"{split}.jsonl")
        chars, kinds = 0, {}
        with open(path, "w") as f:
            for i in range(n):
                conv = make(r, split, split_mix)
                tracker.add(split, conv)
                fam = conv["kind"].split("_")[0]
                kinds[fam] = kinds.get(fam, 0) + 1
                conv = {"id": f"{split}-{i:06d}", "split": split, **conv}
                chars += len(conv["text"])
                f.write(json.dumps(conv, ensure_ascii=False) + "\n")
        log(f"{split}: {n} conversations ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}), "
            f"{chars / 1e6:.2f}M chars -> {path}")
    stats = tracker.check()
    log(f"disjoint: {stats}")
    return stats


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--heldout-seed", type=int, default=None, help="default: seed + 1000003")
    ap.add_argument("--n-train", type=int, default=20000)
    ap.add_argument("--n-heldout", type=int, default=300)
    ap.add_argument("--mix", default=DEFAULT_MIX, help="family weights (proc, bash, typed, copy, distract; copy and distract are training only)")
    args = ap.parse_args()
    generate(args.out, args.seed, args.heldout_seed, args.n_train, args.n_heldout, args.mix)


if __name__ == "__main__":
    main()
