//! AVX2 integer (W4A4 / W4A8) rows for decode steps: NVFP4 weights decoded in registers
//! and multiplied with 8-bit activations, without the decoded-segment buffer.
//!
//! Per 64 inputs the nibbles become offset doubled bytes (`2·E2M1 + 12`, one `vpshufb`
//! per 32), `vpmaddubsw` + `vpmaddwd` give each 8-element group's exact sum against a
//! token's activations, the offset correction is one integer add, and one FMA applies
//! the group scales (weight block scale × activation scale). One token takes four rows
//! per pass, which shares the activation loads and the end-of-row reductions.

use super::super::portable::OFFSET_DOUBLED;
use super::super::{A4Act, a4_rows_by_segments};
use super::Avx2;
use super::avx2::{
    any_nan16, decode_w4, dot_a4, e4m3_to_f16x8, hsum, nibble_lookup, per_group, prefetch,
};
use super::avx2_int_gemm::a4_gemm;
use core::arch::x86_64::*;

/// Integer rows (see [`crate::linear::fast::Isa::a4_rows`]). Up to 4 tokens the weight
/// bytes never leave registers ([`fused`]); with more, decoding blocks of rows once
/// and reusing them for every token costs less ([`a4_gemm`]). Rows whose block scales include an E4M3 NaN
/// take the segment path too, so the fused loop needs no per-block NaN test.
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
    if tokens > 4 {
        return a4_gemm(codes, scales, n_in, act, tokens, out);
    }
    let rows = out.len() / tokens;
    let (cb, sb) = (n_in / 2, n_in / 16);
    let mut r = 0;
    while r < rows {
        // Four rows at a time for one token, otherwise one.
        let quad = tokens == 1 && r + 4 <= rows;
        let n = if quad { 4 } else { 1 };
        let (c, s) = (&codes[r * cb..(r + n) * cb], &scales[r * sb..(r + n) * sb]);
        let y = &mut out[r * tokens..(r + n) * tokens];
        if has_nan(s) {
            a4_rows_by_segments(isa, c, s, n_in, act, tokens, y);
        } else if quad {
            y.copy_from_slice(&fused::<4, 1>(c, s, act, n_in).map(|[v]| v));
        } else {
            match tokens {
                1 => y.copy_from_slice(&fused::<1, 1>(c, s, act, n_in)[0]),
                2 => y.copy_from_slice(&fused::<1, 2>(c, s, act, n_in)[0]),
                3 => y.copy_from_slice(&fused::<1, 3>(c, s, act, n_in)[0]),
                _ => y.copy_from_slice(&fused::<1, 4>(c, s, act, n_in)[0]),
            }
        }
        r += n;
    }
}

/// Whether any byte of `scales` is an E4M3 NaN code.
#[target_feature(enable = "avx2,fma,f16c")]
fn has_nan(scales: &[u8]) -> bool {
    let mut chunks = scales.chunks_exact(16);
    // SAFETY: each chunk holds 16 bytes.
    let nan = chunks
        .by_ref()
        .any(|c| any_nan16(unsafe { _mm_loadu_si128(c.as_ptr().cast()) }));
    nan || chunks.remainder().iter().any(|&b| b & 0x7f == 0x7f)
}

/// `R` consecutive rows (`codes`, `scales` hold exactly those rows, with no NaN block
/// scale) for `G` tokens; the result is indexed `[row][token]`. Pairs of 64-input
/// chunks share one scale decode (8 blocks); a remainder of fewer than 128 inputs goes
/// through [`decode_w4`] and [`dot_a4`].
#[target_feature(enable = "avx2,fma,f16c")]
fn fused<const R: usize, const G: usize>(
    codes: &[u8],
    scales: &[u8],
    act: &A4Act,
    n_in: usize,
) -> [[f32; G]; R] {
    let groups = n_in / 8;
    let code: [&[u8]; R] = core::array::from_fn(|r| &codes[r * n_in / 2..][..n_in / 2]);
    let scale: [&[u8]; R] = core::array::from_fn(|r| &scales[r * n_in / 16..][..n_in / 16]);
    let qa: [&[i8]; G] = core::array::from_fn(|t| &act.qa[t * n_in..][..n_in]);
    let sfa: [&[f32]; G] = core::array::from_fn(|t| &act.sfa[t * groups..][..groups]);
    let nc: [&[i32]; G] = core::array::from_fn(|t| &act.negcorr[t * groups..][..groups]);
    let ones = _mm256_set1_epi16(1);
    let mut sums = [[_mm256_setzero_ps(); G]; R];
    let pairs = n_in / 128;
    for p in 0..pairs {
        let wsc: [[__m256; 2]; R] = core::array::from_fn(|r| {
            prefetch(code[r], 64 * p);
            // SAFETY: block scales [8p, 8p + 8) lie within the row's n_in/16.
            let v = unsafe { _mm_loadl_epi64(scale[r].as_ptr().add(8 * p).cast()) };
            per_group(_mm256_cvtph_ps(e4m3_to_f16x8(v)))
        });
        #[allow(clippy::needless_range_loop)] // `h` also picks the chunk.
        for h in 0..2 {
            let c = 2 * p + h;
            for (r, acc) in sums.iter_mut().enumerate() {
                // SAFETY: chunk c < n_in/64 reads codes [32c, 32c + 32) of the row
                // (n_in/2), activations [64c, 64c + 64) of each token's row (n_in) and
                // groups [8c, 8c + 8) of its scales and corrections (n_in/8 each).
                unsafe {
                    let [lo, hi] = nibble_lookup(&OFFSET_DOUBLED, code[r].as_ptr().add(32 * c));
                    for t in 0..G {
                        let x = qa[t].as_ptr().add(64 * c);
                        let p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(x.cast()));
                        let p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(x.add(32).cast()));
                        let d = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones);
                        let corr = _mm256_loadu_si256(nc[t].as_ptr().add(8 * c).cast());
                        let s = _mm256_loadu_ps(sfa[t].as_ptr().add(8 * c));
                        let d = _mm256_cvtepi32_ps(_mm256_add_epi32(d, corr));
                        acc[t] = _mm256_fmadd_ps(d, _mm256_mul_ps(wsc[r][h], s), acc[t]);
                    }
                }
            }
        }
    }
    let done = 128 * pairs;
    let rest = n_in - done;
    let mut out = [[0.0f32; G]; R];
    if R == 4 && G == 1 {
        let v = hsum4([sums[0][0], sums[1][0], sums[2][0], sums[3][0]]);
        (0..4).for_each(|r| out[r][0] = v[r]);
    } else {
        for (o, s) in out.iter_mut().zip(&sums) {
            for (o, &s) in o.iter_mut().zip(s) {
                *o = hsum(s);
            }
        }
    }
    if rest > 0 {
        let (mut wq, mut wsc) = ([0u8; 128], [0.0f32; 16]);
        let g = done / 8;
        for (r, o) in out.iter_mut().enumerate() {
            let (c, s) = (&code[r][done / 2..], &scale[r][done / 16..]);
            decode_w4(c, s, &mut wq[..rest], &mut wsc[..rest / 8]);
            for (t, o) in o.iter_mut().enumerate() {
                let mut tail = [0.0f32];
                let (q, sa, n) = (&qa[t][done..], &sfa[t][g..], &nc[t][g..]);
                dot_a4(&wq[..rest], &wsc[..rest / 8], q, sa, n, 0, 0, &mut tail);
                *o += tail[0];
            }
        }
    }
    out
}

/// The lane sums of four vectors.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum4(v: [__m256; 4]) -> [f32; 4] {
    let a = _mm256_hadd_ps(v[0], v[1]);
    let b = _mm256_hadd_ps(v[2], v[3]);
    // Lanes: [Σ0, Σ1, Σ2, Σ3] over the low halves, then over the high halves.
    let c = _mm256_hadd_ps(a, b);
    let s = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps::<1>(c));
    let mut out = [0.0f32; 4];
    // SAFETY: `out` holds 4 floats.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), s) };
    out
}
