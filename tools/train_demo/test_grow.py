#!/usr/bin/env python3
"""demo_model.load_grown: `python tools/train_demo/test_grow.py` (needs the training venv).

A checkpoint grown wider (a larger FFN) and deeper (a [lin, lin, lin, full] block appended)
computes the same logits as its source; the appended layers' output projections start at
zero and the other new weights are random, so they learn from the first step; a shape
that cannot grow is a ValueError, not a silent partial load.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_model import DemoModel, load_grown, text_config  # noqa: E402

SMALL = dict(hidden=32, head_dim=16, lin_head_dim=16, heads=2, kv_heads=1, lin_k_heads=2, lin_v_heads=4)


def model(layers, intermediate, seed):
    torch.manual_seed(seed)
    m = DemoModel(text_config(64, intermediate=intermediate, layers=layers, bos_id=0, eos_ids=[1], pad_id=0, **SMALL))
    return m.eval()


def test_grown_model_computes_what_its_source_computes():
    source, grown = model(4, 48, seed=1), model(8, 80, seed=2)
    names = load_grown(grown, source)
    ids = torch.randint(2, 64, (2, 37), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want, got = source.lm(input_ids=ids).logits, grown.lm(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-5), (want - got).abs().max()
    sd = grown.state_dict()
    for name in names:
        if name.startswith("lm.model.layers.4.") or name.startswith("lm.model.layers.7."):
            if sd[name].ndim != 2:
                continue  # norms start at zero in Qwen3.5's (1 + w) form; biases and decays vary
            zeroed = name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight"))
            assert (sd[name].abs().sum() == 0) == zeroed, name
    assert any(".layers.7.self_attn." in n for n in names), "the appended block ends in a full-attention layer"


def test_a_narrower_or_reshaped_target_is_refused():
    source = model(4, 48, seed=1)
    try:
        load_grown(model(4, 32, seed=2), source)
    except ValueError as e:
        assert "cannot grow" in str(e)
    else:
        raise AssertionError("a narrower FFN loaded")
    shallower = model(4, 48, seed=2)
    deeper_source = model(8, 48, seed=1)
    try:
        load_grown(shallower, deeper_source)
    except ValueError as e:
        assert "prefix" in str(e)
    else:
        raise AssertionError("a deeper source loaded into a shallower model")


if __name__ == "__main__":
    torch.set_num_threads(1)
    test_grown_model_computes_what_its_source_computes()
    test_a_narrower_or_reshaped_target_is_refused()
    print("test_grow: 2 passed")
