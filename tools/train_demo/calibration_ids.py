#!/usr/bin/env python3
"""Token-id lines for `edge-llm quantize --calibration`: the first N training-split
conversations (never the held-out split), tokenized and cut to --max-len tokens.

Usage: calibration_ids.py --corpus WORK/corpus/train.jsonl --tokenizer models/demo [--n 32] > calib.txt
"""

import argparse
import json

from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True, help="directory with tokenizer.json")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=512)
    args = ap.parse_args()
    tok = Tokenizer.from_file(f"{args.tokenizer}/tokenizer.json")
    with open(args.corpus) as f:
        for _, line in zip(range(args.n), f):
            ids = tok.encode(json.loads(line)["text"]).ids[: args.max_len]
            print(",".join(map(str, ids)))


if __name__ == "__main__":
    main()
