"""Proof that held-out tools never occur in training: the split of the word lists, and
the identifiers (tool names, parameter and nested property names) actually written."""

from __future__ import annotations

import json

from . import vocab as W


def identifiers(tool_schema):
    """Tool name plus every parameter and nested property name of an OpenAI tool."""
    fn = tool_schema["function"]
    out = {fn["name"]}

    def walk(s):
        for k, sub in (s.get("properties") or {}).items():
            out.add(k)
            walk(sub)
        if isinstance(s.get("items"), dict):
            walk(s["items"])
    walk(fn.get("parameters") or {})
    return out


def content_words(ids):
    return {w for i in ids for w in W.words_of(i)} - W.AFFIXES


def check_vocab():
    """Every word list splits cleanly, and the forced probe words are held out."""
    assert not (W.FORCED_HELDOUT & W.HANDWRITTEN_WORDS), W.FORCED_HELDOUT & W.HANDWRITTEN_WORDS
    for w in W.FORCED_HELDOUT:
        assert W.is_heldout(w), w
    for a in W.AFFIXES:
        assert not W.is_heldout(a), a


class SplitTracker:
    """Collects identifiers per split while the corpus is written; `check()` asserts."""

    def __init__(self):
        self.train_ids, self.held_ids = set(), set()

    def add(self, split, conv):
        for t in conv["tools"]:
            s = json.dumps(t)
            assert not any(ch in s for ch in "<>&'"), s  # some Jinja tojson filters HTML-escape these
            if split == "train":
                self.train_ids |= identifiers(t)
            elif conv["kind"].startswith("proc_"):
                self.held_ids |= identifiers(t)

    def check(self):
        """No held-out procedural identifier, nor any of its content words, in training."""
        both = self.held_ids & self.train_ids
        assert not both, f"held-out identifiers in training: {sorted(both)[:20]}"
        train_words = {w for i in self.train_ids for w in W.words_of(i)}
        leak = content_words(self.held_ids) & train_words
        assert not leak, f"held-out name words in training identifiers: {sorted(leak)[:20]}"
        return {"train_identifiers": len(self.train_ids), "heldout_procedural_identifiers": len(self.held_ids),
                "heldout_content_words": len(content_words(self.held_ids))}
