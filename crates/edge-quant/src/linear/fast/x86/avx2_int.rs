//! AVX2 integer (W4A4 / W4A8) rows for decode steps: NVFP4 weights decoded in registers
//! and multiplied with 8-bit activations, without the decoded-segment buffer.
//!
//! Per 64 inputs the nibbles become offset doubled bytes (`2·E2M1 + 12`, one `vpshufb`
//! per 32), and `vpmaddubsw` + `vpmaddwd` give each 8-element group's exact sum against
//! a token's activations. One to four tokens ([`rows_tokens`]; one token four rows per
//! pass) decode each row's codes once for every token, sum whole 16-input blocks in
//! integers and apply the offset correction and both scales in two FMAs, against the
//! tokens' activations packed once per pass ([`pack_tokens`]).

use super::super::portable::OFFSET_DOUBLED;
use super::super::{A4Act, a4_corrections, a4_rows_by_segments};
use super::Avx2;
use super::avx2::{SPREAD_ROWS, decode_w4, dot_a4, hsum, nibble_lookup, spread_rows};
use super::avx2_int_gemm::{a4_gemm, gemm_words};
use core::arch::x86_64::*;

/// Token counts from which [`a4_rows`] runs the prompt GEMM ([`a4_gemm`]).
pub(super) const GEMM_MIN_TOKENS: usize = 5;

/// Integer rows (see [`crate::linear::fast::Isa::a4_rows`]). Up to 4 tokens the weight
/// bytes never leave registers ([`one_token`], [`rows_tokens`]); with more, decoding blocks of
/// rows once and reusing them for every token costs less ([`a4_gemm`]). For up to 4
/// tokens, rows whose block scales include an E4M3 NaN or a negative scale take the
/// segment path ([`needs_exact_path`]), so the register kernels need no per-block NaN
/// test or sign fix; the GEMM decodes scales to f32, where
/// a NaN stays within its own row's tile.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn a4_rows(
    isa: Avx2,
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    if tokens >= GEMM_MIN_TOKENS {
        // The driver packs the activations once per pass (`Isa::pack_a4`); without that
        // layout (or for rows shorter than one 64-input chunk, which have nothing to
        // pack), the segment loop.
        if act.packed.len() != gemm_words(n_in, tokens) || act.packed.is_empty() {
            return a4_rows_by_segments(isa, codes, scales, n_in, act, tokens, out);
        }
        return a4_gemm(codes, scales, n_in, act, tokens, out);
    }
    if tokens == 1 {
        return one_token(isa, codes, scales, n_in, act, out);
    }
    // The driver packs every token once per pass (`Isa::pack_a4`); without that layout,
    // the segment loop.
    if act.packed.len() != tokens * one_token_words(n_in) {
        return a4_rows_by_segments(isa, codes, scales, n_in, act, tokens, out);
    }
    let (cb, sb) = (n_in / 2, n_in / 16);
    for (r, y) in out.chunks_exact_mut(tokens).enumerate() {
        let (c, s) = (&codes[r * cb..(r + 1) * cb], &scales[r * sb..(r + 1) * sb]);
        if needs_exact_path(s) {
            a4_rows_by_segments(isa, c, s, n_in, act, tokens, y);
            continue;
        }
        let packed = &act.packed;
        match tokens {
            2 => y.copy_from_slice(&rows_tokens::<1, 2>(c, s, 1, n_in, packed, act)[0]),
            3 => y.copy_from_slice(&rows_tokens::<1, 3>(c, s, 1, n_in, packed, act)[0]),
            _ => y.copy_from_slice(&rows_tokens::<1, 4>(c, s, 1, n_in, packed, act)[0]),
        }
    }
}

/// One token (a decode step): rows through [`rows_tokens`], which share the
/// token's packed activations ([`pack_tokens`]), [`SPREAD_ROWS`] per pass from the
/// four quarters of the task's rows ([`spread_rows`]).
#[target_feature(enable = "avx2,fma,f16c")]
fn one_token(isa: Avx2, codes: &[u8], scales: &[u8], n_in: usize, act: &A4Act, out: &mut [f32]) {
    // The driver packs the token once per pass (`Isa::pack_a4`); without that layout,
    // the segment loop.
    if act.packed.len() != one_token_words(n_in) {
        return a4_rows_by_segments(isa, codes, scales, n_in, act, 1, out);
    }
    let packed = &act.packed;
    let (cb, sb) = (n_in / 2, n_in / 16);
    let (passes, rest) = spread_rows(out.len());
    for pass in passes {
        if pass
            .iter()
            .any(|&r| needs_exact_path(&scales[r * sb..][..sb]))
        {
            for r in pass {
                let (c, s) = (&codes[r * cb..][..cb], &scales[r * sb..][..sb]);
                a4_rows_by_segments(isa, c, s, n_in, act, 1, &mut out[r..r + 1]);
            }
            continue;
        }
        let (c, s) = (&codes[pass[0] * cb..], &scales[pass[0] * sb..]);
        let stride = pass[1] - pass[0];
        let y = rows_tokens::<SPREAD_ROWS, 1>(c, s, stride, n_in, packed, act);
        for (r, [v]) in pass.into_iter().zip(y) {
            out[r] = v;
        }
    }
    for r in rest {
        let (c, s) = (&codes[r * cb..][..cb], &scales[r * sb..][..sb]);
        out[r] = if needs_exact_path(s) {
            let mut y = [0.0];
            a4_rows_by_segments(isa, c, s, n_in, act, 1, &mut y);
            y[0]
        } else {
            rows_tokens::<1, 1>(c, s, 1, n_in, packed, act)[0][0]
        };
    }
}

/// Vectors per packed 128-input pair of chunks: the two chunks' activation bytes
/// (two vectors each), the scaled corrections and the scales of the pair's 8 blocks.
const PAIR_VECTORS: usize = 6;
/// The same in 32-bit words (the packed buffer is [`A4Act::packed`]).
const PAIR_WORDS: usize = 8 * PAIR_VECTORS;

/// Words of one token's [`pack_tokens`] layout for `n_in` inputs.
fn one_token_words(n_in: usize) -> usize {
    n_in / 128 * PAIR_WORDS
}

/// Lane order of the pair's blocks after `vphaddd` of the two chunks' group sums,
/// `[c.b0, c.b1, c'.b0, c'.b1 | c.b2, c.b3, c'.b2, c'.b3]`, as indices of the pair's
/// 8 block scales in natural order.
const PAIR_BLOCK_ORDER: [i32; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// `vpshufb` indices that widen a pair's 8 block-scale bytes to 16-bit lanes in
/// [`PAIR_BLOCK_ORDER`] (−128 zeroes each high byte): one shuffle for the widening and
/// the reordering, where a widening and a lane permute took two operations.
const WIDEN_IN_PAIR_ORDER: [i8; 16] = {
    let mut idx = [i8::MIN; 16];
    let mut i = 0;
    while i < 8 {
        idx[2 * i] = PAIR_BLOCK_ORDER[i] as i8;
        i += 1;
    }
    idx
};

/// Each token's whole 128-input pairs packed for [`rows_tokens`] (token `t` at `t ·`
/// [`one_token_words`]): per pair, the activation bytes of both chunks, then per block
/// (in [`PAIR_BLOCK_ORDER`]) the correction scaled by the activation scale, `−12·Σq·s_a`,
/// then `s_a`. Every activation mode keeps one scale per 16-input block (both groups of
/// a block share it), so whole blocks can be summed in integers before scaling.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn pack_tokens(act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    let words = one_token_words(n_in);
    let mut packed = vec![0u32; tokens * words];
    for (i, v) in packed.chunks_exact_mut(PAIR_WORDS).enumerate() {
        let (t, p) = (i / (n_in / 128), i % (n_in / 128));
        // SAFETY: pair p < n_in/128 of token t < tokens reads activation bytes
        // [t·n_in + 128p, + 128) and groups [t·n_in/8 + 16p, + 16) of the corrections
        // and scales (tokens·n_in and tokens·n_in/8 of them).
        unsafe {
            let x = act.qa.as_ptr().add(t * n_in + 128 * p);
            for i in 0..4 {
                store(v, i, _mm256_loadu_si256(x.add(32 * i).cast()));
            }
            let g = t * n_in / 8 + 16 * p;
            let [corr, sa] =
                block_corrections(act.negcorr.as_ptr().add(g), act.sfa.as_ptr().add(g));
            store(v, 4, _mm256_castps_si256(corr));
            store(v, 5, _mm256_castps_si256(sa));
        }
    }
    packed
}

/// The 8 blocks of a 128-input pair of chunks in [`PAIR_BLOCK_ORDER`], from the 16
/// per-group values of its 8-input groups in natural order (`lo`: groups 0–7, `hi`:
/// 8–15), taking each block's first group: `[g0, g2, g8, g10 | g4, g6, g12, g14]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn block_lanes(lo: __m256, hi: __m256) -> __m256 {
    _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi)
}

/// A pair of chunks' scaled block corrections `−12·Σq·s_a` and block scales `s_a`, in
/// [`PAIR_BLOCK_ORDER`], from its 16 group corrections and group scales (both groups
/// of a block share the scale: every activation mode scales 16-input blocks).
///
/// # Safety
/// `negcorr` and `sfa` must each point to 16 readable values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn block_corrections(negcorr: *const i32, sfa: *const f32) -> [__m256; 2] {
    // SAFETY: the caller vouches for 16 values behind each pointer.
    unsafe {
        // `hadd` sums each block's two groups, in the same lane order as `block_lanes`.
        let corr = _mm256_hadd_epi32(
            _mm256_loadu_si256(negcorr.cast()),
            _mm256_loadu_si256(negcorr.add(8).cast()),
        );
        let sa = block_lanes(_mm256_loadu_ps(sfa), _mm256_loadu_ps(sfa.add(8)));
        [_mm256_mul_ps(_mm256_cvtepi32_ps(corr), sa), sa]
    }
}

/// [`crate::linear::fast::Isa::layout_a4_codes`] for `EvenOdd(64)`: per 64 codes, two
/// in-lane byte shuffles split even from odd, two 64-bit unpacks and permutes put
/// them in order, and `vpsadbw` on the sign-flipped bytes sums each 8-byte group
/// (`Σ(q + 128)`, less 1024). A partial last chunk and group take the portable path.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn layout_codes(nat: &[i8], qa: &mut [i8], negcorr: &mut [i32]) {
    let chunks = nat.len() / 64;
    // Per 128-bit lane: its even bytes, then its odd bytes.
    let split = _mm256_setr_epi8(
        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5,
        7, 9, 11, 13, 15,
    );
    let flip = _mm256_set1_epi8(i8::MIN);
    let (bias, factor) = (_mm256_set1_epi32(8 * 128), _mm256_set1_epi32(-12));
    for c in 0..chunks {
        // SAFETY: chunk c < nat.len()/64 reads bytes [64c, 64c + 64) of `nat` and
        // writes those of `qa` (same length) and groups [8c, 8c + 8) of `negcorr`
        // (nat.len()/8).
        unsafe {
            let src = nat.as_ptr().add(64 * c);
            let (v0, v1) = (
                _mm256_loadu_si256(src.cast()),
                _mm256_loadu_si256(src.add(32).cast()),
            );
            let (s0, s1) = (
                _mm256_shuffle_epi8(v0, split),
                _mm256_shuffle_epi8(v1, split),
            );
            // Quadwords [e0, e16 | e32, e48]-style halves back into input order.
            let even = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_unpacklo_epi64(s0, s1));
            let odd = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_unpackhi_epi64(s0, s1));
            let dst = qa.as_mut_ptr().add(64 * c);
            _mm256_storeu_si256(dst.cast(), even);
            _mm256_storeu_si256(dst.add(32).cast(), odd);
            let zero = _mm256_setzero_si256();
            let (a0, a1) = (
                _mm256_sad_epu8(_mm256_xor_si256(v0, flip), zero),
                _mm256_sad_epu8(_mm256_xor_si256(v1, flip), zero),
            );
            // Group sums [g0, g1, g4, g5 | g2, g3, g6, g7], then in order.
            let sums = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(
                _mm256_castsi256_ps(a0),
                _mm256_castsi256_ps(a1),
            ));
            let sums = _mm256_permute4x64_epi64::<0b11_01_10_00>(sums);
            let corr = _mm256_mullo_epi32(_mm256_sub_epi32(sums, bias), factor);
            _mm256_storeu_si256(negcorr.as_mut_ptr().add(8 * c).cast(), corr);
        }
    }
    let done = 64 * chunks;
    qa[done..].copy_from_slice(&nat[done..]);
    a4_corrections(&nat[done..], &mut negcorr[done / 8..]);
}

/// Vector `i` of a packed buffer.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn load(v: &[u32], i: usize) -> __m256i {
    let w = &v[8 * i..8 * i + 8];
    // SAFETY: `w` holds 8 words, 32 bytes.
    unsafe { _mm256_loadu_si256(w.as_ptr().cast()) }
}

/// Stores vector `i` of a packed buffer.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn store(v: &mut [u32], i: usize, x: __m256i) {
    let w = &mut v[8 * i..8 * i + 8];
    // SAFETY: `w` holds 8 words, 32 bytes.
    unsafe { _mm256_storeu_si256(w.as_mut_ptr().cast(), x) }
}

/// Bytes ahead in each row's stream (which continues into the next row) that
/// [`rows_tokens`] prefetches into L1. On Zen 3 from DRAM, 512 B to 4 KiB measured
/// alike (within the VM's noise), and no prefetch 15–30% slower.
const ONE_TOKEN_PREFETCH: usize = 1024;

/// `R` rows (no NaN or negative block scale) for `T` tokens: row `k` is row `k · stride`
/// of `codes` / `scales`, token `t`'s packed pairs start at `t ·` [`one_token_words`].
/// Per 128 inputs and row: two nibble lookups and the decode of the 8 block scales (one
/// shuffle that widens them in the block order, one shift, one conversion); per token:
/// four `vpmaddubsw`, two `vpmaddwd`, one `vphaddd` to whole-block sums, one conversion
/// and two FMAs (`(D·s_a + c)·s_w`), where one lane per 8-input group took two integer
/// adds, two conversions, two multiplies and two FMAs.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_tokens<const R: usize, const T: usize>(
    codes: &[u8],
    scales: &[u8],
    stride: usize,
    n_in: usize,
    packed: &[u32],
    act: &A4Act,
) -> [[f32; T]; R] {
    // Row k's codes start at k·stride·n_in/2, its block scales at k·stride·n_in/16
    // (checked once here instead of slicing per row: that was 2% of a decode step for
    // 1024-input rows).
    let (code_row, scale_row) = (stride * n_in / 2, stride * n_in / 16);
    let last = R - 1;
    assert!(
        codes.len() >= last * code_row + n_in / 2 && scales.len() >= last * scale_row + n_in / 16
    );
    let words = one_token_words(n_in);
    assert!(packed.len() >= T * words);
    let ones = _mm256_set1_epi16(1);
    // SAFETY: WIDEN_IN_PAIR_ORDER holds 16 bytes.
    let widen = unsafe { _mm_loadu_si128(WIDEN_IN_PAIR_ORDER.as_ptr().cast()) };
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    for p in 0..n_in / 128 {
        for (r, acc) in acc.iter_mut().enumerate() {
            let c = codes.as_ptr().wrapping_add(r * code_row + 64 * p);
            _mm_prefetch::<_MM_HINT_T0>(c.wrapping_add(ONE_TOKEN_PREFETCH).cast());
            // SAFETY: pair p < n_in/128 reads codes [64p, 64p + 64) (of n_in/2) and
            // block scales [8p, 8p + 8) (of n_in/16) of row r < R, which start at
            // r·code_row and r·scale_row, within the lengths asserted above.
            let (ws, [lo0, hi0], [lo1, hi1]) = unsafe {
                let sv = _mm_loadl_epi64(scales.as_ptr().add(r * scale_row + 8 * p).cast());
                // E4M3 bits shifted into f16 (no sign, no NaN: see needs_exact_path).
                let ws = _mm256_cvtph_ps(_mm_slli_epi16::<7>(_mm_shuffle_epi8(sv, widen)));
                (
                    ws,
                    nibble_lookup(&OFFSET_DOUBLED, c),
                    nibble_lookup(&OFFSET_DOUBLED, c.add(32)),
                )
            };
            for (t, acc) in acc.iter_mut().enumerate() {
                // SAFETY: pair p < n_in/128 of token t < T: words [t·words + p·PAIR_WORDS,
                // + PAIR_WORDS) of the T·words asserted above (no bounds check per row,
                // pair and token in the innermost loop).
                let v: &[u32; PAIR_WORDS] =
                    unsafe { &*packed.as_ptr().add(t * words + p * PAIR_WORDS).cast() };
                let d = _mm256_hadd_epi32(
                    group_sums(lo0, hi0, load(v, 0), load(v, 1), ones),
                    group_sums(lo1, hi1, load(v, 2), load(v, 3), ones),
                );
                let d = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(d),
                    _mm256_castsi256_ps(load(v, 5)),
                    _mm256_castsi256_ps(load(v, 4)),
                );
                *acc = _mm256_fmadd_ps(d, ws, *acc);
            }
        }
    }
    let mut out = [[0.0f32; T]; R];
    for (o, a) in out.iter_mut().zip(&acc) {
        for (o, &a) in o.iter_mut().zip(a) {
            *o = hsum(a);
        }
    }
    let done = 128 * (n_in / 128);
    if done < n_in {
        for (r, o) in out.iter_mut().enumerate() {
            for (t, o) in o.iter_mut().enumerate() {
                *o += tail(
                    &codes[r * code_row + done / 2..][..(n_in - done) / 2],
                    &scales[r * scale_row + done / 16..][..(n_in - done) / 16],
                    act,
                    n_in,
                    done,
                    t,
                );
            }
        }
    }
    out
}

/// The eight 8-input group sums of one 64-input chunk: weight bytes `lo`/`hi` (even
/// and odd inputs) against activation bytes `x0`/`x1`. A function, not a closure:
/// closures do not inherit `#[target_feature]`, and an out-of-line closure cost 2% of
/// a decode step.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn group_sums(lo: __m256i, hi: __m256i, x0: __m256i, x1: __m256i, ones: __m256i) -> __m256i {
    let p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1));
    _mm256_madd_epi16(p, ones)
}

/// The products of one row's inputs from `done` on (fewer than 128) with token `t`,
/// through [`decode_w4`] and [`dot_a4`].
#[target_feature(enable = "avx2,fma,f16c")]
fn tail(codes: &[u8], scales: &[u8], act: &A4Act, n_in: usize, done: usize, t: usize) -> f32 {
    let rest = n_in - done;
    let (mut wq, mut wsc) = ([0u8; 128], [0.0f32; 16]);
    decode_w4(codes, scales, &mut wq[..rest], &mut wsc[..rest / 8]);
    let (g, groups) = (done / 8, n_in / 8);
    let mut sum = [0.0f32];
    dot_a4(
        &wq[..rest],
        &wsc[..rest / 8],
        &act.qa[t * n_in + done..][..rest],
        &act.sfa[t * groups + g..][..rest / 8],
        &act.negcorr[t * groups + g..][..rest / 8],
        0,
        0,
        &mut sum,
    );
    sum[0]
}

/// Whether a row's block scales need the exact segment path: any E4M3 NaN code, or
/// any negative scale (which [`nonneg_e4m3_to_f16x8`] leaves out; ModelOpt writes
/// none, so real rows keep the register kernels).
#[target_feature(enable = "avx2,fma,f16c")]
fn needs_exact_path(scales: &[u8]) -> bool {
    let mut chunks = scales.chunks_exact(16);
    let nan = _mm_set1_epi8(0x7f);
    let odd = chunks.by_ref().any(|c| {
        // SAFETY: each chunk holds 16 bytes.
        let v = unsafe { _mm_loadu_si128(c.as_ptr().cast()) };
        // The sign bits (negative scales and the 0xff NaN) or a 0x7f NaN.
        _mm_movemask_epi8(_mm_or_si128(v, _mm_cmpeq_epi8(v, nan))) != 0
    });
    odd || chunks
        .remainder()
        .iter()
        .any(|&b| b & 0x80 != 0 || b == 0x7f)
}
