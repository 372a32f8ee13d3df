#!/usr/bin/env python3
"""Train the demo byte-level BPE tokenizer on the synthetic corpus.

Pipeline as in Qwen3.5 (`Qwen3_5Tokenizer`): NFC normalizer, Split on the Qwen3.5
pre-tokenize regex (isolated; single digits), ByteLevel without its own regex,
ByteLevel decoder. The BPE part has `vocab_size - 9` entries; the nine added tokens
follow it at the end of the vocabulary, as in Qwen:
``<|endoftext|> <|im_start|> <|im_end|>`` (special) and ``<think> </think> <tool_call>
</tool_call> <tool_response> </tool_response>`` (added, not special).

BPE training text: the training corpus only (with the added tokens cut out), by default.
Every token then occurs in training, so every token of a new tool's name has a trained
embedding (tied with the output row): with 12M characters of transformers sources mixed
in (``--extra-code-chars``, the v1 recipe), 6% of the tokens in held-out tool calls were
whole-word merges that training never produced, and the model could not copy them. 4096
entries stay below the corpus's ~5.2K saturation.

Writes OUT/tokenizer.json, OUT/tokenizer_config.json (with the chat template from
chatfmt.CHAT_TEMPLATE) and OUT/generation_config.json.

Usage: train_tokenizer.py --corpus DIR/train.jsonl --out models/demo [--vocab-size 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chatfmt import ADDED_TOKENS, CHAT_TEMPLATE, ENDOFTEXT, IM_END, SPECIAL_TOKENS  # noqa: E402

PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"""
                     r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def build_empty():
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def code_files(max_chars):
    """A deterministic slice of the (version-pinned) transformers Python sources: general
    code and English vocabulary, so that the synthetic corpus alone does not cap the BPE
    vocabulary (it saturates at ~5K tokens)."""
    import transformers

    root = os.path.dirname(transformers.__file__)
    files = []
    for d, _, fs in os.walk(root):
        files += [os.path.join(d, f) for f in fs if f.endswith(".py")]
    files = sorted(os.path.relpath(f, root) for f in files)
    total = 0
    for rel in files[::3]:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            txt = f.read()
        if total + len(txt) > max_chars:
            break
        total += len(txt)
        yield txt


def texts(corpus_path, extra_code_chars):
    split_re = re.compile("|".join(re.escape(t) for t in SPECIAL_TOKENS + ADDED_TOKENS))
    with open(corpus_path) as f:
        for line in f:
            for seg in split_re.split(json.loads(line)["text"]):
                if seg:
                    yield seg
    if extra_code_chars > 0:
        yield from code_files(extra_code_chars)


def generation_config(tok):
    im_end, eot = tok.token_to_id(IM_END), tok.token_to_id(ENDOFTEXT)
    return {"bos_token_id": eot, "pad_token_id": eot, "eos_token_id": [im_end, eot], "do_sample": False,
            "transformers_version": "5.23.0"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="train.jsonl from gen_corpus.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--extra-code-chars", type=int, default=0,
                    help="characters of transformers source added to the BPE training text (0: corpus only)")
    args = ap.parse_args()

    n_added = len(SPECIAL_TOKENS) + len(ADDED_TOKENS)
    tok = build_empty()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size - n_added, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(texts(args.corpus, args.extra_code_chars), trainer=trainer)
    base = tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    vocab = tok.get_vocab_size()
    assert vocab == args.vocab_size, (base, vocab)

    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    decoder = {}
    for t in SPECIAL_TOKENS + ADDED_TOKENS:
        decoder[str(tok.token_to_id(t))] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                            "single_word": False, "special": t in SPECIAL_TOKENS}
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": IM_END,
        "errors": "replace",
        "model_max_length": 65536,
        "pad_token": ENDOFTEXT,
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(generation_config(tok), f, indent=2)
        f.write("\n")
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS + ADDED_TOKENS}
    print(f"tokenizer: vocab {vocab} (BPE {base} + {n_added} added) -> {args.out}")
    print("added token ids:", ids)


if __name__ == "__main__":
    main()
