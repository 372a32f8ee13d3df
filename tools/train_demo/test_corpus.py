#!/usr/bin/env python3
"""Checks of the corpus generator (no torch needed): `python3 tools/train_demo/test_corpus.py`.

* the corpus is byte-for-byte reproducible for a seed;
* no held-out tool name, parameter name or name word occurs in a training tool (the
  generator asserts it too), including the CLI's held-out tool file;
* every call's arguments survive the chat format: rendered as XML, parsed back and
  converted by the schema they equal the original values (integers unquoted, booleans
  true/false, arrays and objects as JSON), and they are valid for the schema;
* the mix and the shapes the issue asks for occur: 1-8 tools, 0-6 parameters, every JSON
  type, the three name styles, calls and no-call turns;
* the training-only ``distract`` family leaves the held-out split unchanged, offers 3-8
  tools, and most of its distractors share a name word with the target (far more than
  the ordinary procedural turns' distractors do).
"""

from __future__ import annotations

import filecmp
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chatfmt import convert_value, parse_tool_calls, render_tool_call  # noqa: E402
from corpus import vocab as W  # noqa: E402
from corpus.disjoint import content_words, identifiers  # noqa: E402
from gen_corpus import generate  # noqa: E402

CLI_TOOL = os.path.join(HERE, "..", "..", "crates", "edge-cli", "tests", "data", "heldout_tool.json")
N_TRAIN, N_HELD = 1500, 200


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_roundtrip(rec):
    """Every call in rec renders and parses back to its arguments, valid for the schema."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in rec["tools"]}
    n = 0
    for m in rec["messages"]:
        for tc in m.get("tool_calls") or []:
            fn = tc["function"]
            calls, ok = parse_tool_calls(render_tool_call(fn["name"], fn["arguments"]))
            assert ok and len(calls) == 1 and calls[0]["name"] == fn["name"], (rec["id"], fn)
            sch = schemas[fn["name"]]
            for req in sch.get("required", []):
                assert req in fn["arguments"], (rec["id"], fn["name"], req)
            for k, raw in calls[0]["raw_args"].items():
                v, valid = convert_value(raw, sch["properties"][k])
                assert valid and v == fn["arguments"][k], (rec["id"], fn["name"], k, raw, v, fn["arguments"][k])
            n += 1
    return n


def similar_share(convs):
    """Fraction of distractors sharing a name word with the first call's tool."""
    shared = total = 0
    for r in convs:
        calls = [tc["function"]["name"] for m in r["messages"] for tc in m.get("tool_calls") or []]
        if not calls:
            continue
        target = set(W.words_of(calls[0]))
        for t in r["tools"]:
            name = t["function"]["name"]
            if name not in calls:
                total += 1
                shared += bool(target & set(W.words_of(name)))
    return shared / max(total, 1)


def check_distract(d, held_ref, proc):
    """The distract family: held-out split unchanged, 3-8 tools, similar-named distractors."""
    generate(d, 1234, None, 600, N_HELD, mix="proc=0.4,bash=0.24,typed=0.16,distract=0.2", log=lambda *_: None)
    assert filecmp.cmp(os.path.join(d, "heldout.jsonl"), held_ref, shallow=False), "distract changed the held-out split"
    hard = [r for r in load(os.path.join(d, "train.jsonl")) if r["kind"].startswith("distract_")]
    assert hard and all(len(r["tools"]) >= 2 for r in hard)
    assert sum(len(r["tools"]) >= 3 for r in hard) / len(hard) > 0.9
    n_calls = sum(check_roundtrip(r) for r in hard)
    hard_share, proc_share = similar_share(hard), similar_share(proc)
    assert hard_share > 0.8 and hard_share > proc_share + 0.2, (hard_share, proc_share)
    print(f"distract: {len(hard)} conversations ({n_calls} calls round-trip), {hard_share:.0%} of distractors share a name word with the "
          f"target (ordinary procedural turns: {proc_share:.0%}); held-out split unchanged")


def main():
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a"), os.path.join(d, "b")
        quiet = lambda *_: None  # noqa: E731
        generate(a, 1234, None, N_TRAIN, N_HELD, log=quiet)
        generate(b, 1234, None, N_TRAIN, N_HELD, log=quiet)
        for split in ("train", "heldout"):
            assert filecmp.cmp(os.path.join(a, f"{split}.jsonl"), os.path.join(b, f"{split}.jsonl"), shallow=False), split
        print("reproducible: two runs with seed 1234 are byte-identical")
        train, held = load(os.path.join(a, "train.jsonl")), load(os.path.join(a, "heldout.jsonl"))
        proc = [r for r in train if r["kind"].startswith("proc_")]
        check_distract(os.path.join(d, "c"), os.path.join(a, "heldout.jsonl"), proc)

    train_ids = set().union(*(identifiers(t) for r in train for t in r["tools"]))
    train_words = {w for i in train_ids for w in W.words_of(i)}
    with open(CLI_TOOL) as f:
        cli_ids = set().union(*(identifiers(t) for t in json.load(f)))
    assert all(W.is_heldout(w) for w in content_words(cli_ids)), cli_ids
    assert not (cli_ids & train_ids) and not (content_words(cli_ids) & train_words), cli_ids
    held_ids = set().union(*(identifiers(t) for r in held if r["kind"].startswith("proc_") for t in r["tools"]))
    assert held_ids and not (held_ids & train_ids) and not (content_words(held_ids) & train_words)
    print(f"disjoint: {len(held_ids)} held-out identifiers and the CLI tool {sorted(cli_ids)} "
          f"never occur among {len(train_ids)} training identifiers")

    n_calls = sum(check_roundtrip(r) for r in train + held)
    print(f"round trip: {n_calls} calls render, parse and convert back to their schema-valid arguments")

    n_tools = {len(r["tools"]) for r in proc}
    n_params = {len(t["function"]["parameters"]["properties"]) for r in proc for t in r["tools"]}
    types = {(s.get("type"), "enum" in s) for r in proc for t in r["tools"]
             for s in t["function"]["parameters"]["properties"].values()}
    names = [t["function"]["name"] for r in proc for t in r["tools"]]
    assert n_tools == set(range(1, 9)), n_tools
    assert n_params == set(range(0, 7)), n_params
    for want in [("string", False), ("string", True), ("integer", False), ("number", False), ("boolean", False),
                 ("array", False), ("object", False)]:
        assert want in types, want
    assert any("." in n for n in names) and any(any(c.isupper() for c in n) for n in names) and any("_" in n for n in names)
    kinds = {r["kind"] for r in proc}
    assert {"proc_single", "proc_parallel", "proc_followup", "proc_nofit", "proc_chat"} <= kinds, kinds
    fams = {f: sum(r["kind"].startswith(f + "_") for r in train) / len(train) for f in ("proc", "bash", "typed")}
    print("mix: " + ", ".join(f"{k} {v:.0%}" for k, v in fams.items()))
    print("OK")


if __name__ == "__main__":
    main()
