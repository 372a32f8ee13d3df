"""Tool-call metrics of a model served by the Rust engine, with and without constrained
tool calls (`edge-llm generate --requests ... --tool-calls free|constrained`; the
engine's default, `auto`, constrains them for this format).

The prompts, scoring and rates are evaluate.py's (the same held-out turns for the same
seed); the replies come from the engine instead of transformers, greedily. Adds an
`engine` block to MODEL/eval.json (evaluate.py's file, kept otherwise; or writes --out
alone), with one block per mode:

  free         the model alone (should match evaluate.py's figures up to numerics)
  constrained  the engine keeps every call inside the offered tools' schemas

Example (after `cargo build --release -p edge-cli`):

  $VENV/bin/python tools/train_demo/evaluate_engine.py --model models/demo \\
      --corpus tools/train_demo/work/corpus --edge-llm target/release/edge-llm
"""

import argparse
import json
import os
import subprocess
import tempfile
import time

from evaluate import IM_END, build_items, call_metrics, reply_budget, score_calls


def run_engine(binary, model, items, ids, max_new_tokens, constrained, engine_args=()):
    """Replies of the engine to every item, in order."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for it, p in zip(items, ids):
            f.write(json.dumps({"prompt_ids": p, "tools": it["tools"], "max_new_tokens": max_new_tokens}) + "\n")
        path = f.name
    cmd = [binary, "generate", "--model", model, "--requests", path, "--no-agent-defaults"]
    cmd += ["--tool-calls", "constrained" if constrained else "free"]
    cmd += list(engine_args)
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(replies) == len(items), f"{len(replies)} replies for {len(items)} prompts"
    return replies


def summarize(items, replies):
    rows = []
    for it, rep in zip(items, replies):
        r = score_calls(rep["text"].split(IM_END)[0], it)
        r["kind"] = it["kind"]
        rows.append(r)
    return {
        **call_metrics(rows),
        "generated_tokens": sum(rep["generated_tokens"] for rep in replies),
        # decode forwards of the target (the first token comes from the prefill)
        "target_forwards": sum(rep["target_forwards"] for rep in replies),
        "decode_ms": round(sum(rep["decode_ms"] for rep in replies), 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--corpus", required=True, help="directory with heldout.jsonl")
    ap.add_argument("--edge-llm", default="target/release/edge-llm", help="the CLI binary")
    ap.add_argument("--out", help="write the results alone to this file (default: the `engine` block of MODEL/eval.json)")
    ap.add_argument("--max-prompts", type=int, default=200)
    ap.add_argument("--max-new-tokens", type=int, default=0,
                    help="reply budget in tokens (0: evaluate.py's, the tokens of 1500 bytes of reply text)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="free,constrained")
    ap.add_argument("--engine-args", default="", help='more generate flags, e.g. "--spec linear --draft-steps 3"')
    ap.add_argument("--replies-out", help="also write every reply (each mode, with its kind: proc_* for the "
                                          "procedural tools) to this JSONL file, for reading the misses")
    args = ap.parse_args()
    t0 = time.time()

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model)
    recs, items = build_items(args.corpus, tok, args.max_prompts, args.seed)
    args.max_new_tokens = args.max_new_tokens or reply_budget(tok, recs)
    ids = [tok(it["prompt"])["input_ids"] for it in items]
    res = {"model": args.model, "heldout_prompts": len(items),
           "settings": {"max_prompts": args.max_prompts, "max_new_tokens": args.max_new_tokens, "seed": args.seed,
                        "engine_args": args.engine_args}}
    examples, all_replies = [], []
    for mode in args.modes.split(","):
        replies = run_engine(args.edge_llm, args.model, items, ids, args.max_new_tokens, mode == "constrained",
                             args.engine_args.split())
        res[mode] = summarize(items, replies)
        print(mode, json.dumps(res[mode]["heldout_tools"]), flush=True)
        heldout = [(it, rep) for it, rep in zip(items, replies) if it["kind"].startswith("proc_")]
        examples += [{"mode": mode, "id": it["id"], "kind": it["kind"], "generated": rep["text"],
                      "reference": {k: v for k, v in it["ref"].items() if k != "role"}} for it, rep in heldout[:6]]
        all_replies += [{"mode": mode, "id": it["id"], "turn": it["turn"], "kind": it["kind"],
                         "offered": [t["function"]["name"] for t in it["tools"]], "generated": rep["text"],
                         "reference": [c["function"]["name"] for c in it["ref"].get("tool_calls") or []]}
                        for it, rep in zip(items, replies)]
    res["seconds"] = round(time.time() - t0, 1)
    res["examples"] = examples
    out = args.out or os.path.join(args.model, "eval.json")
    doc = res
    if not args.out:
        doc = {}
        if os.path.exists(out):
            with open(out) as f:
                doc = json.load(f)
        doc["engine"] = res
    with open(out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    if args.replies_out:
        with open(args.replies_out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in all_replies)
    print(json.dumps({k: v for k, v in res.items() if k != "examples"}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
