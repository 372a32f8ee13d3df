#!/usr/bin/env python3
"""Checks the model's element-wise, norm and argmax kernels (kernels/model/) on the host,
against numpy references written from the CPU backend's definitions
(crates/edge-model/src/cpu/norm.rs, logits.rs). Same emulator as check.py.

Usage: python3 kernels/host_emulation/check_model.py   (needs g++ with C++20, and numpy)
"""

import ctypes
import sys

import numpy as np

from check import E4M3, F32, build, e4m3_encode, ptr, to_bf16

p, u64, u32, f, i32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_float, ctypes.c_int


def setup(lib):
    lib.emu_add.argtypes = [p, p, u64]
    lib.emu_gate.argtypes = [i32, p, p, u64]
    lib.emu_concat_rows.argtypes = [p, p, p, u32, u64]
    lib.emu_gather_rows.argtypes = [p, p, p, u32, u64]
    lib.emu_embed_bf16.argtypes = [p, p, p, u32, u64]
    lib.emu_rms_norm.argtypes = [p, p, p, u32, u32, f]
    lib.emu_gated_rms_norm.argtypes = [p, p, p, u32, u32, f]
    lib.emu_argmax.argtypes = [p, p, u32, u32]
    lib.emu_topk.argtypes = [p, u32, u32, u32, f] + [p] * 5
    lib.emu_gdn_recurrence.argtypes = [i32] + [p] * 16 + [u32] * 5 + [f]
    lib.emu_gdn_conv.argtypes = [p] * 10 + [u32] * 6
    lib.emu_attn_inputs.argtypes = [p] * 8 + [u32] * 5 + [f]
    lib.emu_kv_store.argtypes = [i32] + [p] * 5 + [f, f] + [u32] * 3 + [u64]
    lib.emu_kv_copy_rows.argtypes = [i32] + [p] * 3 + [u32] * 4
    lib.emu_attn.argtypes = [p] * 7 + [u32, p, p, i32, f, f, f] + [p] * 4 + [u32] * 8


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def close(got, want, rel, what):
    err = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1e-30)
    assert (err <= rel).all(), f"{what}: worst relative error {err.max():.3e}"
    return float(err.max())


def check_elementwise(lib, rng):
    n = 1000  # not a multiple of the block: tails, and 3 blocks wrap the grid stride
    x, y = rng.standard_normal(n).astype(F32), rng.standard_normal(n).astype(F32)
    got = x.copy()
    lib.emu_add(ptr(got), ptr(y), n)
    assert np.array_equal(got, x + y), "add"
    g = (rng.standard_normal(n) * 4).astype(F32)
    for sig, want in [(0, x * g * sigmoid(g)), (1, x * sigmoid(g))]:
        got = x.copy()
        lib.emu_gate(sig, ptr(g), ptr(got), n)
        close(got, want, 1e-6, f"gate sigmoid={sig}")
    rows, width = 7, 33
    a, b = rng.standard_normal((rows, width)).astype(F32), rng.standard_normal((rows, width)).astype(F32)
    out = np.zeros((rows, 2 * width), F32)
    lib.emu_concat_rows(ptr(a), ptr(b), ptr(out), width, rows)
    assert np.array_equal(out, np.concatenate([a, b], axis=1)), "concat_rows"
    idx = np.array([6, 0, 3, 3, 1], np.uint32)
    out = np.zeros((idx.size, width), F32)
    lib.emu_gather_rows(ptr(a), ptr(idx), ptr(out), width, idx.size)
    assert np.array_equal(out, a[idx]), "gather_rows"
    table_bits, table = to_bf16(rng.standard_normal(50 * width).astype(F32))
    ids = np.array([49, 0, 17, 17], np.uint32)
    out = np.zeros((ids.size, width), F32)
    lib.emu_embed_bf16(ptr(table_bits), ptr(ids), ptr(out), width, ids.size)
    assert np.array_equal(out, table.reshape(50, width)[ids]), "embed_bf16"
    print("model element-wise (add, gates, concat, gather, embed): match")


def check_norms(lib, rng):
    worst = 0.0
    for rows, width in [(3, 5120), (5, 128), (2, 33), (1, 1)]:
        x = (rng.standard_normal((rows, width)) * 3).astype(F32)
        w = (rng.standard_normal(width) * 0.1).astype(F32)
        eps = 1e-6
        out = np.zeros_like(x)
        lib.emu_rms_norm(ptr(x), ptr(w), ptr(out), width, rows, eps)
        xd = x.astype(np.float64)
        inv = 1.0 / np.sqrt((xd * xd).mean(axis=1, keepdims=True) + eps)
        worst = max(worst, close(out, xd * inv * (1.0 + w), 2e-6, f"rms_norm {rows}x{width}"))
        z = (rng.standard_normal((rows, width)) * 2).astype(F32)
        o = x.copy()
        lib.emu_gated_rms_norm(ptr(o), ptr(z), ptr(w), width, rows, eps)
        want = xd * inv * w * z * sigmoid(z)
        worst = max(worst, close(o, want, 4e-6, f"gated_rms_norm {rows}x{width}"))
    print(f"model norms (zero-centred, gated): worst relative error {worst:.2e}")


def check_argmax(lib, rng):
    vocab = 3000
    rows = rng.standard_normal((6, vocab)).astype(F32)
    rows[1, [5, 2900]] = 50.0  # tie: the first index wins
    rows[2, :] = np.nan
    rows[3, :] = -np.inf
    rows[4, ::2] = np.nan
    rows[4, 1001] = 9.0
    rows[5, :] = 1.0
    out = np.zeros(6, np.uint32)
    lib.emu_argmax(ptr(rows), ptr(out), vocab, 6)
    want = [int(np.argmax(rows[0])), 5, 0, 0, 1001, 0]
    assert list(out) == want, f"argmax {list(out)} != {want}"
    print("model argmax (ties, NaN, -inf rows): match")


NEGLIGIBLE = 8.673617e-19


def check_topk(lib, rng):
    """Top-k candidates: exact ids and values (descending, ties by lower index, NaN never),
    the row maximum and the softmax sum at the temperature."""
    vocab, rows = 1000, 7
    x = rng.standard_normal((rows, vocab)).astype(F32)
    x[1, ::7] = F32(0.5)                 # many ties, some at the threshold
    x[2, :500] = np.nan                  # NaN never chosen
    x[3, 10] = np.inf                    # +inf maximum: exp(0) for it
    x[3, 20:30] = -np.inf
    x[4] = np.nan                        # no candidate at all
    x[5] = np.round(x[5] * 2) / 2        # coarse values: ties everywhere
    x[6, :] = -np.inf
    x[6, 3] = F32(1.0)                   # fewer finite values than k
    for k, temp in [(1, 1.0), (40, 0.7), (256, 1.3)]:
        vals = np.zeros((rows, k), F32)
        ids, count = np.zeros((rows, k), np.uint32), np.zeros(rows, np.uint32)
        mx, sm = np.zeros(rows, F32), np.zeros(rows, F32)
        lib.emu_topk(ptr(x), vocab, rows, k, F32(1 / temp), ptr(vals), ptr(ids), ptr(count), ptr(mx), ptr(sm))
        for r in range(rows):
            valid = [i for i in range(vocab) if not np.isnan(x[r, i])]
            order = sorted(valid, key=lambda i: (-float(x[r, i]), i))[:k]
            n = len(order)
            assert count[r] == n, f"topk count row {r} k {k}: {count[r]} vs {n}"
            assert list(ids[r, :n]) == order, f"topk ids row {r} k {k}"
            assert np.array_equal(vals[r, :n], x[r, order]), f"topk values row {r} k {k}"
            assert (ids[r, n:] == 0xFFFFFFFF).all() and (vals[r, n:] == -np.inf).all(), f"topk padding row {r}"
            if n:
                m = float(x[r, order[0]])
                assert mx[r] == F32(m)
                want = sum(1.0 if float(x[r, i]) == m else np.exp((float(x[r, i]) - m) / temp) for i in valid)
                assert abs(sm[r] - want) <= 1e-5 * want, f"topk sum row {r}: {sm[r]} vs {want}"
    print("model top-k candidates (ties, NaN, ±inf, short rows) and softmax sums: match")


def gdn_decode_ref(states, slot_of, q, k, v, b, a, z, neg_a, dt_bias, w, hk, eps):
    """The CPU backend's single-token delta rule + gated norm, in float64."""
    spans, hv, dv = v.shape
    dk = q.shape[2]
    out = np.zeros((spans, hv, dv))
    states = states.astype(np.float64)
    for s in range(spans):
        for j in range(hv):
            kh = j // (hv // hk)
            kk, qq = k[s, kh].astype(np.float64), q[s, kh].astype(np.float64)
            beta = 1 / (1 + np.exp(-float(b[s, j])))
            x = float(a[s, j]) + float(dt_bias[j])
            g = float(neg_a[j]) * (x if x > 20 else np.log1p(np.exp(x)))
            d = 0.0 if g < np.log(NEGLIGIBLE) else np.exp(g)
            S = states[slot_of[s], j]
            ac, bc = kk @ S, qq @ S
            delta = beta * (v[s, j] - d * ac)
            o = d * bc + (kk @ qq) * delta
            S[:] = d * S + np.outer(kk, delta)
            S[np.abs(S) < NEGLIGIBLE] = 0
            zz = z[s, j].astype(np.float64)
            out[s, j] = o / np.sqrt((o * o).mean() + eps) * w * zz / (1 + np.exp(-zz))
    return states, out


def head_major(x, lens):
    """Token-major [rows, heads, d] to head-major per span ([heads, n, d] blocks), flat."""
    out, r0 = [], 0
    for n in lens:
        out.append(x[r0:r0 + n].transpose(1, 0, 2).reshape(-1))
        r0 += n
    return np.concatenate(out).astype(x.dtype)


CHAIN = 0xFFFFFFFF  # tree_of of a chain span, parents of a tree root


def gdn_spans(rng, lens, trees):
    """starts, tree_of and parents (per batch row) for spans of `lens` rows; spans whose
    `trees` flag is set get random trees (parents before children, two roots at most)."""
    starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
    tree_of = np.full(len(lens), CHAIN, np.uint32)
    parents = np.full(int(starts[-1]), CHAIN, np.uint32)
    for s, (n, is_tree) in enumerate(zip(lens, trees)):
        if is_tree:
            tree_of[s] = int((tree_of[:s] != CHAIN).sum())
            for i in range(1, n):
                parents[starts[s] + i] = CHAIN if i == 1 and n > 4 else rng.integers(0, i)
    return starts, tree_of, parents


def ancestors(parents, r0, i):
    """Row i's ancestors within its span, root first."""
    path, p = [], parents[r0 + i]
    while p != CHAIN:
        path.append(int(p))
        p = parents[r0 + p]
    return path[::-1]


def gdn_case(rng, lens, trees, hk, hv, dk, dv):
    """Inputs of the recurrence kernels over spans of `lens` rows (`trees`: which are token
    trees) and the reference: chain rows one after the other on their span's slot; a tree
    row from the committed state along its ancestors, leaving the slot as it was."""
    spans, rows = len(lens), sum(lens)
    starts, tree_of, parents = gdn_spans(rng, lens, trees)
    slots = spans + 2
    states = (rng.standard_normal((slots, hv, dk, dv)) * 0.1).astype(F32)
    states[0, 0, 0, :4] = 1e-20  # flushed to zero by the update
    slot_of = rng.permutation(slots)[:spans].astype(np.uint32)

    def unit(shape):
        x = rng.standard_normal(shape)
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(F32)

    q, k = (unit((rows, hk, dk)) / np.sqrt(dk)).astype(F32), unit((rows, hk, dk))
    v, z = rng.standard_normal((rows, hv, dv)).astype(F32), rng.standard_normal((rows, hv, dv)).astype(F32)
    b, a = rng.standard_normal((rows, hv)).astype(F32), (rng.standard_normal((rows, hv)) * 3).astype(F32)
    a[0, 0] = 30.0  # softplus past its threshold
    neg_a = -np.exp(rng.standard_normal(hv)).astype(F32)
    neg_a[-1] = -60.0  # a decay below 2^-60: forgets everything
    dt_bias = rng.standard_normal(hv).astype(F32)
    w = (1 + 0.1 * rng.standard_normal(dv)).astype(F32)
    args = (neg_a, dt_bias, w, hk, 1e-6)
    want_states, want = states.astype(np.float64), np.zeros((rows, hv, dv))
    for s in range(spans):
        r0 = int(starts[s])
        for t in range(r0, starts[s + 1]):
            sl = slice(t, t + 1)
            if tree_of[s] == CHAIN:
                want_states, o = gdn_decode_ref(want_states, slot_of[s:s + 1], q[sl], k[sl], v[sl], b[sl], a[sl],
                                                z[sl], *args)
            else:
                st = want_states.copy()
                for p_ in ancestors(parents, r0, t - r0):
                    pl = slice(r0 + p_, r0 + p_ + 1)
                    st, _ = gdn_decode_ref(st, slot_of[s:s + 1], q[pl], k[pl], v[pl], b[pl], a[pl], z[pl], *args)
                _, o = gdn_decode_ref(st, slot_of[s:s + 1], q[sl], k[sl], v[sl], b[sl], a[sl], z[sl], *args)
            want[t] = o[0]
    qh, kh, vh = head_major(q, lens), head_major(k, lens), head_major(v, lens)
    scratch = np.full((max(1, int((tree_of != CHAIN).sum())), hv, dk, dv), np.nan, F32)
    kernel_args = [slot_of, starts, tree_of, parents, scratch, qh, kh, vh, b, a, z, neg_a, dt_bias, w]
    return states, kernel_args, want_states, want


def run_gdn_case(lib, chunked, rng, lens, trees, hk, hv, dk, dv, tol):
    """Runs the row (chunked = 0) or chunked (1) recurrence kernel on a case and checks
    outputs, states and the slots it must leave alone."""
    states, kernel_args, want_states, want = gdn_case(rng, lens, trees, hk, hv, dk, dv)
    got_states, out = states.copy(), np.zeros(want.shape, F32)
    lib.emu_gdn_recurrence(chunked, ptr(got_states), *map(ptr, kernel_args), ptr(out), len(lens), hk, hv, dk,
                           dv, 1e-6)
    err = np.abs(out - want).max() / np.abs(want).max()
    assert err < tol, f"gdn out {lens},{hk},{hv},{dk},{dv}: {err:.2e}"
    serr = np.abs(got_states - want_states).max() / np.abs(want_states).max()
    assert serr < tol, f"gdn states {lens}: {serr:.2e}"
    slot_of, tree_of = kernel_args[0], kernel_args[2]
    untouched = np.setdiff1d(np.arange(len(states)), slot_of[tree_of == CHAIN])
    assert np.array_equal(got_states[untouched], states[untouched]), "tree and other slots untouched"


def check_gdn_recurrence(lib, rng):
    for case in [([1, 3, 2, 6], [0, 0, 0, 1], 2, 4, 64, 128), ([4, 1, 5], [1, 0, 1], 1, 2, 128, 200),
                 ([1], [0], 2, 2, 16, 8)]:
        run_gdn_case(lib, 0, rng, *case, 1e-5)
    print("model GDN recurrence (delta rule + gated norm; decode, prompt and tree spans): match")


def check_gdn_chunked(lib, rng):
    # Spans of one row, of several chunks with a partial last one, of exactly one chunk;
    # dv below and at the thread count, dk at the chunked kernel's limit.
    for case in [([1, 70, 5, 32], [0, 0, 0, 0], 2, 4, 64, 128), ([33], [0], 1, 2, 128, 48),
                 ([2, 9], [0, 0], 2, 2, 16, 8)]:
        run_gdn_case(lib, 1, rng, *case, 2e-5)
    print("model GDN chunked delta rule (chunks of 32, partial chunks, one-row spans): match")


def check_gdn_conv(lib, rng):
    for lens, trees, hk, hv, dk, dv, kernel in [([1, 4, 2, 7], [0, 0, 0, 1], 2, 4, 64, 128, 4),
                                                ([3, 1, 5], [1, 0, 1], 1, 2, 200, 16, 2), ([2], [0], 1, 1, 8, 8, 1)]:
        spans, rows = len(lens), sum(lens)
        starts, tree_of, parents = gdn_spans(rng, lens, trees)
        c = 2 * hk * dk + hv * dv
        slots = spans + 1
        hist = kernel - 1
        windows = rng.standard_normal((slots, hist, c)).astype(F32)
        slot_of = rng.permutation(slots)[:spans].astype(np.uint32)
        qkv = rng.standard_normal((rows, c)).astype(F32)
        taps = (rng.standard_normal((kernel, c)) * 0.5).astype(F32)
        want_win = windows.astype(np.float64)
        conv = np.zeros((rows, c))
        for s in range(spans):
            r0 = int(starts[s])
            for t in range(r0, starts[s + 1]):
                if tree_of[s] == CHAIN:
                    rws = np.concatenate([want_win[slot_of[s]], qkv[t][None].astype(np.float64)])
                    want_win[slot_of[s]] = rws[1:]
                else:
                    path = [r0 + p_ for p_ in ancestors(parents, r0, t - r0)] + [t]
                    rws = np.concatenate([want_win[slot_of[s]], qkv[path].astype(np.float64)])[-kernel:]
                o = (taps.astype(np.float64) * rws).sum(axis=0)
                conv[t] = o / (1 + np.exp(-o))
        qk = conv[:, :2 * hk * dk].reshape(rows, 2 * hk, dk)
        qk = qk / np.sqrt((qk * qk).sum(axis=-1, keepdims=True) + 1e-6)
        want_q, want_k = head_major(qk[:, :hk] / np.sqrt(dk), lens), head_major(qk[:, hk:], lens)
        want_v = head_major(conv[:, 2 * hk * dk:].reshape(rows, hv, dv), lens)
        win = windows.copy()
        q, k, v = np.zeros(rows * hk * dk, F32), np.zeros(rows * hk * dk, F32), np.zeros(rows * hv * dv, F32)
        lib.emu_gdn_conv(ptr(win), ptr(slot_of), ptr(starts), ptr(tree_of), ptr(parents), ptr(qkv), ptr(taps), ptr(q),
                         ptr(k), ptr(v), spans, hk, hv, dk, dv, kernel)
        for name, got, want in [("q", q, want_q), ("k", k, want_k), ("v", v, want_v)]:
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err < 1e-6, f"gdn conv {name} {lens},{hk},{hv},{dk},{dv},{kernel}: {err:.2e}"
        assert np.array_equal(win, want_win.astype(F32)), "chain windows shift exactly, tree windows stay"
    print("model GDN conv (conv + SiLU over decode, prompt and tree spans, window shift, q/k L2 norms): match")


def check_attn_inputs(lib, rng):
    """Split q/gate, zero-centred q/k norms and partial RoPE (cpu/attention.rs::prepare)."""
    for rows, heads, kv_heads, dim, half in [(3, 4, 2, 64, 8), (2, 3, 1, 256, 32), (1, 2, 2, 32, 16)]:
        qg = rng.standard_normal((rows, heads, 2 * dim)).astype(F32)
        k = rng.standard_normal((rows, kv_heads, dim)).astype(F32)
        positions = np.array([0, 7, 40000][:rows], np.uint32)
        qw, kw = (rng.standard_normal(dim) * 0.1).astype(F32), (rng.standard_normal(dim) * 0.1).astype(F32)
        inv_freq = (1.0 / np.power(F32(1e7), np.arange(half, dtype=F32) * 2 / F32(2 * half))).astype(F32)
        q, gate = np.zeros((rows, heads, dim), F32), np.zeros((rows, heads, dim), F32)
        kk = k.copy()
        lib.emu_attn_inputs(ptr(qg), ptr(kk), ptr(positions), ptr(qw), ptr(kw), ptr(inv_freq), ptr(q), ptr(gate),
                            rows, heads, kv_heads, dim, half, 1e-6)

        def ref(x, w, pos):
            x = x.astype(np.float64)
            x = x / np.sqrt((x * x).mean() + 1e-6) * (1 + w.astype(np.float64))
            ang = (F32(pos) * inv_freq).astype(np.float64)  # the angle rounds to f32, as on the CPU
            c, s_ = np.cos(ang), np.sin(ang)
            o = x.copy()
            o[:half] = x[:half] * c - x[half:2 * half] * s_
            o[half:2 * half] = x[half:2 * half] * c + x[:half] * s_
            return o
        assert (gate == qg[:, :, dim:]).all(), "gate copied exactly"
        for t in range(rows):
            for got, x, w in [(q[t, h], qg[t, h, :dim], qw) for h in range(heads)] + \
                    [(kk[t, h], k[t, h], kw) for h in range(kv_heads)]:
                want = ref(x, w, positions[t])
                err = np.abs(got - want).max() / np.abs(want).max()
                assert err < 2e-6, f"rope {dim}/{half} at {positions[t]}: {err:.2e}"
    print("model attention inputs (q/gate split, q/k norms, partial RoPE): match")


def check_kv_store(lib, rng):
    """Stores rows into pages (FP8 / bf16 / f32 encodings) and copies rows in order."""
    kv_heads, block, dim, pool, rows = 2, 4, 32, 5, 7
    shape = (pool, kv_heads, block, dim)
    slots = rng.permutation(pool * block)[:rows].astype(np.uint32)
    k = (rng.standard_normal((rows, kv_heads, dim)) * 3).astype(F32)
    v = (rng.standard_normal((rows, kv_heads, dim)) * 3).astype(F32)
    k[0, 0, 0] = np.nan
    ks, vs = F32(0.05), F32(0.03)
    for kv, dtype in [(0, np.uint8), (1, np.uint16), (2, F32)]:
        keys, values = np.zeros(shape, dtype), np.zeros(shape, dtype)
        lib.emu_kv_store(kv, ptr(k), ptr(v), ptr(slots), ptr(keys), ptr(values), ks, vs, kv_heads, block, dim, rows)
        for r, slot in enumerate(slots):
            page, row = divmod(int(slot), block)
            for src, scale, got in [(k, ks, keys), (v, vs, values)]:
                x = src[r]
                if kv == 0:
                    want = np.array([[e4m3_encode(F32(a) / scale) for a in hrow] for hrow in x], np.uint8)
                elif kv == 1:
                    want = to_bf16(x)[0].reshape(x.shape)
                    want[np.isnan(x)] = (x.view(np.uint32)[np.isnan(x)] >> 16) | 0x40
                else:
                    want = x
                g = got[page, :, row]
                assert (g.view(np.uint8) == want.astype(dtype).view(np.uint8)).all(), f"kv store kv={kv} slot {slot}"
        # Moves in order: the second reads what the first wrote (a chain a -> b -> c).
        a, b, c = int(slots[1]), int(slots[2]), int(slots[3])
        before = keys.copy()
        moves = np.array([a, b, b, c], np.uint32)
        lib.emu_kv_copy_rows(kv, ptr(keys), ptr(values), ptr(moves), 2, kv_heads, block, dim)
        pa, ra = divmod(a, block)
        for dst in (b, c):
            pd, rd = divmod(dst, block)
            assert (keys[pd, :, rd].view(np.uint8) == before[pa, :, ra].view(np.uint8)).all(), f"kv copy kv={kv}"
    print("model KV store (FP8/bf16/f32 encodings, NaN kept) and ordered row copies: exact")


def attn_rows_plan(rng, spans, max_pages, block):
    """Query rows of four kinds over `spans` sequences: decode rows (causal, the whole
    table at most), short prompt chunks, token-tree nodes (a committed prefix plus a mask
    of tree rows, some past bit 31 and one with no committed row) and a long prompt chunk
    (several tiles of the tile kernel)."""
    capacity = max_pages * block
    span_of, lens, masks = [], [], []
    for s in range(spans):
        kind = s % 4
        if kind == 3:  # a long prompt chunk from row 0
            for i in range(min(70, capacity)):
                span_of.append(s), lens.append(i + 1), masks.append(0)
            continue
        if kind == 0:  # one decode row
            span_of.append(s), lens.append(capacity if s == 0 else int(rng.integers(1, capacity + 1))), masks.append(0)
        elif kind == 1:  # a prompt chunk at position `first`
            first = int(rng.integers(0, capacity - 6))
            for i in range(int(rng.integers(2, 6))):
                span_of.append(s), lens.append(first + i + 1), masks.append(0)
        else:  # a tree after `first` committed rows
            extent = min(64, capacity - 1)
            first = int(rng.integers(0, capacity - extent + 1))
            for i in range(4):
                m = int(rng.integers(1, 1 << 62)) & ((1 << extent) - 1) or 1
                span_of.append(s), lens.append(0 if i == 0 else first), masks.append(m)
    return (np.array(span_of, np.uint32), np.array(lens, np.uint32), np.array(masks, np.uint64))


def attn_tiles(span_of, group):
    """The tile kernel's tiles: runs of consecutive rows of one span, at most 64 // group
    rows each (EQ_TILE_PAIRS pairs)."""
    first, count, most = [], [], 64 // group
    for i, s in enumerate(span_of):
        if count and span_of[first[-1]] == s and count[-1] < most:
            count[-1] += 1
        else:
            first.append(i), count.append(1)
    return np.array(first, np.uint32), np.array(count, np.uint32)


def check_attn_rows(lib, rng):
    for kv, (kv_heads, group, dim, block, spans, split_rows) in [
            (0, (2, 3, 64, 16, 4, 32)), (1, (1, 8, 128, 8, 4, 16)), (2, (2, 1, 32, 4, 4, 8)), (0, (1, 2, 256, 16, 1, 64)),
            (1, (2, 6, 256, 16, 4, 256)), (0, (4, 1, 32, 16, 5, 64))]:
        max_pages, pool = 6 if block >= 16 else 20, 24
        span_of, lens, masks = attn_rows_plan(rng, spans, max_pages, block)
        rows = len(lens)
        table = np.stack([rng.permutation(pool)[:max_pages] for _ in range(spans)]).astype(np.uint32)
        shape = (pool, kv_heads, block, dim)
        k_scale, v_scale = 0.05, 0.03
        if kv == 0:
            codes = lambda: rng.choice(np.setdiff1d(np.arange(256), [0x7F, 0xFF]), shape).astype(np.uint8)  # noqa: E731
            keys, values = codes(), codes()
            kd, vd = E4M3[keys].astype(np.float64) * F32(k_scale), E4M3[values].astype(np.float64) * F32(v_scale)
            kd, vd = kd.astype(F32).astype(np.float64), vd.astype(F32).astype(np.float64)
        elif kv == 1:
            (keys, kd), (values, vd) = to_bf16(rng.standard_normal(shape).astype(F32)), to_bf16(rng.standard_normal(shape).astype(F32))
            kd, vd = kd.reshape(shape).astype(np.float64), vd.reshape(shape).astype(np.float64)
            keys, values = keys.reshape(shape), values.reshape(shape)
        else:
            keys, values = rng.standard_normal(shape).astype(F32), rng.standard_normal(shape).astype(F32)
            kd, vd = keys.astype(np.float64), values.astype(np.float64)
        heads = kv_heads * group
        # Cache rows no query row sees (stale data, a tree's unused slots) hold NaN: both
        # kernels must leave them out rather than weigh them by 0.
        seen_slots = set()
        for s in range(rows):
            for r in list(range(lens[s])) + [int(lens[s]) + o for o in range(64) if (int(masks[s]) >> o) & 1]:
                seen_slots.add((int(table[span_of[s]][r // block]), r % block))
        nan_bits = {0: 0x7F, 1: 0x7FC0}.get(kv)
        for page in range(pool):
            for r in range(block):
                if (page, r) not in seen_slots:
                    for arr in (keys, values):
                        if nan_bits is None:
                            arr[page, :, r] = np.nan
                        else:
                            arr[page, :, r] = nan_bits
        q = (rng.standard_normal((rows, heads, dim)) * 2).astype(F32)
        scale = 1 / np.sqrt(dim)
        want = np.zeros((rows, heads, dim))
        ends = []
        for s in range(rows):
            tree = [int(lens[s]) + o for o in range(64) if (int(masks[s]) >> o) & 1]
            seen = np.array(list(range(lens[s])) + tree)
            ends.append(seen.max() + 1)
            pages, within = table[span_of[s]][seen // block], seen % block
            for h in range(heads):
                K, V = kd[pages, h // group, within], vd[pages, h // group, within]
                sc = K @ q[s, h].astype(np.float64) * scale
                w = np.exp(sc - sc.max())
                want[s, h] = (w / w.sum()) @ V
        splits = -(-int(max(ends)) // split_rows)
        part_m = np.zeros(rows * heads * splits, F32)
        part_l, part_acc = np.zeros_like(part_m), np.zeros(rows * heads * splits * dim, F32)
        out = np.zeros((rows, heads, dim), F32)
        lib.emu_attn(ptr(q), ptr(table), ptr(span_of), ptr(lens), ptr(masks), None, None, 0, ptr(keys),
                     ptr(values), kv, k_scale, v_scale, scale, ptr(part_m), ptr(part_l), ptr(part_acc), ptr(out), rows,
                     kv_heads, group, dim, block, max_pages, split_rows, splits)
        err = np.abs(out - want).max() / np.abs(want).max()
        assert err < 2e-6, f"attention kv={kv} {kv_heads}x{group}x{dim} block {block}: {err:.2e}"
        if kv == 2:
            continue  # f32 caches take the row kernel only
        first, count = attn_tiles(span_of, group)
        part_m[:], part_l[:], part_acc[:], out[:] = np.nan, np.nan, np.nan, np.nan
        lib.emu_attn(ptr(q), ptr(table), ptr(span_of), ptr(lens), ptr(masks), ptr(first), ptr(count), len(first),
                     ptr(keys), ptr(values), kv, k_scale, v_scale, scale, ptr(part_m), ptr(part_l), ptr(part_acc),
                     ptr(out), rows, kv_heads, group, dim, block, max_pages, split_rows, splits)
        err = np.abs(out - want).max() / np.abs(want).max()
        assert err < 1e-5, f"tile attention kv={kv} {kv_heads}x{group}x{dim} block {block}: {err:.2e}"
    print("model paged attention (decode, prompt and tree rows; FP8/bf16/f32 KV, GQA, split sequence, NaN in "
          "rows no query sees), row and tensor-core tile kernels: match")


def main():
    lib = build()
    setup(lib)
    rng = np.random.default_rng(11)
    check_elementwise(lib, rng)
    check_norms(lib, rng)
    check_argmax(lib, rng)
    check_topk(lib, rng)
    check_gdn_recurrence(lib, rng)
    check_gdn_chunked(lib, rng)
    check_gdn_conv(lib, rng)
    check_attn_inputs(lib, rng)
    check_kv_store(lib, rng)
    check_attn_rows(lib, rng)
    print("host emulation: all model kernel checks passed")


if __name__ == "__main__":
    sys.exit(main())
