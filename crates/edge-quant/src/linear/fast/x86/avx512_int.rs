//! AVX-512 integer (W4A4 / W4A8) rows for decode steps: one token's rows (or up to four
//! tokens', a batch of decode steps) with the NVFP4 weights decoded in registers,
//! without the decoded-segment buffer of [`a4_rows_by_segments`].
//!
//! Per 128 inputs the nibbles become offset doubled bytes (`2·E2M1 + 12`, one
//! `vpshufb` per 64) in the `EvenOdd(128)` order of the activations, two `vpdpbusd`
//! seeded with the offset correction give each 8-input group's exact sum in its own
//! lane, and one multiply, conversion and FMA apply both scales: the same arithmetic
//! as `decode_w4` followed by `dot_a4`, without storing and reloading the decoded
//! weights. At decode the weights stream from DRAM once per token, so this is the
//! kernel that has to keep up with the memory bus.

use super::super::{A4Act, a4_rows_by_segments};
use super::Avx512;
use super::avx2::{SPREAD_ROWS, spread_rows};
use super::avx512::{decode_scales, prefetch};
use crate::linear::fast::portable::OFFSET_DOUBLED;
use core::arch::x86_64::*;

/// Inputs per step: 16 block scales, two 128-input halves.
const STEP: usize = 256;

/// Integer rows (see [`crate::linear::fast::Isa::a4_rows`]): one token with rows of
/// whole 256-input steps in registers, anything else through the segment loop.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn a4_rows(
    isa: Avx512,
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    if !n_in.is_multiple_of(STEP) || tokens > MAX_TOKENS {
        return a4_rows_by_segments(isa, codes, scales, n_in, act, tokens, out);
    }
    if tokens > 1 {
        return a4_rows_tokens(codes, scales, n_in, act, tokens, out);
    }
    let (cb, sb) = (n_in / 2, n_in / 16);
    let (qa, sfa, negcorr) = (
        &act.qa[..n_in],
        &act.sfa[..n_in / 8],
        &act.negcorr[..n_in / 8],
    );
    // Rows in SPREAD_ROWS runs read in lockstep, as on AVX2: each run is a sequential
    // stream of codes and of scales (several keep more DRAM requests in flight than
    // one), and each activation load serves SPREAD_ROWS rows.
    let (passes, rest) = spread_rows(out.len());
    for pass in passes {
        let (mut c, mut s) = ([&codes[..0]; SPREAD_ROWS], [&scales[..0]; SPREAD_ROWS]);
        for ((c, s), &r) in c.iter_mut().zip(&mut s).zip(&pass) {
            (*c, *s) = (&codes[r * cb..][..cb], &scales[r * sb..][..sb]);
        }
        for (&r, y) in pass.iter().zip(rows_dot(c, s, qa, sfa, negcorr)) {
            out[r] = y;
        }
    }
    for r in rest {
        let (c, s) = (&codes[r * cb..][..cb], &scales[r * sb..][..sb]);
        [out[r]] = rows_dot([c], [s], qa, sfa, negcorr);
    }
}

/// Most tokens [`a4_rows_tokens`] takes (the W4A8 GEMM takes over from 5).
const MAX_TOKENS: usize = 4;

/// A few tokens (a batch of decode steps, a short verification): each pair of rows'
/// codes is decoded in registers once and meets every token there, so the weights
/// stream once for all of them. `out` is `[rows, tokens]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn a4_rows_tokens(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    let (cb, sb) = (n_in / 2, n_in / 16);
    let rows = out.len() / tokens;
    macro_rules! by_tokens {
        ($t:literal) => {{
            let mut r = 0;
            while r + 2 <= rows {
                let c = [&codes[r * cb..][..cb], &codes[(r + 1) * cb..][..cb]];
                let s = [&scales[r * sb..][..sb], &scales[(r + 1) * sb..][..sb]];
                let y = rows_dot_tokens::<2, $t>(c, s, act, n_in);
                out[r * $t..][..$t].copy_from_slice(&y[0]);
                out[(r + 1) * $t..][..$t].copy_from_slice(&y[1]);
                r += 2;
            }
            if r < rows {
                let c = [&codes[r * cb..][..cb]];
                let s = [&scales[r * sb..][..sb]];
                let y = rows_dot_tokens::<1, $t>(c, s, act, n_in);
                out[r * $t..][..$t].copy_from_slice(&y[0]);
            }
        }};
    }
    match tokens {
        2 => by_tokens!(2),
        3 => by_tokens!(3),
        _ => by_tokens!(4),
    }
}

/// `N` rows' dot products with each of `T` tokens (token `t`'s activations start at
/// `t · n_in`, its group scales and corrections at `t · n_in / 8`); the same
/// arithmetic as [`rows_dot`], one accumulator per row and token.
// The indices `h`, `r` and `t` drive pointer offsets into several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn rows_dot_tokens<const N: usize, const T: usize>(
    codes: [&[u8]; N],
    scales: [&[u8]; N],
    act: &A4Act,
    n_in: usize,
) -> [[f32; T]; N] {
    let steps = n_in / STEP;
    let groups = n_in / 8;
    assert!(codes.iter().all(|c| c.len() == STEP / 2 * steps));
    assert!(scales.iter().all(|s| s.len() == 16 * steps));
    assert!(act.qa.len() >= T * n_in && act.sfa.len() >= T * groups);
    assert!(act.negcorr.len() >= T * groups);
    // SAFETY: OFFSET_DOUBLED holds 16 bytes.
    let lut = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(OFFSET_DOUBLED.as_ptr().cast()) });
    let low = _mm512_set1_epi8(0x0f);
    let mut sums = [[_mm512_setzero_ps(); T]; N];
    for s in 0..steps {
        let mut wsc = [[_mm512_setzero_ps(); 2]; N];
        for (w, &sc) in wsc.iter_mut().zip(&scales) {
            *w = group_scales(&sc[16 * s..][..16]);
        }
        for h in 0..2 {
            let (c, g) = (2 * s + h, 32 * s + 16 * h);
            let mut lo = [_mm512_setzero_si512(); N];
            let mut hi = [_mm512_setzero_si512(); N];
            for r in 0..N {
                // SAFETY: half c reads codes [64c, 64c + 64) of the row (asserted).
                let v = unsafe { _mm512_loadu_si512(codes[r].as_ptr().add(64 * c).cast()) };
                lo[r] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, low));
                hi[r] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(v), low));
            }
            for t in 0..T {
                // SAFETY: token t's activations [t·n_in + 128c, + 128) and groups
                // [t·groups + g, + 16) lie inside the lengths asserted above.
                unsafe {
                    let x = act.qa.as_ptr().add(t * n_in + 128 * c);
                    let (x0, x1) = (
                        _mm512_loadu_si512(x.cast()),
                        _mm512_loadu_si512(x.add(64).cast()),
                    );
                    let nc = _mm512_loadu_si512(act.negcorr.as_ptr().add(t * groups + g).cast());
                    let sa = _mm512_loadu_ps(act.sfa.as_ptr().add(t * groups + g));
                    for r in 0..N {
                        let d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(nc, lo[r], x0), hi[r], x1);
                        let sc = _mm512_mul_ps(wsc[r][h], sa);
                        sums[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, sums[r][t]);
                    }
                }
            }
        }
    }
    let mut out = [[0.0f32; T]; N];
    for (o, row) in out.iter_mut().zip(&sums) {
        for (y, &v) in o.iter_mut().zip(row) {
            *y = _mm512_reduce_add_ps(v);
        }
    }
    out
}

/// One step's 16 block scales (E4M3 bytes) as the per-group scales of its two halves:
/// block `b` covers groups `2b` and `2b + 1`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn group_scales(scales: &[u8]) -> [__m512; 2] {
    let mut block_scales = [0.0f32; 16];
    decode_scales(scales, &mut block_scales);
    // SAFETY: `block_scales` holds 16 floats.
    let bs = unsafe { _mm512_loadu_ps(block_scales.as_ptr()) };
    [
        _mm512_permutexvar_ps(
            _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
            bs,
        ),
        _mm512_permutexvar_ps(
            _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8),
            bs,
        ),
    ]
}

/// `N` rows' dot products with one token (all slices cover the rows' `n_in` inputs, a
/// multiple of [`STEP`]).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn rows_dot<const N: usize>(
    codes: [&[u8]; N],
    scales: [&[u8]; N],
    qa: &[i8],
    sfa: &[f32],
    negcorr: &[i32],
) -> [f32; N] {
    let steps = qa.len() / STEP;
    assert!(codes.iter().all(|c| c.len() == STEP / 2 * steps));
    assert!(scales.iter().all(|s| s.len() == 16 * steps));
    assert!(sfa.len() == 32 * steps && negcorr.len() == 32 * steps);
    // SAFETY: OFFSET_DOUBLED holds 16 bytes.
    let lut = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(OFFSET_DOUBLED.as_ptr().cast()) });
    let low = _mm512_set1_epi8(0x0f);
    let mut sums = [[_mm512_setzero_ps(); 2]; N];
    for s in 0..steps {
        let mut wsc = [[_mm512_setzero_ps(); 2]; N];
        for (w, (&codes, &scales)) in wsc.iter_mut().zip(codes.iter().zip(&scales)) {
            prefetch(codes, 128 * s);
            *w = group_scales(&scales[16 * s..][..16]);
        }
        for h in 0..2 {
            let (c, g) = (2 * s + h, 32 * s + 16 * h);
            // SAFETY: half c reads codes [64c, 64c + 64) and activations [128c, 128c +
            // 128) (2·steps halves, asserted above), and groups [g, g + 16) of 32·steps.
            unsafe {
                let x = qa.as_ptr().add(128 * c);
                let (x0, x1) = (
                    _mm512_loadu_si512(x.cast()),
                    _mm512_loadu_si512(x.add(64).cast()),
                );
                let nc = _mm512_loadu_si512(negcorr.as_ptr().add(g).cast());
                let sa = _mm512_loadu_ps(sfa.as_ptr().add(g));
                for ((sum, wsc), codes) in sums.iter_mut().zip(&wsc).zip(codes) {
                    let v = _mm512_loadu_si512(codes.as_ptr().add(64 * c).cast());
                    let lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, low));
                    let hi =
                        _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(v), low));
                    let d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(nc, lo, x0), hi, x1);
                    let sc = _mm512_mul_ps(wsc[h], sa);
                    sum[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, sum[h]);
                }
            }
        }
    }
    sums.map(|[a, b]| _mm512_reduce_add_ps(_mm512_add_ps(a, b)))
}
