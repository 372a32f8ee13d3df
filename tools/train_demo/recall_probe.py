#!/usr/bin/env python3
"""How fast does the demo architecture learn to use its context? Two synthetic probes,
each a few minutes on 2 cores:

  copy    random tokens, a separator, the same tokens again (loss on the copy): a
          fixed-offset copy, which a position or conv signal solves;
  recall  key-value pairs k1 v1 ... k8 v8, a separator, then four of the keys each
          followed by its value (loss on those values): multi-query associative
          recall, the content-based lookup that copying a tool name from the tools
          block needs (an induction circuit).

Prints loss and accuracy every 50 steps. Usage:
  recall_probe.py {copy,recall} [--arch qwen35|llama|gpt] [--steps 300] [--lr 1e-3]
                  [--layers 8] [--interval 4] [--hidden 256] [--intermediate 3×hidden]
                  [--rope-theta 1e7] [--rotary 0.25] [--init-std 0.02] [--no-qk-norm]
                  [--vocab 64] [--pool 64] [--spread] [--widen N] [--seed 0]
--arch qwen35 (the default) is the recipe's model (demo_model.text_config) with the
overrides given; llama is transformers' Llama of the same widths; gpt is a plain GPT for
comparison. --interval is the full-attention interval of the layer pattern (4: the
recipe's 3:1, 1: all full attention). Measured results are in README.md (Status of the
recipe).
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from demo_model import text_config  # noqa: E402
from transformers import Qwen3_5ForCausalLM  # noqa: E402

TASK_IDS, PAIRS, QUERIES, BATCH, COPY_LEN = 64, 8, 4, 64, 8


def copy_batch():
    x = torch.randint(3, TASK_IDS, (BATCH, COPY_LEN))
    ids = torch.cat([torch.full((BATCH, 1), 1), x, torch.full((BATCH, 1), 2), x], 1)
    # Logits at positions COPY_LEN+1 .. 2·COPY_LEN predict the copy.
    return ids, slice(COPY_LEN + 1, 2 * COPY_LEN + 1), x


def recall_batch(pool=TASK_IDS):
    """Keys from ids 4 .. pool/2, values from pool/2 .. pool (the default: 4..31, 32..63)."""
    half = pool // 2
    keys = torch.stack([torch.randperm(half - 4)[:PAIRS] + 4 for _ in range(BATCH)])
    vals = torch.randint(half, pool, (BATCH, PAIRS))
    pairs = torch.stack([keys, vals], 2).reshape(BATCH, 2 * PAIRS)
    pick = torch.stack([torch.randperm(PAIRS)[:QUERIES] for _ in range(BATCH)])
    qk, qv = keys.gather(1, pick), vals.gather(1, pick)
    tail = torch.stack([qk, qv], 2).reshape(BATCH, 2 * QUERIES)
    ids = torch.cat([torch.full((BATCH, 1), 1), pairs, torch.full((BATCH, 1), 2), tail], 1)
    start = 2 * PAIRS + 2  # the first queried key
    return ids, slice(start, start + 2 * QUERIES, 2), qv


class Gpt(torch.nn.Module):
    """A plain GPT for comparison: learned absolute positions, pre-LayerNorm blocks with
    biases, a GELU MLP, PyTorch's default init, 4 heads."""

    def __init__(self, layers, hidden, vocab, positions=64):
        super().__init__()
        nn = torch.nn
        self.emb, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList([nn.ModuleDict({
            "ln1": nn.LayerNorm(hidden), "qkv": nn.Linear(hidden, 3 * hidden), "o": nn.Linear(hidden, hidden),
            "ln2": nn.LayerNorm(hidden),
            "mlp": nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)),
        }) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids) + self.pos(torch.arange(t))
        for blk in self.blocks:
            q, k, v = blk["qkv"](blk["ln1"](x)).view(b, t, 3, 4, -1).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + blk["o"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["mlp"](blk["ln2"](x))
        return self.head(self.ln(x))


def build(args):
    """The probed model and its ids -> logits function."""
    if args.arch == "gpt":
        m = Gpt(args.layers, args.hidden, args.vocab)
        return m, m
    if args.arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=3 * args.hidden,
                          num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                          rope_theta=args.rope_theta, max_position_embeddings=64, initializer_range=args.init_std)
        m = LlamaForCausalLM(cfg)
        return m, lambda ids: m(input_ids=ids).logits
    cfg = text_config(args.vocab, hidden=args.hidden, intermediate=args.intermediate or 3 * args.hidden, layers=8,
                      rope_theta=args.rope_theta)
    cfg.num_hidden_layers = args.layers
    rot_half = int(64 * args.rotary) // 2  # head_dim 64
    cfg.rope_parameters["partial_rotary_factor"] = args.rotary
    cfg.rope_parameters["mrope_section"] = [rot_half - 2 * (rot_half // 3), rot_half // 3, rot_half // 3]
    cfg.layer_types = ["full_attention" if (i + 1) % args.interval == 0 else "linear_attention"
                       for i in range(args.layers)]
    cfg.initializer_range = args.init_std
    m = Qwen3_5ForCausalLM(cfg)
    if args.no_qk_norm:
        for layer in m.model.layers:
            if hasattr(layer, "self_attn"):
                layer.self_attn.q_norm = torch.nn.Identity()
                layer.self_attn.k_norm = torch.nn.Identity()
    return m, lambda ids: m(input_ids=ids).logits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", choices=["copy", "recall"])
    ap.add_argument("--arch", choices=["qwen35", "llama", "gpt"], default="qwen35")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--interval", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=None, help="FFN width (default: 3 × hidden)")
    ap.add_argument("--rope-theta", type=float, default=1e7, help="RoPE base (the recipe: 1e7, Qwen3.5's)")
    ap.add_argument("--rotary", type=float, default=0.25, help="partial rotary factor (the recipe: 0.25)")
    ap.add_argument("--init-std", type=float, default=0.02, help="initializer_range (the recipe: 0.02)")
    ap.add_argument("--no-qk-norm", action="store_true", help="diagnostic: q/k norms replaced by identity")
    ap.add_argument("--vocab", type=int, default=TASK_IDS,
                    help="embedding/softmax rows (the task's ids stay below 64; the recipe: 4096)")
    ap.add_argument("--pool", type=int, default=TASK_IDS,
                    help="recall ids: keys from 4 .. pool/2, values from pool/2 .. pool (at most --vocab)")
    ap.add_argument("--spread", action="store_true",
                    help="each batch's task ids shifted to a random run of the --vocab ids")
    ap.add_argument("--widen", type=int, default=0,
                    help="once accuracy reaches 90%%, double the range the ids move in every N steps")
    ap.add_argument("--freeze-embed", type=float, default=0.0, metavar="STD",
                    help="keep the (tied) embedding at a random N(0, STD²) initialisation (0: train it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    model, forward = build(args)
    if args.freeze_embed:
        # A copy circuit over fixed random embeddings cannot specialise to the ids it
        # was trained on: does the lookup then carry over to every id?
        # Rows large enough for the tied output layer to separate the ids.
        with torch.no_grad():
            model.get_input_embeddings().weight.normal_(0.0, args.freeze_embed)
        model.get_input_embeddings().weight.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.1)
    make = copy_batch if args.task == "copy" else (lambda: recall_batch(args.pool))
    t0 = time.time()
    formed_at = None
    for step in range(1, args.steps + 1):
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, step / 30)
        ids, at, want = make()
        span = args.vocab if args.spread else args.pool
        if formed_at is not None and args.widen:
            # Curriculum: the range the task's ids may move in doubles every --widen steps
            # after the lookup formed on the fixed ids.
            span = min(args.vocab, args.pool << (1 + (step - formed_at) // args.widen))
        if span > args.pool:
            # The same task on a random run of --pool ids within the first `span` ids
            # (the separators 1 and 2 stay), so no fixed ids can be learnt.
            shift = int(torch.randint(0, span - args.pool + 1, (1,)))
            ids = torch.where(ids > 2, ids + shift, ids)
            want = want + shift
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = forward(ids).float()
        pred = logits[:, at]
        loss = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), want.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            acc = (pred.argmax(-1) == want).float().mean().item()
            if formed_at is None and acc >= 0.9:
                formed_at = step
            print(f"{args.task} {args.arch} layers {args.layers} interval {args.interval} lr {args.lr:g} "
                  f"step {step}: loss {loss.item():.3f} accuracy {acc:.2f} ids within {span} "
                  f"({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
