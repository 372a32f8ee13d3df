#!/usr/bin/env python3
"""Checks edge-quant's CUDA kernels on the host, without a GPU.

Builds emulate.cpp (the .cu files compiled by g++ over a small SIMT runtime) into a
shared library and compares every kernel with references written here independently of
the Rust and CUDA code: encoders are brute-force nearest-value searches with ties to the
even code over the format's decode table (not bit tricks), the NVFP4 rules are ModelOpt's
as documented, and the products are float64 matrix products. The ModelOpt 0.47 export
vectors in crates/edge-quant/tests/data/nvfp4-vectors.json are checked byte for byte.

Usage: python3 kernels/host_emulation/check.py   (needs g++ with C++20, and numpy)
"""

import ctypes
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
F32 = np.float32


def build():
    out = pathlib.Path(tempfile.gettempdir()) / "edge_quant_kernel_emulation.so"
    cmd = ["g++", "-std=c++20", "-O1", "-fno-strict-aliasing", "-ffp-contract=off",
           "-fPIC", "-shared", "-pthread", str(HERE / "emulate.cpp"), str(HERE / "simt.cpp"),
           "-o", str(out)]
    subprocess.run(cmd, check=True)
    lib = ctypes.CDLL(str(out))
    p, u64, u32, f = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_float
    lib.emu_nvfp4_quantize.argtypes = [p, p, p, p, f, u64]
    lib.emu_nvfp4_dequantize.argtypes = [p, p, p, f, u64]
    lib.emu_nvfp4_linear.argtypes = [p, p, p, ctypes.c_int, p, f, u32, u32, u32]
    lib.emu_nvfp4_linear_tc.argtypes = [p, p, p, ctypes.c_int, p, f, u32, u32, u32]
    lib.emu_bf16_linear_tc.argtypes = [p, p, ctypes.c_int, p, u32, u32, u32]
    lib.emu_fp8_quantize.argtypes = [p, ctypes.c_int, p, f, u64]
    lib.emu_fp8_dequantize.argtypes = [p, p, f, u64]
    lib.emu_absmax.argtypes = [p, u64]
    lib.emu_absmax.restype = u32
    return lib


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


# ---- independent references ---------------------------------------------------------
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)


def e4m3_table():
    t = np.zeros(256)
    for b in range(256):
        e, m = (b >> 3) & 15, b & 7
        mag = np.nan if (e == 15 and m == 7) else (m / 512 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
        t[b] = -mag if b & 0x80 else mag
    return t


E4M3 = e4m3_table()


def nearest_even(a, table):
    """Index of the table value nearest to a >= 0 (table ascending), ties to even index."""
    i = int(np.searchsorted(table, a))
    if i >= len(table):
        return len(table) - 1
    if i == 0 or table[i] == a:
        return i
    lo, hi = table[i - 1], table[i]
    if a - lo < hi - a:
        return i - 1
    if a - lo > hi - a:
        return i
    return i - 1 if (i - 1) % 2 == 0 else i


def e2m1_encode(x):
    x = float(x)
    sign = 8 if x < 0 else 0
    a = abs(x)
    return sign | (7 if np.isnan(a) else nearest_even(min(a, 6.0), E2M1))


def e4m3_encode(x):
    x = float(x)
    if np.isnan(x):
        return 0x7F
    sign = 0x80 if np.signbit(x) else 0
    return sign | nearest_even(min(abs(x), 448.0), E4M3[:0x7F])


def nvfp4_quantize_ref(x, g):
    g = F32(g)
    blocks = x.reshape(-1, 16)
    codes, scales = [], []
    for blk in blocks:
        s = F32(np.abs(blk).max()) / (F32(6) * g)
        s = F32(1) if s == 0 else s
        s = F32(min(max(s, F32(2.0 ** -9)), F32(448)))
        sf = e4m3_encode(s)
        denom = F32(E4M3[sf]) * g
        q = [e2m1_encode(F32(v) / denom) for v in blk]
        scales.append(sf)
        codes += [q[i] | (q[i + 1] << 4) for i in range(0, 16, 2)]
    return np.array(codes, np.uint8), np.array(scales, np.uint8)


def nvfp4_dequantize_ref(codes, scales, g):
    nib = np.stack([codes & 15, codes >> 4], axis=1).reshape(-1)
    vals = np.where(nib & 8, -1.0, 1.0) * E2M1[nib & 7]
    vals = np.where((nib == 8), -0.0, vals).astype(F32)
    sc = (E4M3[scales].astype(F32) * F32(g)).astype(F32)
    return (vals.reshape(-1, 16) * sc[:, None]).reshape(-1)


# ---- checks ---------------------------------------------------------------------------
def weight_data(rng, rows, cols):
    x = (rng.standard_normal(rows * cols) * 0.05).astype(F32)
    x[::97] *= 40
    x[16:32] = 0
    if x.size >= 64:
        x[32:48] = ((np.arange(16) - 7.5) * 1e-7).astype(F32)
        t = np.array([.25, .75, 1.25, 1.75, 2.5, 3.5, 5, 6], F32)
        x[48:64] = np.concatenate([t, -t])
    return x


def quantize_gpu(lib, x, g):
    n_blocks = x.size // 16
    codes = np.zeros(x.size // 2, np.uint8)
    scales = np.zeros(n_blocks, np.uint8)
    bad = np.array([2 ** 64 - 1], np.uint64)
    lib.emu_nvfp4_quantize(ptr(x), ptr(codes), ptr(scales), ptr(bad), g, n_blocks)
    return codes, scales, int(bad[0])


def check_quantize(lib, rng):
    for rows, cols in [(64, 512), (3, 48), (7, 16)]:
        x = weight_data(rng, rows, cols)
        g0 = F32(np.abs(x).max()) / F32(2688)
        for g in [g0, g0 / F32(8), g0 * F32(300)]:
            want = nvfp4_quantize_ref(x, g)
            codes, scales, bad = quantize_gpu(lib, x, float(g))
            assert bad == 2 ** 64 - 1
            assert np.array_equal(codes, want[0]), f"codes {rows}x{cols} g={g}"
            assert np.array_equal(scales, want[1]), f"scales {rows}x{cols} g={g}"
    x = weight_data(rng, 4, 64)
    x[100], x[37] = np.inf, np.nan
    assert quantize_gpu(lib, x, 0.01)[2] == 37
    vec = json.loads((ROOT / "crates/edge-quant/tests/data/nvfp4-vectors.json").read_text())
    for case in vec["nvfp4_weight_cases"]:
        x = np.array([int(h, 16) for h in case["input_f32_hex"]], np.uint32).view(F32)
        g = np.array([int(case["weight_scale_2_hex"], 16)], np.uint32).view(F32)[0]
        codes, scales, _ = quantize_gpu(lib, x, float(g))
        assert list(codes) == case["weight_uint8"], case["name"]
        assert list(scales) == case["weight_scale_e4m3_u8"], case["name"]
    print("nvfp4 quantize: identical to the reference and to", len(vec["nvfp4_weight_cases"]),
          "ModelOpt cases")


def same_bits(a, b):
    return np.all((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b)))


def check_dequantize(lib, rng):
    rows, cols = 256, 64
    codes = rng.integers(0, 256, rows * cols // 2, dtype=np.uint8)
    scales = (np.arange(rows * cols // 16) % 256).astype(np.uint8)
    for g in [0.37, 1.5e-39, 0.0]:
        out = np.zeros(rows * cols, F32)
        lib.emu_nvfp4_dequantize(ptr(codes), ptr(scales), ptr(out), g, scales.size)
        assert same_bits(out, nvfp4_dequantize_ref(codes, scales, F32(g))), f"g={g}"
    print("nvfp4 dequantize: bit-identical (every scale byte, denormal and zero g)")


def to_bf16(x):
    b = x.astype(F32).view(np.uint32)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return b, (b.astype(np.uint32) << 16).view(F32)


def check_linear(lib, rng):
    worst = 0.0
    for rows, cols in [(257, 1024), (96, 528), (40, 16), (33, 2064)]:
        w = weight_data(rng, rows, cols)
        g = F32(np.abs(w).max()) / F32(2688)
        codes, scales = nvfp4_quantize_ref(w, g)
        wd = nvfp4_dequantize_ref(codes, scales, g).reshape(rows, cols).astype(np.float64)
        for tokens in [1, 2, 3, 4, 5, 8, 9, 16, 17, 33]:
            x = rng.standard_normal(tokens * cols).astype(F32)
            bits, wide = to_bf16(x)
            for bf16, xin, xref in [(0, x, x), (1, bits, wide)]:
                y = np.zeros(tokens * rows, F32)
                lib.emu_nvfp4_linear(ptr(codes), ptr(scales), ptr(xin), bf16, ptr(y), g,
                                     rows, cols, tokens)
                xr = xref.reshape(tokens, cols).astype(np.float64)
                ref = xr @ wd.T
                mag = np.abs(xr) @ np.abs(wd).T
                err = np.abs(y.reshape(tokens, rows) - ref)
                ok = err <= 1e-4 * mag + 1e-30
                assert ok.all(), f"{rows}x{cols} tokens={tokens} bf16={bf16}: {err.max()}"
                worst = max(worst, float((err / np.maximum(mag, 1e-300)).max()))
    print(f"nvfp4 linear (GEMV and GEMM, f32 and bf16): worst |err|/sum|xw| = {worst:.2e}")


def check_linear_tc(lib, rng):
    """The tensor-core kernel: bf16 products of the exactly dequantized weights and the
    bf16-rounded activations (f32 inputs are rounded to nearest even in the kernel)."""
    worst = 0.0
    for rows, cols in [(80, 640), (33, 400), (40, 16), (17, 2064)]:
        w = weight_data(rng, rows, cols)
        w[5::31] = -w[5::31]
        g = F32(np.abs(w).max()) / F32(2688)
        codes, scales = nvfp4_quantize_ref(w, g)
        wd = nvfp4_dequantize_ref(codes, scales, g).reshape(rows, cols).astype(np.float64)
        for tokens in [1, 3, 8, 9, 16, 20, 33, 64, 70]:
            x = rng.standard_normal(tokens * cols).astype(F32)
            bits, wide = to_bf16(x)
            for bf16, xin in [(0, x), (1, bits)]:
                y = np.full(tokens * rows, np.nan, F32)
                lib.emu_nvfp4_linear_tc(ptr(codes), ptr(scales), ptr(xin), bf16, ptr(y), g,
                                        rows, cols, tokens)
                xr = wide.reshape(tokens, cols).astype(np.float64)
                ref = xr @ wd.T
                mag = np.abs(xr) @ np.abs(wd).T
                err = np.abs(y.reshape(tokens, rows) - ref)
                ok = err <= 1e-5 * mag + 1e-30
                assert ok.all(), f"tc {rows}x{cols} tokens={tokens} bf16={bf16}: {np.nanmax(err)}"
                worst = max(worst, float((err / np.maximum(mag, 1e-300)).max()))
    print(f"nvfp4 linear (tensor cores, f32 and bf16): worst |err|/sum|xw| = {worst:.2e}")


def check_bf16_linear_tc(lib, rng):
    """The bf16-weight tensor-core kernel against f64 products of bf16(w) and bf16(x)."""
    worst = 0.0
    for rows, cols in [(80, 640), (33, 400), (40, 16), (17, 2064)]:
        wbits, wd = to_bf16(rng.standard_normal(rows * cols).astype(F32))
        wd = wd.reshape(rows, cols).astype(np.float64)
        for tokens in [1, 3, 9, 20, 33, 70]:
            x = rng.standard_normal(tokens * cols).astype(F32)
            bits, wide = to_bf16(x)
            for bf16, xin in [(0, x), (1, bits)]:
                y = np.full(tokens * rows, np.nan, F32)
                lib.emu_bf16_linear_tc(ptr(wbits), ptr(xin), bf16, ptr(y), rows, cols, tokens)
                xr = wide.reshape(tokens, cols).astype(np.float64)
                ref = xr @ wd.T
                mag = np.abs(xr) @ np.abs(wd).T
                err = np.abs(y.reshape(tokens, rows) - ref)
                ok = err <= 1e-5 * mag + 1e-30
                assert ok.all(), f"bf16 tc {rows}x{cols} tokens={tokens} bf16={bf16}: {np.nanmax(err)}"
                worst = max(worst, float((err / np.maximum(mag, 1e-300)).max()))
    print(f"bf16 linear (tensor cores, f32 and bf16): worst |err|/sum|xw| = {worst:.2e}")


def check_fp8(lib, rng):
    scale = F32(0.0123)
    x = weight_data(rng, 16, 64)
    x[:10] = [0, -0.0, 1e-40, -3e-6, 5.6, -5.6, 1e6, np.inf, -np.inf, np.nan]
    for b in range(0x7E):
        x[16 + b] = F32((E4M3[b] + E4M3[b + 1]) / 2) * scale
    q = np.zeros(x.size, np.uint8)
    lib.emu_fp8_quantize(ptr(x), 0, ptr(q), scale, x.size)
    want = np.array([e4m3_encode(F32(v) / scale) for v in x], np.uint8)
    assert np.array_equal(q, want), "fp8 quantize f32"
    bits, wide = to_bf16(np.nan_to_num(x, nan=1.0, posinf=1.0, neginf=1.0))
    lib.emu_fp8_quantize(ptr(bits), 1, ptr(q), scale, x.size)
    want = np.array([e4m3_encode(F32(v) / scale) for v in wide], np.uint8)
    assert np.array_equal(q, want), "fp8 quantize bf16"
    allb = (np.arange(1024) % 256).astype(np.uint8)
    out = np.zeros(1024, F32)
    lib.emu_fp8_dequantize(ptr(allb), ptr(out), scale, 1024)
    assert same_bits(out, (E4M3[allb].astype(F32) * scale).astype(F32)), "fp8 dequantize"
    finite = np.nan_to_num(x, nan=1.0, posinf=1.0, neginf=1.0).astype(F32)
    assert lib.emu_absmax(ptr(finite), finite.size) == np.abs(finite).max().view(np.uint32)
    assert np.isnan(np.array([lib.emu_absmax(ptr(x), x.size)], np.uint32).view(F32)[0])
    print("fp8 quantize/dequantize/absmax: identical")


CHECKS = {"quantize": check_quantize, "dequantize": check_dequantize, "fp8": check_fp8,
          "linear": check_linear, "linear_tc": check_linear_tc, "bf16_linear_tc": check_bf16_linear_tc}


def main():
    """Runs every check, or those named on the command line (e.g. `check.py bf16_linear_tc`)."""
    names = sys.argv[1:] or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise SystemExit(f"unknown checks {unknown}; known: {', '.join(CHECKS)}")
    lib = build()
    rng = np.random.default_rng(7)
    for name in names:
        CHECKS[name](lib, rng)
    print("host emulation: all kernel checks passed" if not sys.argv[1:] else "host emulation: checks passed")


if __name__ == "__main__":
    sys.exit(main())
