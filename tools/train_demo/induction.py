"""Synthetic induction batches: dense, short sequences in which only looking a token up
in the context lowers the loss (opt-in: `train.py --induction-steps N --induction-every K`).

Copying a tool's name from the tools block, and an argument value from the request, is
an induction lookup: find where the current token occurred before and continue with what
followed it. In a corpus of whole conversations that signal is a few tokens per
conversation, and the lookup circuit has never formed in a CPU run of the recipe
(README.md, Status). `recall_probe.py` forms it within about 100 steps of dense recall
data at hidden 128 with FFN 384, so the idea is to start on these batches and keep mixing
them in.

Measured (README.md, Status): the first phase forms the lookup on its fixed run of 64 ids
(96% after 125 steps), but it does not carry over to other ids (0% on wider pools through
step 500) and the corpus loss lags behind a run without it. So it stays opt-in.

Two tasks over random ids of the real vocabulary (the BPE part, no added tokens):

  recall  k1 v1 … kP vP | q1 a1 … qQ aQ: each queried key is followed by its value;
          the loss is on the values (multi-query associative recall, the probe's task);
  span    a random sequence, then a copy of a random stretch of it: the loss is on every
          copied token after the first (multi-token copying, which names need).

The first phase draws recall only, from one fixed run of FIRST_POOL ids; later batches are
half of each, from pools that double every 100 steps, anywhere in the vocabulary. The
weights use `train.py`'s convention: 1 on trained targets, 0 elsewhere.
"""

from __future__ import annotations

import torch

PAIRS, QUERIES = 8, 4
SPAN_CONTEXT, SPAN_COPY = 24, 8
FIRST_POOL = 64  # ids per batch at first: recall_probe.py's task, which forms the circuit
FIRST_POOL_START = 1000


def pool_size(steps_after_first, vocab):
    """Ids a batch draws from: FIRST_POOL during the first phase (`steps_after_first` is
    None), then doubling every 100 steps up to the vocabulary, so the lookup learnt on a
    few ids spreads to all of them."""
    if steps_after_first is None:
        return FIRST_POOL
    return min(vocab, FIRST_POOL << (1 + steps_after_first // 100))


def _recall(gen, n, low, high, sep):
    # Keys from the pool's lower half, values from its upper half, as in the probe.
    mid = (low + high) // 2
    keys = torch.stack([torch.randperm(mid - low, generator=gen)[:PAIRS] + low for _ in range(n)])
    vals = torch.randint(mid, high, (n, PAIRS), generator=gen)
    pairs = torch.stack([keys, vals], 2).reshape(n, 2 * PAIRS)
    pick = torch.stack([torch.randperm(PAIRS, generator=gen)[:QUERIES] for _ in range(n)])
    tail = torch.stack([keys.gather(1, pick), vals.gather(1, pick)], 2).reshape(n, 2 * QUERIES)
    ids = torch.cat([torch.full((n, 1), sep), pairs, torch.full((n, 1), sep), tail], 1)
    w = torch.zeros(ids.shape)
    w[:, 2 * PAIRS + 3::2] = 1.0  # the values after the queried keys
    return ids, w


def _span(gen, n, low, high, sep):
    ctx = torch.randint(low, high, (n, SPAN_CONTEXT), generator=gen)
    start = torch.randint(0, SPAN_CONTEXT - SPAN_COPY, (n, 1), generator=gen)
    copy = ctx.gather(1, start + torch.arange(SPAN_COPY))
    ids = torch.cat([torch.full((n, 1), sep), ctx, torch.full((n, 1), sep), copy], 1)
    w = torch.zeros(ids.shape)
    w[:, SPAN_CONTEXT + 3:] = 1.0  # every copied token after the first
    return ids, w


def induction_batch(gen, batch, pool, vocab, sep, alphabet=None):
    """`(ids, w)` of `batch` rows of equal length: half recall, half span copies (only
    recall on the first pool), ids drawn from a random run of `pool` ids of
    `[0, vocab)`, `sep` (a special token) as the separator. With `alphabet` (a 1-D tensor
    of token ids, e.g. the identifier characters of a byte-level vocabulary, in which
    every name is spelled) the tokens are drawn from it instead, always (the pool does
    not widen; the first phase is still recall only)."""
    first = pool == FIRST_POOL
    if alphabet is not None:
        # Positions into the alphabet, mapped to its ids (the separator is -1 meanwhile).
        ids, w = _mixed(gen, batch, 0, len(alphabet), -1, first)
        return torch.where(ids < 0, torch.full_like(ids, sep), alphabet[ids.clamp(min=0)]), w
    # The first pool is one fixed run of ids (the probe's setting, in which the circuit
    # formed); the wider pools sit anywhere in the vocabulary.
    low = FIRST_POOL_START if first else int(torch.randint(0, vocab - pool + 1, (1,), generator=gen))
    return _mixed(gen, batch, low, low + pool, sep, first)


def _mixed(gen, batch, low, high, sep, recall_only):
    if recall_only:  # exactly the probe's task
        return _recall(gen, batch, low, high, sep)
    a = _recall(gen, batch // 2, low, high, sep)
    b = _span(gen, batch - batch // 2, low, high, sep)
    width = max(a[0].shape[1], b[0].shape[1])

    def pad(ids, w):
        extra = width - ids.shape[1]
        return (torch.cat([ids, torch.full((ids.shape[0], extra), sep)], 1),
                torch.cat([w, torch.zeros(ids.shape[0], extra)], 1))

    (ia, wa), (ib, wb) = pad(*a), pad(*b)
    return torch.cat([ia, ib]), torch.cat([wa, wb])


@torch.no_grad()
def induction_accuracy(model, gen, pool, vocab, sep, batch=32, alphabet=None):
    """Greedy accuracy of the main head on a fresh batch's trained targets."""
    ids, w = induction_batch(gen, batch, pool, vocab, sep, alphabet)
    ids = ids.to(model.lm.lm_head.weight.device)
    w = w.to(ids.device)
    logits = model.lm(input_ids=ids).logits[:, :-1]
    hit = (logits.argmax(-1) == ids[:, 1:]).float()
    mask = w[:, 1:] > 0
    return hit[mask].mean().item()
