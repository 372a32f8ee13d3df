//! AVX-512 (F/BW/VL/VNNI) kernels. See [`crate::linear::fast::Isa`] for each
//! function's contract; these are its 16-lane implementations.
//!
//! - f32 dots: FMA over 16-lane vectors, four tokens per weight load, masked tails.
//! - NVFP4 (W4A16): `vpermps` uses only the low 4 bits of each 32-bit index, so one
//!   64-byte load of codes shifted right by `4j` (j = 0..8) indexes the E2M1 table
//!   directly: vector `j` holds nibble `j` of every 32-bit word ([`Perm::Nibble16x8`]).
//! - FP8 and E4M3 block scales: a byte `b` shifted into f16 bits (`b << 7`, sign moved
//!   to bit 15) is the f16 number `e4m3(b) · 2⁻⁸`, subnormals included; `vcvtph2ps`
//!   widens it. NaN codes take a table path instead.
//! - W4A4: a `vpshufb` table gives `2·E2M1 + 12` (unsigned) per weight nibble and
//!   `vpdpbusd` sums four u8×i8 products per 32-bit lane, exactly.
//!
//! [`Perm::Nibble16x8`]: crate::linear::fast::Perm::Nibble16x8

use super::super::portable::{self, OFFSET_DOUBLED};
use super::super::{PAIR_MIN_INPUTS, SEG};
use crate::formats::e2m1;
use core::arch::x86_64::*;

/// `acc[t] += Σ_i w[i] · xs[t·stride + i]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot(w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
    let n = w.len();
    let tokens = acc.len();
    let mut t = 0;
    while t + 4 <= tokens {
        let x = [0, 1, 2, 3].map(|j| &xs[(t + j) * stride..][..n]);
        let sums = dot4(w, x);
        for (a, s) in acc[t..t + 4].iter_mut().zip(sums) {
            *a += s;
        }
        t += 4;
    }
    for (j, a) in acc.iter_mut().enumerate().skip(t) {
        *a += dot1(w, &xs[j * stride..][..n]);
    }
}

/// The mask of the first `n.min(16)` lanes.
#[inline]
fn lanes(n: usize) -> __mmask16 {
    if n >= 16 { 0xffff } else { (1u16 << n) - 1 }
}

/// How far ahead of the bytes being decoded weights are prefetched: software
/// prefetch lets the next DRAM lines arrive while the current ones are decoded.
const PREFETCH_BYTES: usize = 4096;

/// Prefetches `data[at + PREFETCH_BYTES]` into L2 (an L2 prefetch holds no L1 fill
/// buffer while it waits for DRAM, so more lines can be in flight).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn prefetch(data: &[u8], at: usize) {
    // `wrapping_add` keeps the address computation defined past the end of the slice,
    // and a prefetch is only a hint: it never faults and changes no memory.
    let p = data.as_ptr().wrapping_add(at + PREFETCH_BYTES);
    _mm_prefetch::<_MM_HINT_T1>(p.cast());
}

/// Four dot products sharing each weight load (8 independent accumulators).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn dot4(w: &[f32], x: [&[f32]; 4]) -> [f32; 4] {
    let n = w.len();
    let (wp, xp) = (w.as_ptr(), x.map(|s| s.as_ptr()));
    let mut a = [_mm512_setzero_ps(); 8];
    let mut i = 0;
    while i + 32 <= n {
        // SAFETY: i + 32 <= n and `w` and every `x[j]` hold n floats.
        unsafe {
            let w0 = _mm512_loadu_ps(wp.add(i));
            let w1 = _mm512_loadu_ps(wp.add(i + 16));
            for j in 0..4 {
                a[j] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xp[j].add(i)), a[j]);
                a[j + 4] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xp[j].add(i + 16)), a[j + 4]);
            }
        }
        i += 32;
    }
    while i < n {
        let m = lanes(n - i);
        // SAFETY: i < n; the masked loads read only the first n − i lanes.
        unsafe {
            let w0 = _mm512_maskz_loadu_ps(m, wp.add(i));
            for j in 0..4 {
                a[j] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, xp[j].add(i)), a[j]);
            }
        }
        i += 16;
    }
    [0, 1, 2, 3].map(|j| _mm512_reduce_add_ps(_mm512_add_ps(a[j], a[j + 4])))
}

/// One dot product with four independent accumulators.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn dot1(w: &[f32], x: &[f32]) -> f32 {
    let n = w.len();
    let (wp, xp) = (w.as_ptr(), x.as_ptr());
    let mut a = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n and `w` and `x` hold n floats.
        unsafe {
            for (j, acc) in a.iter_mut().enumerate() {
                let o = i + 16 * j;
                *acc =
                    _mm512_fmadd_ps(_mm512_loadu_ps(wp.add(o)), _mm512_loadu_ps(xp.add(o)), *acc);
            }
        }
        i += 64;
    }
    while i < n {
        let m = lanes(n - i);
        // SAFETY: i < n; the masked loads read only the first n − i lanes.
        unsafe {
            let p = _mm512_mul_ps(
                _mm512_maskz_loadu_ps(m, wp.add(i)),
                _mm512_maskz_loadu_ps(m, xp.add(i)),
            );
            a[0] = _mm512_add_ps(a[0], p);
        }
        i += 16;
    }
    _mm512_reduce_add_ps(_mm512_add_ps(
        _mm512_add_ps(a[0], a[1]),
        _mm512_add_ps(a[2], a[3]),
    ))
}

/// Two dot products sharing each activation load (four accumulators per row).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot2(w0: &[f32], w1: &[f32], x: &[f32]) -> [f32; 2] {
    let n = w0.len();
    let (w1, x) = (&w1[..n], &x[..n]);
    let p = [w0.as_ptr(), w1.as_ptr()];
    let xp = x.as_ptr();
    let mut a = [[_mm512_setzero_ps(); 4]; 2];
    let mut i = 0;
    while i + 64 <= n {
        // SAFETY: i + 64 <= n and `w0`, `w1` and `x` hold n floats.
        unsafe {
            for j in 0..4 {
                let o = i + 16 * j;
                let xv = _mm512_loadu_ps(xp.add(o));
                for (ar, pr) in a.iter_mut().zip(p) {
                    ar[j] = _mm512_fmadd_ps(_mm512_loadu_ps(pr.add(o)), xv, ar[j]);
                }
            }
        }
        i += 64;
    }
    while i < n {
        let m = lanes(n - i);
        // SAFETY: i < n; the masked loads read only the first n − i lanes.
        unsafe {
            let xv = _mm512_maskz_loadu_ps(m, xp.add(i));
            for r in 0..2 {
                let wv = _mm512_maskz_loadu_ps(m, p[r].add(i));
                a[r][0] = _mm512_fmadd_ps(wv, xv, a[r][0]);
            }
        }
        i += 16;
    }
    a.map(|[b, c, d, e]| {
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(b, c), _mm512_add_ps(d, e)))
    })
}

/// Little-endian bf16 to f32 (a 16-bit left shift of each widened lane).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_bf16(src: &[u8], dst: &mut [f32]) {
    let n = dst.len();
    let mut i = 0;
    while i + 16 <= n {
        if i % 32 == 0 {
            prefetch(src, 2 * i);
        }
        // SAFETY: `src` holds 2n bytes, so bytes [2i, 2i + 32) and floats [i, i + 16)
        // are in bounds.
        unsafe {
            let v = _mm256_loadu_si256(src.as_ptr().add(2 * i).cast());
            let f = _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(v));
            _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_castsi512_ps(f));
        }
        i += 16;
    }
    portable::decode_bf16(&src[2 * i..], &mut dst[i..]);
}

/// 32 E4M3 bytes to the f16 bit patterns of `e4m3(b) · 2⁻⁸` (NaN codes excluded).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn e4m3_to_f16x32(v: __m256i) -> __m512i {
    let x = _mm512_slli_epi16::<7>(_mm512_cvtepu8_epi16(v));
    // The sign landed on bit 14; adding that bit moves it to bit 15.
    _mm512_add_epi16(x, _mm512_and_si512(x, _mm512_set1_epi16(0x4000)))
}

/// 16 E4M3 bytes to the f16 bit patterns of `e4m3(b) · 2⁻⁸` (NaN codes excluded).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn e4m3_to_f16x16(v: __m128i) -> __m256i {
    let x = _mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(v));
    _mm256_add_epi16(x, _mm256_and_si256(x, _mm256_set1_epi16(0x4000)))
}

/// Whether any of 64 bytes is an E4M3 NaN (S.1111.111).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn any_nan64(v: __m512i) -> bool {
    let m = _mm512_set1_epi8(0x7f);
    _mm512_cmpeq_epi8_mask(_mm512_and_si512(v, m), m) != 0
}

/// E4M3 bytes to `e4m3(b) · 2⁻⁸`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_fp8(src: &[u8], dst: &mut [f32]) {
    let n = dst.len();
    let mut i = 0;
    while i + 64 <= n {
        prefetch(src, i);
        // SAFETY: `src` and `dst` hold n elements and i + 64 <= n.
        unsafe {
            let v = _mm512_loadu_si512(src.as_ptr().add(i).cast());
            if any_nan64(v) {
                portable::decode_fp8(&src[i..i + 64], &mut dst[i..i + 64]);
            } else {
                let lo = e4m3_to_f16x32(_mm512_castsi512_si256(v));
                let hi = e4m3_to_f16x32(_mm512_extracti64x4_epi64::<1>(v));
                let d = dst.as_mut_ptr().add(i);
                _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm512_castsi512_si256(lo)));
                _mm512_storeu_ps(
                    d.add(16),
                    _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(lo)),
                );
                _mm512_storeu_ps(d.add(32), _mm512_cvtph_ps(_mm512_castsi512_si256(hi)));
                _mm512_storeu_ps(
                    d.add(48),
                    _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(hi)),
                );
            }
        }
        i += 64;
    }
    portable::decode_fp8(&src[i..], &mut dst[i..]);
}

/// E4M3 block scales to `e4m3(b) · 2⁻⁸`, 16 at a time.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_scales(src: &[u8], dst: &mut [f32]) {
    let n = dst.len();
    let m = _mm_set1_epi8(0x7f);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `src` and `dst` hold n elements and i + 16 <= n.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(i).cast());
            if _mm_cmpeq_epi8_mask(_mm_and_si128(v, m), m) != 0 {
                portable::decode_fp8(&src[i..i + 16], &mut dst[i..i + 16]);
            } else {
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(e4m3_to_f16x16(v)));
            }
        }
        i += 16;
    }
    portable::decode_fp8(&src[i..n], &mut dst[i..]);
}

/// NVFP4 to `E2M1 · e4m3(SF) · 2⁻⁸` in `Nibble16x8` order (natural-order tail).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_nvfp4(codes: &[u8], scales: &[u8], dst: &mut [f32]) {
    let chunks = dst.len() / 128;
    let mut sc = [0.0f32; SEG / 16];
    decode_scales(&scales[..8 * chunks], &mut sc[..8 * chunks]);
    // SAFETY: VALUES holds 16 floats.
    let lut = unsafe { _mm512_loadu_ps(e2m1::VALUES.as_ptr()) };
    // Lane i of every vector belongs to block i/2 of its chunk.
    let dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    for c in 0..chunks {
        // SAFETY: chunk c reads codes [64c, 64c + 64) of 64·chunks, scales [8c, 8c + 8)
        // of 8·chunks, and writes dst [128c, 128c + 128) of dst.len() >= 128·chunks.
        unsafe {
            let v = _mm512_loadu_si512(codes.as_ptr().add(64 * c).cast());
            let s8 = _mm256_loadu_ps(sc.as_ptr().add(8 * c));
            let s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(s8));
            let d = dst.as_mut_ptr().add(128 * c);
            let put = |j: usize, idx: __m512i| {
                _mm512_storeu_ps(
                    d.add(16 * j),
                    _mm512_mul_ps(_mm512_permutexvar_ps(idx, lut), s),
                );
            };
            put(0, v);
            put(1, _mm512_srli_epi32::<4>(v));
            put(2, _mm512_srli_epi32::<8>(v));
            put(3, _mm512_srli_epi32::<12>(v));
            put(4, _mm512_srli_epi32::<16>(v));
            put(5, _mm512_srli_epi32::<20>(v));
            put(6, _mm512_srli_epi32::<24>(v));
            put(7, _mm512_srli_epi32::<28>(v));
        }
    }
    let (c0, s0, d0) = (64 * chunks, 8 * chunks, 128 * chunks);
    portable::decode_nvfp4(&codes[c0..], &scales[s0..], &mut dst[d0..]);
}

/// The eight `Nibble16x8` vectors of one 128-element chunk: vector `j` holds the
/// E2M1 values of nibble `j` of each 32-bit word of `v`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn nibble_values(v: __m512i, lut: __m512) -> [__m512; 8] {
    [
        _mm512_permutexvar_ps(v, lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<4>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<8>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<12>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<16>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<20>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<24>(v), lut),
        _mm512_permutexvar_ps(_mm512_srli_epi32::<28>(v), lut),
    ]
}

/// Rows per multi-row single-token kernel call (see [`nvfp4_multirow`]).
const MULTIROW: usize = 4;

/// Inputs per k-segment when several tokens share the decoded weights: 8 tokens ×
/// 1024 f32 activations fill 32 KiB, so the activation tile stays in L1 across rows.
const MULTI_TOKEN_SEG: usize = 1024;

/// NVFP4 W4A16 for a tile of rows, decoding fused into the FMAs. Per 128-input chunk
/// the eight E2M1 vectors stay in registers; each token's 16-lane partial sum is
/// formed unscaled and multiplied by the block scales once.
///
/// One token: each row is one pass over its codes; rows of at least
/// [`PAIR_MIN_INPUTS`] go [`MULTIROW`] at a time so they share activation loads.
/// Several tokens: groups of up to 8
/// tokens share every decoded chunk, and rows are walked per [`MULTI_TOKEN_SEG`]-input
/// segment so the group's activations stay in L1. A natural-order row tail (fewer than
/// 128 inputs) is decoded into `buf`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn nvfp4_rows(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    xs: &[f32],
    tokens: usize,
    out: &mut [f32],
    buf: &mut [f32],
) {
    let rows = out.len() / tokens;
    let full = n_in / 128 * 128;
    // One token: rows share activation loads when the activation row does not fit L1.
    let multirow = tokens == 1 && n_in >= PAIR_MIN_INPUTS;
    let seg = if tokens == 1 {
        full.max(128)
    } else {
        MULTI_TOKEN_SEG
    };
    out.fill(0.0);
    let mut t0 = 0;
    while t0 < tokens {
        let group = match tokens - t0 {
            8.. => 8,
            4..=7 => 4,
            2..=3 => 2,
            _ => 1,
        };
        for k0 in (0..full).step_by(seg) {
            let len = seg.min(full - k0);
            let row = |r: usize| {
                let e = r * n_in + k0;
                (&codes[e / 2..][..len / 2], &scales[e / 16..][..len / 16])
            };
            let x = |j: usize| &xs[(t0 + j) * n_in + k0..][..len];
            let mut r = 0;
            while r < rows {
                if multirow && r + MULTIROW <= rows {
                    // One token: MULTIROW rows share every activation load.
                    let rs: [_; MULTIROW] = std::array::from_fn(|k| row(r + k));
                    let y = nvfp4_multirow(rs.map(|(c, _)| c), rs.map(|(_, s)| s), x(0));
                    add(&mut out[r..r + MULTIROW], y);
                    r += MULTIROW;
                    continue;
                }
                let (c, s) = row(r);
                let y = &mut out[r * tokens + t0..][..group];
                r += 1;
                match group {
                    8 => add(y, nvfp4_segment::<8>(c, s, [0, 1, 2, 3, 4, 5, 6, 7].map(x))),
                    4 => add(y, nvfp4_segment::<4>(c, s, [0, 1, 2, 3].map(x))),
                    2 => add(y, nvfp4_segment::<2>(c, s, [0, 1].map(x))),
                    _ => add(y, nvfp4_segment::<1>(c, s, [x(0)])),
                }
            }
        }
        t0 += group;
    }
    if full < n_in {
        let tail = &mut buf[..n_in - full];
        for (r, acc) in out.chunks_exact_mut(tokens).enumerate() {
            let e = r * n_in + full;
            portable::decode_nvfp4(&codes[e / 2..][..tail.len() / 2], &scales[e / 16..], tail);
            dot(tail, &xs[full..], n_in, acc);
        }
    }
}

/// `y[j] += v[j]`.
#[inline]
fn add<const G: usize>(y: &mut [f32], v: [f32; G]) {
    for (a, b) in y.iter_mut().zip(v) {
        *a += b;
    }
}

/// `R` rows' segments (whole 128-input chunks) against one token's activations: each
/// activation vector is loaded once for all `R` rows, which divides activation traffic
/// by `R` when the row does not fit L1 (e.g. 17408 inputs) and keeps `R` weight
/// streams in flight. Nibbles are decoded just before their FMA to bound register use.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn nvfp4_multirow<const R: usize>(codes: [&[u8]; R], scales: [&[u8]; R], x: &[f32]) -> [f32; R] {
    let chunks = codes[0].len() / 64;
    // SAFETY: VALUES holds 16 floats.
    let lut = unsafe { _mm512_loadu_ps(e2m1::VALUES.as_ptr()) };
    let dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    let mut sums = [_mm512_setzero_ps(); R];
    let mut sc = [[0.0f32; 128]; R];
    for c0 in (0..chunks).step_by(16) {
        let nc = (chunks - c0).min(16);
        for (s, d) in scales.iter().zip(sc.iter_mut()) {
            decode_scales(&s[8 * c0..8 * (c0 + nc)], &mut d[..8 * nc]);
        }
        for c in c0..c0 + nc {
            for row in codes {
                prefetch(row, 64 * c);
            }
            // SAFETY: chunk c reads codes [64c, 64c + 64) of every row (64·chunks bytes
            // each), scales [8(c − c0), +8) of each `sc` row (8·nc <= 128), and floats
            // [128c, 128c + 128) of `x` (2·codes[0].len() >= 128·chunks floats).
            unsafe {
                let v: [__m512i; R] = std::array::from_fn(|r| {
                    _mm512_loadu_si512(codes[r].as_ptr().add(64 * c).cast())
                });
                let xp = x.as_ptr().add(128 * c);
                let mut p = [[_mm512_setzero_ps(); 2]; R];
                macro_rules! step {
                    ($j:literal) => {{
                        let xj = _mm512_loadu_ps(xp.add(16 * $j));
                        for r in 0..R {
                            let w =
                                _mm512_permutexvar_ps(_mm512_srli_epi32::<{ 4 * $j }>(v[r]), lut);
                            p[r][$j % 2] = _mm512_fmadd_ps(w, xj, p[r][$j % 2]);
                        }
                    }};
                }
                step!(0);
                step!(1);
                step!(2);
                step!(3);
                step!(4);
                step!(5);
                step!(6);
                step!(7);
                for r in 0..R {
                    let s8 = _mm256_loadu_ps(sc[r].as_ptr().add(8 * (c - c0)));
                    let s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(s8));
                    sums[r] = _mm512_fmadd_ps(_mm512_add_ps(p[r][0], p[r][1]), s, sums[r]);
                }
            }
        }
    }
    sums.map(|s| _mm512_reduce_add_ps(s))
}

/// One row segment (whole 128-input chunks) against `G` tokens' activations.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn nvfp4_segment<const G: usize>(codes: &[u8], scales: &[u8], x: [&[f32]; G]) -> [f32; G] {
    let chunks = codes.len() / 64;
    // SAFETY: VALUES holds 16 floats.
    let lut = unsafe { _mm512_loadu_ps(e2m1::VALUES.as_ptr()) };
    // Lane i of every vector belongs to block i/2 of its chunk.
    let dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    let mut sums = [[_mm512_setzero_ps(); 2]; G];
    let mut sc = [0.0f32; 128];
    for c0 in (0..chunks).step_by(16) {
        let nc = (chunks - c0).min(16);
        decode_scales(&scales[8 * c0..8 * (c0 + nc)], &mut sc[..8 * nc]);
        for c in c0..c0 + nc {
            prefetch(codes, 64 * c);
            // SAFETY: chunk c reads codes [64c, 64c + 64) (64·chunks <= codes.len()),
            // scales [8(c − c0), +8) of `sc` (8·nc <= 128), and floats [128c, 128c + 128)
            // of each `x[k]` (each holds 2·codes.len() >= 128·chunks floats).
            unsafe {
                let v = _mm512_loadu_si512(codes.as_ptr().add(64 * c).cast());
                let s8 = _mm256_loadu_ps(sc.as_ptr().add(8 * (c - c0)));
                let s = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(s8));
                let w = nibble_values(v, lut);
                for (k, xk) in x.iter().enumerate() {
                    let xp = xk.as_ptr().add(128 * c);
                    if G == 1 {
                        // Two chains halve the FMA latency on the single-token path.
                        let mut p = [_mm512_mul_ps(w[0], _mm512_loadu_ps(xp)); 2];
                        p[1] = _mm512_mul_ps(w[1], _mm512_loadu_ps(xp.add(16)));
                        for j in 2..8 {
                            let xj = _mm512_loadu_ps(xp.add(16 * j));
                            p[j % 2] = _mm512_fmadd_ps(w[j], xj, p[j % 2]);
                        }
                        sums[k][0] = _mm512_fmadd_ps(p[0], s, sums[k][0]);
                        sums[k][1] = _mm512_fmadd_ps(p[1], s, sums[k][1]);
                    } else {
                        let mut p = _mm512_mul_ps(w[0], _mm512_loadu_ps(xp));
                        for (j, wj) in w.iter().enumerate().skip(1) {
                            p = _mm512_fmadd_ps(*wj, _mm512_loadu_ps(xp.add(16 * j)), p);
                        }
                        sums[k][0] = _mm512_fmadd_ps(p, s, sums[k][0]);
                    }
                }
            }
        }
    }
    sums.map(|[a, b]| _mm512_reduce_add_ps(_mm512_add_ps(a, b)))
}

/// NVFP4 to offset doubled bytes in `EvenOdd(128)` order, and per-group scales.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn decode_w4(codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
    let chunks = wq.len() / 128;
    // SAFETY: OFFSET_DOUBLED holds 16 bytes.
    let lut = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(OFFSET_DOUBLED.as_ptr().cast()) });
    let low = _mm512_set1_epi8(0x0f);
    for c in 0..chunks {
        prefetch(codes, 64 * c);
        // SAFETY: chunk c reads codes [64c, 64c + 64) and writes wq [128c, 128c + 128),
        // both within 128·chunks <= wq.len() = 2·codes.len().
        unsafe {
            let v = _mm512_loadu_si512(codes.as_ptr().add(64 * c).cast());
            let lo = _mm512_and_si512(v, low);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), low);
            let d = wq.as_mut_ptr().add(128 * c);
            _mm512_storeu_si512(d.cast(), _mm512_shuffle_epi8(lut, lo));
            _mm512_storeu_si512(d.add(64).cast(), _mm512_shuffle_epi8(lut, hi));
        }
    }
    portable::decode_w4_codes(&codes[64 * chunks..], &mut wq[128 * chunks..]);

    // Scales: 16 blocks → 32 groups per step.
    let (lo_idx, hi_idx) = (
        _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
        _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8),
    );
    let blocks = wsc.len() / 2;
    let mut sc = [0.0f32; 16];
    let mut b = 0;
    while b + 16 <= blocks {
        decode_scales(&scales[b..b + 16], &mut sc);
        // SAFETY: groups [2b, 2b + 32) lie within wsc (2·blocks groups); sc holds 16.
        unsafe {
            let s = _mm512_loadu_ps(sc.as_ptr());
            let d = wsc.as_mut_ptr().add(2 * b);
            _mm512_storeu_ps(d, _mm512_permutexvar_ps(lo_idx, s));
            _mm512_storeu_ps(d.add(16), _mm512_permutexvar_ps(hi_idx, s));
        }
        b += 16;
    }
    portable::decode_w4_scales(&scales[b..blocks], &mut wsc[2 * b..]);
}

/// W4A4 dot products: `vpdpbusd` of offset weight bytes with doubled activation codes,
/// seeded with the offset correction, then one FMA per 16 groups.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn dot_a4(
    wq: &[u8],
    wsc: &[f32],
    qa: &[i8],
    sfa: &[f32],
    negcorr: &[i32],
    stride: usize,
    gstride: usize,
    acc: &mut [f32],
) {
    let n = wq.len();
    let chunks = n / 128;
    let full = 128 * chunks;
    for (t, a) in acc.iter_mut().enumerate() {
        let q = &qa[t * stride..][..n];
        let s = &sfa[t * gstride..][..n / 8];
        let nc = &negcorr[t * gstride..][..n / 8];
        let mut sums = [_mm512_setzero_ps(); 2];
        for c in 0..chunks {
            // SAFETY: chunk c reads bytes [128c, 128c + 128) of `wq` and `q` (n each) and
            // groups [16c, 16c + 16) of `wsc`, `s` and `nc` (n/8 each).
            unsafe {
                let (w, x) = (wq.as_ptr().add(128 * c), q.as_ptr().add(128 * c));
                let mut d = _mm512_loadu_si512(nc.as_ptr().add(16 * c).cast());
                d = _mm512_dpbusd_epi32(
                    d,
                    _mm512_loadu_si512(w.cast()),
                    _mm512_loadu_si512(x.cast()),
                );
                let (w1, x1) = (w.add(64).cast(), x.add(64).cast());
                d = _mm512_dpbusd_epi32(d, _mm512_loadu_si512(w1), _mm512_loadu_si512(x1));
                let g = 16 * c;
                let sc = _mm512_mul_ps(
                    _mm512_loadu_ps(wsc.as_ptr().add(g)),
                    _mm512_loadu_ps(s.as_ptr().add(g)),
                );
                sums[c % 2] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, sums[c % 2]);
            }
        }
        let tail =
            portable::dot_a4_groups(&wq[full..], &wsc[full / 8..], &q[full..], &s[full / 8..]);
        *a += _mm512_reduce_add_ps(_mm512_add_ps(sums[0], sums[1])) + tail;
    }
}
