"""Copy drills: requests whose whole answer is copied from the request, in the shapes a
tool call copies (made-up words, identifiers in the three name styles, numbers, codes).

The procedural conversations need the model to copy a name it never saw from the tools
block, but their few copied tokens per conversation are also predictable from letter
statistics, and a model trained on them alone (issue 23's third run) learnt the
statistics, not the copying: it answered "The id is 99022" whatever id the tool
returned. Here nothing but copying lowers the loss, densely (40-120 copied tokens per
conversation). Training split only: the held-out split has no drills. Opt-in
(`gen_corpus.py --mix proc=0.45,bash=0.25,typed=0.15,copy=0.15`): a 47-minute CPU run
with that mix did not learn to copy even the drills (tools/train_demo/README.md, Status).
"""

from __future__ import annotations

import string

from .procedural_tools import ident, pseudo_word
from .vocab import is_heldout

ASKS = [
    "Repeat these exactly, one per line:",
    "Copy the following values exactly:",
    "Echo back each item on its own line:",
    "Write these identifiers back unchanged:",
]


def random_letters(r):
    """3-8 random lowercase letters (no held-out word: the split stays clean)."""
    while True:
        w = "".join(r.choice(string.ascii_lowercase) for _ in range(r.randint(3, 8)))
        if not is_heldout(w):
            return w


def item(r):
    """One thing to copy."""
    kind = r.choices(["word", "letters", "snake", "camel", "dotted", "number", "code"],
                     [15, 15, 20, 15, 10, 15, 10])[0]
    word = lambda: pseudo_word(r) if r.random() < 0.5 else random_letters(r)  # noqa: E731
    if kind == "word":
        return pseudo_word(r)
    if kind == "letters":
        return random_letters(r)
    if kind in ("snake", "camel"):
        return ident([word() for _ in range(r.randint(2, 3))], kind == "camel")
    if kind == "dotted":
        return ".".join(word() for _ in range(r.randint(2, 3)))
    if kind == "number":
        return str(r.randint(0, 10 ** r.randint(1, 7)))
    return f"{random_letters(r)[:3].upper()}-{r.randint(100, 99999)}"


def copy_conversation(r, split):
    """A drill conversation, or None on the held-out split (drills are training only)."""
    if split != "train":
        return None
    items = [item(r) for _ in range(r.randint(4, 12))]
    if r.random() < 0.3:
        # The id-echo shape of a tool result's answer.
        n = r.randint(10, 999999)
        noun = random_letters(r)
        return {"kind": "copy_id", "tools": [], "enable_thinking": False,
                "messages": [{"role": "user", "content": f"The tool returned {noun} id {n}. Which id did it return?"},
                             {"role": "assistant", "content": f"It returned {noun} id {n}."}]}
    return {"kind": "copy_list", "tools": [], "enable_thinking": False,
            "messages": [{"role": "user", "content": r.choice(ASKS) + "\n" + "\n".join(items)},
                         {"role": "assistant", "content": "\n".join(items)}]}
