//! AVX2 + FMA + F16C kernels. See [`crate::linear::fast::Isa`] for each function's
//! contract; these are its 8-lane implementations.
//!
//! - NVFP4 (W4A16) in `EvenOdd(64)` order: 32 code bytes split into low and high
//!   nibbles, a `vpshufb` table gives twice the E2M1 value as i8, sign-extended and
//!   converted to f32, times half the block scale. Each 8-lane vector lies in one block.
//! - FP8 and E4M3 block scales: the f16 bit trick of the AVX-512 kernels, widened with
//!   `vcvtph2ps` (F16C); NaN codes take a table path.
//! - W4A4: `vpmaddubsw` (u8 × i8 pairs, at most 576, no saturation) then `vpmaddwd`
//!   with ones gives one exact 32-bit sum per 8-element group.

use super::super::portable::{self, OFFSET_DOUBLED};
use super::super::segments;
use crate::formats::e2m1;
use core::arch::x86_64::*;

/// How far ahead of the bytes being decoded weights are prefetched (as for AVX-512).
const PREFETCH_BYTES: usize = 4096;

/// Prefetches `data[at + PREFETCH_BYTES]` into L2 (an L2 prefetch holds no L1 fill
/// buffer while it waits for DRAM, so more lines can be in flight).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn prefetch(data: &[u8], at: usize) {
    // `wrapping_add` keeps the address computation defined past the end of the slice,
    // and a prefetch is only a hint: it never faults and changes no memory.
    let p = data.as_ptr().wrapping_add(at + PREFETCH_BYTES);
    _mm_prefetch::<_MM_HINT_T1>(p.cast());
}

/// `dst[k·dst_stride + r] = src[r·src_stride + k]` for an 8 × 8 block, in registers:
/// interleave row pairs, then pairs of pairs, then swap 128-bit halves (the stack block
/// of the portable version, compiled for SSE2, was 4–6% of a W4A8 prompt).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn transpose8x8(src: &[f32], src_stride: usize, dst: &mut [f32], dst_stride: usize) {
    assert!(src.len() >= 7 * src_stride + 8 && dst.len() >= 7 * dst_stride + 8);
    // SAFETY: rows r < 8 read src[r·src_stride..][..8] and write dst[k·dst_stride..][..8],
    // within the lengths asserted above.
    unsafe {
        let row = |r: usize| _mm256_loadu_ps(src.as_ptr().add(r * src_stride));
        // Pairs of rows interleaved: [a0 b0 a1 b1 | a4 b4 a5 b5] and the high halves.
        let t: [__m256; 8] = core::array::from_fn(|i| {
            let (a, b) = (row(i / 2 * 2), row(i / 2 * 2 + 1));
            if i % 2 == 0 {
                _mm256_unpacklo_ps(a, b)
            } else {
                _mm256_unpackhi_ps(a, b)
            }
        });
        // Four rows of columns (c, c + 4): s[0..4] from rows 0–3, s[4..8] from rows 4–7.
        let s = [
            _mm256_shuffle_ps::<0x44>(t[0], t[2]),
            _mm256_shuffle_ps::<0xee>(t[0], t[2]),
            _mm256_shuffle_ps::<0x44>(t[1], t[3]),
            _mm256_shuffle_ps::<0xee>(t[1], t[3]),
            _mm256_shuffle_ps::<0x44>(t[4], t[6]),
            _mm256_shuffle_ps::<0xee>(t[4], t[6]),
            _mm256_shuffle_ps::<0x44>(t[5], t[7]),
            _mm256_shuffle_ps::<0xee>(t[5], t[7]),
        ];
        for c in 0..4 {
            let low = _mm256_permute2f128_ps::<0x20>(s[c], s[c + 4]);
            let high = _mm256_permute2f128_ps::<0x31>(s[c], s[c + 4]);
            _mm256_storeu_ps(dst.as_mut_ptr().add(c * dst_stride), low);
            _mm256_storeu_ps(dst.as_mut_ptr().add((c + 4) * dst_stride), high);
        }
    }
}

/// Rows per pass of the one-token kernels ([`spread_rows`]).
pub(super) const SPREAD_ROWS: usize = 4;

/// The passes of a one-token kernel over `rows` rows: pass `i` takes rows
/// `[i, q + i, 2q + i, 3q + i]` (`q = rows / 4`), one from each quarter, and the rows
/// past `4q` follow one by one. Each quarter is then one long sequential stream, which
/// the hardware prefetchers follow; neighbouring rows read side by side are short runs
/// that cross a 4 KiB page every few rows. On Zen 3 one core streamed a 32768 × 1024
/// bf16 `lm_head` at 21–24 GB/s this way (its read-loop rate) against 11–13 GB/s for
/// neighbouring rows.
pub(super) fn spread_rows(
    rows: usize,
) -> (
    impl Iterator<Item = [usize; SPREAD_ROWS]>,
    core::ops::Range<usize>,
) {
    let quarter = rows / SPREAD_ROWS;
    let passes = (0..quarter).map(move |i| core::array::from_fn(|k| k * quarter + i));
    (passes, SPREAD_ROWS * quarter..rows)
}

/// Sum of the 8 lanes (in registers: a store and an iterator sum was an out-of-line
/// call per output row, 2.7% of a W4A8 decode step).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
}

/// `acc[t] += Σ_i w[i] · xs[t·stride + i]`: four tokens at a time share each weight
/// load; the remaining tokens take one-token dots (not four copies of one).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot(w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
    let n = w.len();
    let tokens = acc.len();
    let mut t = 0;
    while t + 4 <= tokens {
        let x = [0, 1, 2, 3].map(|j| &xs[(t + j) * stride..][..n]);
        for (a, s) in acc[t..t + 4].iter_mut().zip(dot_many::<4, 2>(w, x)) {
            *a += s;
        }
        t += 4;
    }
    for (j, a) in acc.iter_mut().enumerate().skip(t) {
        *a += dot_many::<1, 4>(w, [&xs[j * stride..][..n]])[0];
    }
}

/// `G` dot products of `w` with the rows `x` (each at least `w.len()` long) sharing
/// each weight load, with `U` independent 8-lane accumulators per product (`G·U` FMA
/// chains hide the FMA latency).
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_many<const G: usize, const U: usize>(w: &[f32], x: [&[f32]; G]) -> [f32; G] {
    let n = w.len();
    assert!(x.iter().all(|r| r.len() >= n));
    let (wp, xp) = (w.as_ptr(), x.map(|s| s.as_ptr()));
    let mut a = [[_mm256_setzero_ps(); U]; G];
    let mut i = 0;
    while i + 8 * U <= n {
        // SAFETY: i + 8U <= n and `w` and every `x[j]` hold at least n floats.
        unsafe {
            for u in 0..U {
                let wv = _mm256_loadu_ps(wp.add(i + 8 * u));
                for (aj, xj) in a.iter_mut().zip(xp) {
                    aj[u] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xj.add(i + 8 * u)), aj[u]);
                }
            }
        }
        i += 8 * U;
    }
    while i + 8 <= n {
        // SAFETY: as above, with i + 8 <= n.
        unsafe {
            let wv = _mm256_loadu_ps(wp.add(i));
            for (aj, xj) in a.iter_mut().zip(xp) {
                aj[0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xj.add(i)), aj[0]);
            }
        }
        i += 8;
    }
    core::array::from_fn(|j| {
        let tail: f32 = w[i..].iter().zip(&x[j][i..n]).map(|(p, q)| p * q).sum();
        let v = a[j]
            .iter()
            .fold(_mm256_setzero_ps(), |s, &v| _mm256_add_ps(s, v));
        hsum(v) + tail
    })
}

/// Two dot products sharing each activation load.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn dot2(w0: &[f32], w1: &[f32], x: &[f32]) -> [f32; 2] {
    dot_many::<2, 4>(&x[..w0.len()], [w0, w1])
}

/// Little-endian bf16 to f32.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_bf16(src: &[u8], dst: &mut [f32]) {
    let n = dst.len();
    let mut i = 0;
    while i + 8 <= n {
        if i % 32 == 0 {
            prefetch(src, 2 * i);
        }
        // SAFETY: `src` holds 2n bytes, so bytes [2i, 2i + 16) and floats [i, i + 8) are
        // in bounds.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(2 * i).cast());
            let f = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(v));
            _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_castsi256_ps(f));
        }
        i += 8;
    }
    portable::decode_bf16(&src[2 * i..], &mut dst[i..]);
}

/// The low 8 E4M3 bytes of `v` as f16 bit patterns of `e4m3(b) · 2⁻⁸` (no NaN codes).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn e4m3_to_f16x8(v: __m128i) -> __m128i {
    let x = _mm_slli_epi16::<7>(_mm_cvtepu8_epi16(v));
    // The sign landed on bit 14; adding that bit moves it to bit 15.
    _mm_add_epi16(x, _mm_and_si128(x, _mm_set1_epi16(0x4000)))
}

/// Whether any of the 16 bytes of `v` is an E4M3 NaN.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn any_nan16(v: __m128i) -> bool {
    let m = _mm_set1_epi8(0x7f);
    _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(v, m), m)) != 0
}

/// E4M3 bytes to `e4m3(b) · 2⁻⁸`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_fp8(src: &[u8], dst: &mut [f32]) {
    let n = dst.len();
    let mut i = 0;
    while i + 16 <= n {
        if i % 64 == 0 {
            prefetch(src, i);
        }
        // SAFETY: `src` and `dst` hold n elements and i + 16 <= n.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(i).cast());
            if any_nan16(v) {
                portable::decode_fp8(&src[i..i + 16], &mut dst[i..i + 16]);
            } else {
                let d = dst.as_mut_ptr().add(i);
                _mm256_storeu_ps(d, _mm256_cvtph_ps(e4m3_to_f16x8(v)));
                let hi = _mm_srli_si128::<8>(v);
                _mm256_storeu_ps(d.add(8), _mm256_cvtph_ps(e4m3_to_f16x8(hi)));
            }
        }
        i += 16;
    }
    portable::decode_fp8(&src[i..], &mut dst[i..]);
}

/// `e2m1::DOUBLED` as bytes, the table [`nibble_lookup`] takes.
const DOUBLED_BYTES: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = e2m1::DOUBLED[i] as u8;
        i += 1;
    }
    t
};

/// `table` looked up (`vpshufb`) by the low nibbles, then by the high nibbles, of the 32
/// code bytes at `codes`: an `EvenOdd(64)` chunk's even inputs, then its odd ones.
///
/// # Safety
/// `codes` must be valid for reading 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn nibble_lookup(table: &[u8; 16], codes: *const u8) -> [__m256i; 2] {
    // SAFETY: `table` holds 16 bytes; the caller vouches for the 32 code bytes.
    let (lut, v) = unsafe {
        (
            _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast())),
            _mm256_loadu_si256(codes.cast()),
        )
    };
    let low = _mm256_set1_epi8(0x0f);
    [
        _mm256_shuffle_epi8(lut, _mm256_and_si256(v, low)),
        _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16::<4>(v), low)),
    ]
}

/// The four 8-byte quarters of 32 signed bytes, each sign-extended and converted to
/// 8 f32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn widen_quarters(q: __m256i) -> [__m256; 4] {
    let (l, h) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
    [l, _mm_srli_si128::<8>(l), h, _mm_srli_si128::<8>(h)]
        .map(|p| _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p)))
}

/// NVFP4 to `E2M1 · e4m3(SF) · 2⁻⁸` in `EvenOdd(64)` order (natural-order tail).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_nvfp4(codes: &[u8], scales: &[u8], dst: &mut [f32]) {
    let chunks = dst.len() / 64;
    let mut sc = [0.0f32; 4];
    for c in 0..chunks {
        // Half of each block scale: the table holds doubled values.
        portable::decode_fp8(&scales[4 * c..4 * c + 4], &mut sc);
        let s = sc.map(|v| _mm256_set1_ps(0.5 * v));
        if c % 2 == 0 {
            prefetch(codes, 32 * c);
        }
        // SAFETY: chunk c reads codes [32c, 32c + 32) and writes dst [64c, 64c + 64),
        // within 32·chunks <= codes.len() and 64·chunks <= dst.len().
        unsafe {
            let [lo, hi] = nibble_lookup(&DOUBLED_BYTES, codes.as_ptr().add(32 * c));
            let d = dst.as_mut_ptr().add(64 * c);
            for (half, q) in [(0, lo), (32, hi)] {
                for (b, f) in widen_quarters(q).into_iter().enumerate() {
                    _mm256_storeu_ps(d.add(half + 8 * b), _mm256_mul_ps(f, s[b]));
                }
            }
        }
    }
    let (c0, s0, d0) = (32 * chunks, 4 * chunks, 64 * chunks);
    portable::decode_nvfp4(&codes[c0..], &scales[s0..], &mut dst[d0..]);
}

/// NVFP4 W4A16 for a tile of rows. Up to 4 tokens (decode steps, short verifies) the
/// weights never leave registers ([`nvfp4_fused`]); with more, decoding a segment once
/// into `buf` and reusing it for every token ([`dot`]) costs less.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nvfp4_rows(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    xs: &[f32],
    tokens: usize,
    out: &mut [f32],
    buf: &mut [f32],
) {
    for (r, acc) in out.chunks_exact_mut(tokens).enumerate() {
        acc.fill(0.0);
        for (k0, len) in segments(n_in) {
            let e = r * n_in + k0;
            let (c, s) = (&codes[e / 2..][..len / 2], &scales[e / 16..][..len / 16]);
            let x = &xs[k0..];
            match tokens {
                1 => add(acc, nvfp4_fused::<1>(c, s, x, n_in, buf)),
                2 => add(acc, nvfp4_fused::<2>(c, s, x, n_in, buf)),
                3 => add(acc, nvfp4_fused::<3>(c, s, x, n_in, buf)),
                4 => add(acc, nvfp4_fused::<4>(c, s, x, n_in, buf)),
                _ => {
                    let w = &mut buf[..len];
                    decode_nvfp4(c, s, w);
                    dot(w, x, n_in, acc);
                }
            }
        }
    }
}

fn add<const G: usize>(acc: &mut [f32], sums: [f32; G]) {
    acc.iter_mut().zip(sums).for_each(|(a, s)| *a += s);
}

/// `Σ_k ŵ_k · x[t·stride + k]` over one segment (`2·codes.len()` inputs in
/// `EvenOdd(64)` order) for `G` tokens, decoding in registers: per 16-weight block, two
/// vectors of doubled E2M1 values (`vpshufb`, sign-extended and converted) are
/// multiplied with the activations and the block's partial sums take its scale in one
/// FMA. `buf` is scratch for the segment's decoded block scales.
#[target_feature(enable = "avx2,fma,f16c")]
fn nvfp4_fused<const G: usize>(
    codes: &[u8],
    scales: &[u8],
    xs: &[f32],
    stride: usize,
    buf: &mut [f32],
) -> [f32; G] {
    let n = 2 * codes.len();
    let chunks = n / 64;
    let x: [&[f32]; G] = core::array::from_fn(|t| &xs[t * stride..][..n]);
    let sc = &mut buf[..n / 16];
    decode_fp8(scales, sc);
    let mut sums = [[_mm256_setzero_ps(); 2]; G];
    for c in 0..chunks {
        if c % 2 == 0 {
            prefetch(codes, 32 * c);
        }
        // SAFETY: chunk c reads codes [32c, 32c + 32) (32·chunks <= codes.len()), scales
        // [4c, 4c + 4) of `sc` (n/16 of them) and activations [64c, 64c + 64) of each
        // token's row (n each).
        unsafe {
            // Even inputs of the chunk (positions 0..32), then odd ones (32..64).
            let [even, odd] = nibble_lookup(&DOUBLED_BYTES, codes.as_ptr().add(32 * c));
            // Quarter b of each half holds the even and odd inputs of block b.
            let (ev, od) = (widen_quarters(even), widen_quarters(odd));
            for (b, (we, wo)) in ev.into_iter().zip(od).enumerate() {
                let s = _mm256_broadcast_ss(&sc[4 * c + b]);
                for (t, acc) in sums.iter_mut().enumerate() {
                    let xp = x[t].as_ptr().add(64 * c + 8 * b);
                    let p = _mm256_mul_ps(we, _mm256_loadu_ps(xp));
                    let p = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xp.add(32)), p);
                    acc[b % 2] = _mm256_fmadd_ps(p, s, acc[b % 2]);
                }
            }
        }
    }
    let full = 64 * chunks;
    let mut tail = [0.0f32; 64];
    let tail = &mut tail[..n - full];
    portable::decode_nvfp4(&codes[full / 2..], &scales[full / 16..], tail);
    core::array::from_fn(|t| {
        // The table holds doubled values: halve the vector sums.
        let t_tail: f32 = tail.iter().zip(&x[t][full..]).map(|(w, v)| w * v).sum();
        0.5 * hsum(_mm256_add_ps(sums[t][0], sums[t][1])) + t_tail
    })
}

/// NVFP4 to offset doubled bytes in `EvenOdd(64)` order, and per-group scales.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn decode_w4(codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
    let chunks = wq.len() / 64;
    for c in 0..chunks {
        if c % 2 == 0 {
            prefetch(codes, 32 * c);
        }
        // SAFETY: chunk c reads codes [32c, 32c + 32) and writes wq [64c, 64c + 64),
        // within 64·chunks <= wq.len() = 2·codes.len().
        unsafe {
            let [lo, hi] = nibble_lookup(&OFFSET_DOUBLED, codes.as_ptr().add(32 * c));
            let d = wq.as_mut_ptr().add(64 * c);
            _mm256_storeu_si256(d.cast(), lo);
            _mm256_storeu_si256(d.add(32).cast(), hi);
        }
    }
    portable::decode_w4_codes(&codes[32 * chunks..], &mut wq[64 * chunks..]);

    // Scales: 8 blocks → 16 groups per step.
    let blocks = wsc.len() / 2;
    let mut b = 0;
    while b + 8 <= blocks {
        let [lo, hi] = group_scales(&scales[b..b + 8]);
        // SAFETY: groups [2b, 2b + 16) lie within wsc (2·blocks groups).
        unsafe {
            let d = wsc.as_mut_ptr().add(2 * b);
            _mm256_storeu_ps(d, lo);
            _mm256_storeu_ps(d.add(8), hi);
        }
        b += 8;
    }
    portable::decode_w4_scales(&scales[b..blocks], &mut wsc[2 * b..]);
}

/// The first 8 E4M3 block scales of `scales` as `e4m3(SF) · 2⁻⁸` per 8-element group:
/// groups 0–7 (blocks 0–3, each twice), then groups 8–15.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn group_scales(scales: &[u8]) -> [__m256; 2] {
    let scales = &scales[..8];
    // SAFETY: `scales` holds 8 bytes; the upper half of `v` is zero (never a NaN code).
    let v = unsafe { _mm_loadl_epi64(scales.as_ptr().cast()) };
    let s = if any_nan16(v) {
        let mut sc = [0.0f32; 8];
        portable::decode_fp8(scales, &mut sc);
        // SAFETY: `sc` holds 8 floats.
        unsafe { _mm256_loadu_ps(sc.as_ptr()) }
    } else {
        _mm256_cvtph_ps(e4m3_to_f16x8(v))
    };
    per_group(s)
}

/// Eight block scales spread to their 16 groups: `[s0, s0, s1, s1, …]` twice.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn per_group(s: __m256) -> [__m256; 2] {
    [
        _mm256_permutevar8x32_ps(s, _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0)),
        _mm256_permutevar8x32_ps(s, _mm256_set_epi32(7, 7, 6, 6, 5, 5, 4, 4)),
    ]
}

/// W4A4 dot products with `vpmaddubsw`/`vpmaddwd`, then one FMA per 8 groups.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
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
    let chunks = n / 64;
    let full = 64 * chunks;
    let ones = _mm256_set1_epi16(1);
    for (t, a) in acc.iter_mut().enumerate() {
        let q = &qa[t * stride..][..n];
        let s = &sfa[t * gstride..][..n / 8];
        let nc = &negcorr[t * gstride..][..n / 8];
        let mut sums = [_mm256_setzero_ps(); 2];
        for c in 0..chunks {
            // SAFETY: chunk c reads bytes [64c, 64c + 64) of `wq` and `q` (n each) and
            // groups [8c, 8c + 8) of `wsc`, `s` and `nc` (n/8 each).
            unsafe {
                let (w, x) = (wq.as_ptr().add(64 * c), q.as_ptr().add(64 * c));
                let p0 = _mm256_maddubs_epi16(
                    _mm256_loadu_si256(w.cast()),
                    _mm256_loadu_si256(x.cast()),
                );
                let p1 = _mm256_maddubs_epi16(
                    _mm256_loadu_si256(w.add(32).cast()),
                    _mm256_loadu_si256(x.add(32).cast()),
                );
                let d = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones);
                let d = _mm256_add_epi32(d, _mm256_loadu_si256(nc.as_ptr().add(8 * c).cast()));
                let g = 8 * c;
                let sc = _mm256_mul_ps(
                    _mm256_loadu_ps(wsc.as_ptr().add(g)),
                    _mm256_loadu_ps(s.as_ptr().add(g)),
                );
                sums[c % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, sums[c % 2]);
            }
        }
        let tail =
            portable::dot_a4_groups(&wq[full..], &wsc[full / 8..], &q[full..], &s[full / 8..]);
        *a += hsum(_mm256_add_ps(sums[0], sums[1])) + tail;
    }
}
