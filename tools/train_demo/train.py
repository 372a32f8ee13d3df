#!/usr/bin/env python3
"""Train the demo Qwen3.5 hybrid model (GDN + gated attention + MTP) on CPU.

Backbone: transformers' Qwen3_5ForCausalLM (layer_types [lin, lin, lin, full] x 2, real
Gated DeltaNet and gated attention). MTP head per spec §7 (demo_model.MTPHead), trained
jointly: loss = CE(next token) + mtp_weight * CE(MTP: h_t after the final norm + embed of
token t+1 -> token t+2). Token weights: 1 on assistant turns after the last user query
(the `spans` from gen_corpus), --prompt-loss-weight elsewhere, 0 on padding.

Writes to --out: model.safetensors (release layout, bf16; A_log and the GDN gated-norm
weight in f32 like Qwen3.5), config.json (VL wrapper), generation_config.json, the
tokenizer files (copied from --tokenizer when --out differs) and training_log.csv
(step, loss, mtp_loss, elapsed_s, ...; loss/mtp_loss = mean CE over assistant tokens;
induction_acc = greedy accuracy on a fresh synthetic recall/copy batch, induction.py: the
model's in-context lookup, which copying tool names needs).

Opt-in: --induction-steps N --induction-every K start on synthetic recall batches and keep
mixing them in (induction.py; README.md, Status, has what they did).

Full run (see README.md):
  train.py --corpus WORK/corpus --tokenizer models/demo --out models/demo
Smoke run (~2-3 min on idle cores; writes only to a temp dir: corpus, tokenizer, template
check, 6 steps, then reloads the checkpoint, generates, and runs a tiny evaluate.py):
  train.py --smoke
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import re
import shutil
import string
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chatfmt import ENDOFTEXT, IM_END, render  # noqa: E402
from demo_model import DemoModel, load_grown, load_release, save_release, text_config  # noqa: E402
from fast_gdn import install as install_fast_gdn  # noqa: E402
from induction import induction_accuracy, induction_batch, pool_size  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


# ----------------------------------------------------------------------------- data


CALL_RE = re.compile(r"<tool_call>.*?</tool_call>", re.S)


def load_corpus(path, tok, max_len, prompt_w, call_w=1.0, limit=None):
    """Tokenize conversations; per-token loss weights from the assistant spans: 1, or call_w
    inside a trained turn's ``<tool_call>`` blocks (the tokens that copy a name and a schema
    from the tools block, the skill a new tool needs), prompt_w elsewhere."""
    recs = []
    with open(path) as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            recs.append(json.loads(line))
    encs = tok.encode_batch([r["text"] for r in recs])
    data = []
    truncated = 0
    for r, e in zip(recs, encs):
        ids = e.ids
        spans = r["spans"]
        calls = [m.span() for m in CALL_RE.finditer(r["text"])]
        w = []
        for (s, _end) in e.offsets:
            if not any(a <= s < b for a, b in spans):
                w.append(prompt_w)
            else:
                w.append(call_w if any(a <= s < b for a, b in calls) else 1.0)
        if len(ids) > max_len:
            truncated += 1
            ids, w = ids[:max_len], w[:max_len]
        data.append((torch.tensor(ids, dtype=torch.long), torch.tensor(w, dtype=torch.float32)))
    return data, truncated


def batches(data, tokens_per_step, pad_id, seed):
    """Endless stream of length-bucketed, right-padded batches (seeded)."""
    rng = random.Random(seed)
    epoch = 0
    while True:
        idx = list(range(len(data)))
        rng.shuffle(idx)
        out = []
        for c in range(0, len(idx), 512):
            chunk = sorted(idx[c:c + 512], key=lambda i: len(data[i][0]))
            cur = []
            for i in chunk:
                ln = len(data[i][0])
                if cur and (len(cur) + 1) * max(ln, max(len(data[j][0]) for j in cur)) > tokens_per_step:
                    out.append(cur)
                    cur = []
                cur.append(i)
            if cur:
                out.append(cur)
        rng.shuffle(out)
        for b in out:
            T = max(len(data[i][0]) for i in b)
            ids = torch.full((len(b), T), pad_id, dtype=torch.long)
            w = torch.zeros((len(b), T), dtype=torch.float32)
            for k, i in enumerate(b):
                n = len(data[i][0])
                ids[k, :n] = data[i][0]
                w[k, :n] = data[i][1]
            yield epoch, ids, w
        epoch += 1


# ----------------------------------------------------------------------------- loss


def use_autocast(choice, device):
    """Whether to train under bf16 autocast: always on a GPU; measured on 2 cores, an
    AVX-512 BF16 CPU runs a step in ~3.5 s with it, while an AVX2-only CPU (Zen 3) takes
    ~90 s with it and ~6 s in fp32."""
    if choice != "auto":
        return choice == "on"
    if device.type == "cuda":
        return True
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def losses(model, ids, w, autocast, gen=None):
    """Joint objective on a batch. The vocabulary projection and softmax, about a third of a
    step, run only at sampled target positions: every assistant token (w = 1) and each other
    token with probability w (the prompt-loss weight), counted once; sampled tokens weigh
    max(w, 1), so tool-call tokens (w = --call-loss-weight) count more. The ratio
    sum(v*ce)/sum(v) over the sample estimates sum(w*ce)/sum(w) without bias in its
    numerator and denominator, at a quarter of the softmax work. Returns (objective main, objective
    MTP, assistant CE main, assistant CE MTP)."""
    B, T = ids.shape
    keep = (w >= 1) | ((w > 0) & (torch.rand(w.shape, generator=gen) < w))  # drawn on the CPU: seed for seed
    dev = model.lm.lm_head.weight.device
    ids, w, keep = ids.to(dev), w.to(dev), keep.to(dev)
    k1, k2 = keep[:, 1:], keep[:, 2:]  # target t+1 (main head at t), t+2 (MTP at t)
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
        h = model.lm.model(input_ids=ids).last_hidden_state  # after the final norm
        logits = model.lm.lm_head(h[:, :-1][k1])
        pos = torch.arange(T - 1, device=dev).unsqueeze(0).expand(B, -1)
        m = model.mtp_forward(h[:, :-1], ids[:, 1:], pos)  # MTP at t: (h_t, x_{t+1})
        mtp_logits = model.lm.lm_head(m[:, :-1][k2])  # predicts x_{t+2}
    ce = F.cross_entropy(logits.float(), ids[:, 1:][k1], reduction="none")
    ce2 = F.cross_entropy(mtp_logits.float(), ids[:, 2:][k2], reduction="none")
    v1, v2 = w[:, 1:][k1].clamp(min=1), w[:, 2:][k2].clamp(min=1)
    obj_main = (v1 * ce).sum() / v1.sum().clamp(min=1)
    obj_mtp = (v2 * ce2).sum() / v2.sum().clamp(min=1)
    a1, a2 = (w[:, 1:] >= 1)[k1], (w[:, 2:] >= 1)[k2]
    asst_main = ce.detach()[a1].sum() / a1.sum().clamp(min=1)
    asst_mtp = ce2.detach()[a2].sum() / a2.sum().clamp(min=1)
    return obj_main, obj_mtp, asst_main, asst_mtp


# ----------------------------------------------------------------------------- smoke helpers


def smoke_prepare(work):
    """Small corpus + tokenizer in the temp dir, and the chat-template check on them."""
    corpus = os.path.join(work, "corpus")
    tokdir = os.path.join(work, "tokenizer")
    py = sys.executable
    subprocess.run([py, os.path.join(HERE, "gen_corpus.py"), "--out", corpus, "--n-train", "1500", "--n-heldout", "40"], check=True)
    subprocess.run([py, os.path.join(HERE, "train_tokenizer.py"), "--corpus", os.path.join(corpus, "train.jsonl"),
                    "--out", tokdir, "--extra-code-chars", "2000000"], check=True)
    subprocess.run([py, os.path.join(HERE, "check_template.py"), "--model", tokdir, "--corpus", corpus, "--limit", "300"],
                   check=True)
    return corpus, tokdir


def reload_check(model, out_dir, tok, corpus_dir):
    """Reload the release checkpoint, compare with the in-memory model, generate."""
    from transformers import AutoModelForCausalLM

    re_model = load_release(out_dir)
    ids = torch.tensor([tok.encode("<|im_start|>user\nList the files.<|im_end|>\n<|im_start|>assistant\n").ids])
    with torch.no_grad():
        ref = model.lm(input_ids=ids).logits.float()  # in-memory fp32 weights
        got = re_model.lm(input_ids=ids).logits.float()  # bf16-rounded weights
    d = (ref - got).abs().max().item()
    print(f"[reload] max |logit diff| fp32 weights vs reloaded bf16 weights: {d:.4f}")
    # transformers' own loader on the VL-wrapper layout (prefix remap, mtp.* ignored)
    hf = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
    with torch.no_grad():
        got2 = hf(input_ids=ids).logits.float()
    d2 = (got - got2).abs().max().item()
    print(f"[reload] AutoModelForCausalLM.from_pretrained -> {type(hf).__name__}; max |logit diff| vs load_release: {d2:.2e}")
    assert d2 < 1e-3, d2
    # greedy continuation of a held-out prompt
    with open(os.path.join(corpus_dir, "heldout.jsonl")) as f:
        rec = json.loads(f.readline())
    lq = max(i for i, m in enumerate(rec["messages"]) if m["role"] == "user")
    prompt = render(rec["messages"][:lq + 1], rec["tools"], add_generation_prompt=True, enable_thinking=False)
    pids = torch.tensor([tok.encode(prompt).ids])
    with torch.no_grad():
        out = re_model.lm.generate(pids, max_new_tokens=48, do_sample=False,
                                   eos_token_id=[tok.token_to_id(IM_END), tok.token_to_id(ENDOFTEXT)],
                                   pad_token_id=tok.token_to_id(ENDOFTEXT))
    print("[reload] prompt tail:", repr(prompt[-120:]))
    print("[reload] greedy continuation:", repr(tok.decode(out[0, pids.shape[1]:].tolist(), skip_special_tokens=False)))


# ----------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", help="directory with train.jsonl (gen_corpus.py)")
    ap.add_argument("--tokenizer", help="directory with tokenizer.json/tokenizer_config.json")
    ap.add_argument("--out", help="output model directory")
    ap.add_argument("--smoke", action="store_true", help="tiny end-to-end run into a temp dir, then reload + generate")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="torch device to train on: cpu (the reproducible default), cuda, cuda:N")
    ap.add_argument("--steps", type=int, default=1500, help="maximum optimizer steps")
    ap.add_argument("--tokens-per-step", type=int, default=4096, help="padded tokens per batch")
    ap.add_argument("--max-len", type=int, default=1536)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.5)
    ap.add_argument("--prompt-loss-weight", type=float, default=0.1)
    ap.add_argument("--call-loss-weight", type=float, default=2.0,
                    help="loss weight of assistant tokens inside <tool_call> blocks (others: 1)")
    ap.add_argument("--autocast", choices=["auto", "on", "off"], default="auto",
                    help="bf16 autocast: auto uses it only where the CPU has native bf16 dot products "
                         "(AVX-512 BF16 or AMX); without them PyTorch emulates bf16 and a step takes ~15x longer")
    ap.add_argument("--no-autocast", action="store_true", help="same as --autocast off")
    ap.add_argument("--time-budget-min", type=float, default=52.0,
                    help="wall-time budget of the training loop: the LR schedule follows max(step/steps, elapsed/budget) "
                         "and training stops when either reaches 1, so the cosine decay always completes (0: steps only)")
    ap.add_argument("--induction-steps", type=int, default=0,
                    help="opt-in: at most this many first steps on synthetic recall batches only "
                         "(induction.py); the phase ends earlier once recall accuracy reaches --induction-target")
    ap.add_argument("--induction-target", type=float, default=0.9)
    ap.add_argument("--induction-every", type=int, default=0,
                    help="opt-in: after those, every Nth step is an induction batch (0: none)")
    ap.add_argument("--induction-batch", type=int, default=64, help="rows per induction batch")
    ap.add_argument("--induction-alphabet", choices=["vocab", "identifiers"], default="vocab",
                    help="induction ids: runs of the vocabulary (widening after the first phase), or the "
                         "tokens of the identifier characters [A-Za-z0-9_.] (a byte-level vocabulary spells "
                         "every name in them; the pool then stays fixed)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--limit", type=int, default=None, help="use only the first N conversations")
    ap.add_argument("--init-from", default=None,
                    help="start from this release checkpoint (a continued run; use another --seed so the data order "
                         "differs from the first run's); a larger --intermediate widens its MLPs and a larger "
                         "--layers appends layers, keeping what it computes (new units and layers start with "
                         "zero output weights)")
    # architecture
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--intermediate", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--lin-k-heads", type=int, default=4)
    ap.add_argument("--lin-v-heads", type=int, default=8)
    ap.add_argument("--lin-head-dim", type=int, default=64)
    ap.add_argument("--max-pos", type=int, default=65536)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    install_fast_gdn()  # the chunked GDN without transformers' quadratic backward traffic
    torch.manual_seed(args.seed)
    loss_gen = torch.Generator().manual_seed(args.seed + 7)  # loss-position sampling
    random.seed(args.seed)
    device = torch.device(args.device)
    autocast = use_autocast("off" if args.no_autocast else args.autocast, device)
    where = (torch.cuda.get_device_name(device) if device.type == "cuda"
             else f"CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"compute: {'bf16 autocast' if autocast else 'fp32'} on {device} ({where})")
    t0 = time.time()

    tmp = None
    if args.smoke:
        tmp = tempfile.mkdtemp(prefix="train_demo_smoke_")
        if args.corpus is None or args.tokenizer is None:
            args.corpus, args.tokenizer = smoke_prepare(tmp)
        args.out = os.path.join(tmp, "model")
        if args.steps == ap.get_default("steps"):
            args.steps = 6
        args.warmup = min(args.warmup, 2)
        args.induction_steps = min(args.induction_steps, 2)
        args.log_every = 1
        args.limit = args.limit or 1500
        print(f"[smoke] temp dir {tmp}")
    if not (args.corpus and args.tokenizer and args.out):
        ap.error("--corpus, --tokenizer and --out are required (or use --smoke)")
    repo_demo = os.path.realpath(os.path.join(HERE, "..", "..", "models", "demo"))
    if args.smoke:
        assert not os.path.realpath(args.out).startswith(repo_demo), "smoke runs never write into models/demo"

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    im_end, eot = tok.token_to_id(IM_END), tok.token_to_id(ENDOFTEXT)
    data, truncated = load_corpus(os.path.join(args.corpus, "train.jsonl"), tok, args.max_len, args.prompt_loss_weight,
                                   args.call_loss_weight, args.limit)
    n_tok = sum(len(d[0]) for d in data)
    print(f"corpus: {len(data)} conversations, {n_tok / 1e6:.2f}M tokens ({truncated} truncated to {args.max_len}), "
          f"loaded in {time.time() - t0:.1f}s")

    cfg = text_config(tok.get_vocab_size(), hidden=args.hidden, intermediate=args.intermediate, layers=args.layers,
                      heads=args.heads, kv_heads=args.kv_heads, head_dim=args.head_dim, lin_k_heads=args.lin_k_heads,
                      lin_v_heads=args.lin_v_heads, lin_head_dim=args.lin_head_dim, max_pos=args.max_pos,
                      bos_id=eot, eos_ids=[im_end, eot], pad_id=eot)
    model = DemoModel(cfg)
    if args.init_from:
        grown = load_grown(model, load_release(args.init_from))
        print(f"initialised from {args.init_from}" + (f" ({len(grown)} tensors grown or added: "
                                                       f"FFN {args.intermediate}, {args.layers} layers)"
                                                       if grown else ""))
    model.to(device)
    assert model.lm.lm_head.weight is model.lm.model.embed_tokens.weight, "embeddings must be tied"
    n_params = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in model.mtp.parameters())
    n_emb = model.lm.model.embed_tokens.weight.numel()
    print(f"model: {n_params / 1e6:.2f}M parameters (embedding {n_emb / 1e6:.2f}M tied, MTP {n_mtp / 1e6:.2f}M), "
          f"layer_types {cfg.layer_types}")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.ndim >= 2 and "embed_tokens" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    budget_s = args.time_budget_min * 60 if args.time_budget_min > 0 else float("inf")

    def progress(step, elapsed):
        return max(step / args.steps, elapsed / budget_s)

    def lr_at(step, elapsed):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        p = progress(step, elapsed)
        return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "training_log.csv")
    logf = open(log_path, "w", newline="")
    log = csv.writer(logf)
    log.writerow(["step", "loss", "mtp_loss", "elapsed_s", "objective", "lr", "tokens", "epoch", "step_s", "cpu_s",
                  "induction_acc"])
    stream = batches(data, args.tokens_per_step, eot, args.seed)
    induction_gen = torch.Generator().manual_seed(args.seed + 11)
    probe_gen = torch.Generator().manual_seed(args.seed + 13)
    bpe_vocab = min(tok.token_to_id(t) for t in (IM_END, ENDOFTEXT))  # the added tokens come last
    alphabet = None
    if args.induction_alphabet == "identifiers":
        chars = string.ascii_letters + string.digits + "_."
        found = [tok.token_to_id(c) for c in chars]
        if None in found:
            ap.error("--induction-alphabet identifiers needs a token for each of " + chars)
        alphabet = torch.tensor(found)
    epoch = 0
    first_end = None  # the step the first (recall-only) phase ended
    model.train()
    t_train = time.time()
    c_train = time.process_time()
    seen = 0
    acc = {"l": 0.0, "m": 0.0, "o": 0.0, "n": 0}
    step_times = []
    step = 0
    for step in range(args.steps):
        ts = time.time()
        lr = lr_at(step, ts - t_train)
        for g in opt.param_groups:
            g["lr"] = lr
        if first_end is None and step >= args.induction_steps:
            first_end = step
        after = None if first_end is None else step - first_end
        if after is None or (args.induction_every and step % args.induction_every == 0):
            pool = pool_size(after, bpe_vocab)
            ids, w = induction_batch(induction_gen, args.induction_batch, pool, bpe_vocab, eot, alphabet)
        else:
            epoch, ids, w = next(stream)
        obj_main, obj_mtp, a_main, a_mtp = losses(model, ids, w, autocast, loss_gen)
        # The first phase trains the lookup alone: no MTP loss and no clipping, as in
        # recall_probe.py, where it formed within about 100 steps.
        obj = obj_main + (args.mtp_weight if after is not None else 0.0) * obj_mtp
        opt.zero_grad(set_to_none=True)
        obj.backward()
        if after is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += ids.numel()
        dt = time.time() - ts
        step_times.append(dt)
        acc["l"] += a_main.item()
        acc["m"] += a_mtp.item()
        acc["o"] += obj.item()
        acc["n"] += 1
        stop = step + 1 >= args.warmup and progress(step + 1, time.time() - t_train) >= 1.0
        if (step + 1) % args.log_every == 0 or step == args.steps - 1 or stop:
            n = acc["n"]
            el = time.time() - t_train
            ind = induction_accuracy(model, probe_gen, pool_size(after, bpe_vocab), bpe_vocab, eot,
                                     alphabet=alphabet)
            if first_end is None and ind >= args.induction_target:
                first_end = step + 1
                print(f"recall accuracy {ind:.2f} after {step + 1} steps: corpus batches from here", flush=True)
            log.writerow([step + 1, f"{acc['l'] / n:.4f}", f"{acc['m'] / n:.4f}", f"{el:.1f}", f"{acc['o'] / n:.4f}",
                          f"{lr:.2e}", seen, epoch, f"{dt:.2f}", f"{time.process_time() - c_train:.1f}", f"{ind:.3f}"])
            logf.flush()
            print(f"step {step + 1}/{args.steps} loss {acc['l'] / n:.3f} mtp {acc['m'] / n:.3f} lr {lr:.2e} "
                  f"batch {tuple(ids.shape)} {dt:.1f}s/step elapsed {el / 60:.1f}min induction {ind:.2f}", flush=True)
            acc = {"l": 0.0, "m": 0.0, "o": 0.0, "n": 0}
        if stop:
            if step + 1 < args.steps:
                print(f"time budget of {args.time_budget_min} min reached after {step + 1} steps; stopping")
            break
    logf.close()
    train_s = time.time() - t_train
    print(f"trained {step + 1} steps, {seen / 1e6:.2f}M tokens in {train_s / 60:.1f} min "
          f"({train_s / (step + 1):.2f} s/step wall, {(time.process_time() - c_train) / (step + 1):.2f} s/step cpu)")
    if len(step_times) > 2:
        st = sorted(step_times[2:])
        print(f"seconds/step after warm-up: median {st[len(st) // 2]:.2f}, min {st[0]:.2f}")

    model.eval()
    model.to("cpu")
    from train_tokenizer import generation_config

    sd = save_release(model, args.out, generation_config(tok))
    if os.path.realpath(args.tokenizer) != os.path.realpath(args.out):
        for fn in TOKENIZER_FILES:
            shutil.copy(os.path.join(args.tokenizer, fn), os.path.join(args.out, fn))
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    print(f"saved {len(sd)} tensors ({size / 1e6:.1f} MB) to {args.out}")
    if args.smoke:
        reload_check(model, args.out, tok, args.corpus)
        subprocess.run([sys.executable, os.path.join(HERE, "evaluate.py"), "--model", args.out, "--corpus", args.corpus,
                        "--max-prompts", "6", "--max-new-tokens", "32", "--mtp-convs", "4",
                        "--threads", str(args.threads)], check=True)
        print(f"[smoke] done in {(time.time() - t0) / 60:.1f} min; outputs in {args.out}")


if __name__ == "__main__":
    main()
