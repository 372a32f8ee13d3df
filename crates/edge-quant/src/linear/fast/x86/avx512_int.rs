//! AVX-512 integer (W4A4 / W4A8) rows for decode steps: one token's rows, or up to four
//! tokens' (a batch of decode steps), with the NVFP4 weights decoded in registers,
//! without the decoded-segment buffer of [`a4_rows_by_segments`].
//!
//! Per 256-input step (one int8 activation chunk, sixteen 16-input weight blocks) and
//! row: two `vpermt2d` gather the code bytes so that 32-bit lane `l` of each vector
//! holds block `l` (its first, then its second 8 inputs), the nibbles become offset
//! doubled bytes (`2·E2M1 + 12`, one `vpshufb` per 64), and the block scales are
//! widened from E4M3 through f16 in one vector. Per token, four `vpdpbusd` seeded with
//! the offset correction leave each block's exact sum in its own lane, and one
//! conversion, multiply and FMA apply both scales: 7 operations per 256 inputs and
//! token, where one lane per 8-input group took 10 (and a pair of duplicated-scale
//! permutes per row). The token's activations are packed once per forward pass in the
//! lanes' order ([`pack_tokens`]). At decode the weights stream from DRAM once per pass
//! for every token, so this is the kernel that has to keep up with the memory bus.

use super::super::{A4Act, a4_rows_by_segments};
use super::Avx512;
use crate::linear::fast::portable::OFFSET_DOUBLED;
use core::arch::x86_64::*;

/// Inputs per step: 16 block scales, one int8 activation chunk.
const STEP: usize = 256;
/// Bytes ahead in each row's code stream (which continues into the next row) that
/// [`rows_dot`] prefetches into L1, as the AVX2 one-token kernel does: an L2 prefetch
/// 4 KiB ahead of every other line streamed a single core's rows from DRAM at 8.3
/// GiB/s against the AVX2 kernel's 11.5 (Xeon (SPR), 3584×1024).
const PREFETCH: usize = 1024;
/// Most tokens [`a4_rows`] takes in registers (the W4A8 GEMM takes over from 5).
pub(super) const MAX_TOKENS: usize = 4;
/// 32-bit words of one token's packed step: four 64-byte activation vectors, then the
/// 16 block corrections (`i32`) and the 16 block scales (`f32` bits).
const STEP_WORDS: usize = 6 * 16;
/// Input offsets, within a block, of the four bytes of a lane in each of a step's four
/// weight vectors (then `+2`, `+4`, `+6`): the low and high nibbles of the block's first
/// four code bytes, then of its last four.
const LANE_INPUTS: [usize; 4] = [0, 1, 8, 9];

/// Words of [`pack_tokens`]'s layout.
fn packed_words(n_in: usize, tokens: usize) -> usize {
    tokens * n_in / STEP * STEP_WORDS
}

/// Whether [`a4_rows`] runs its register kernels for this shape.
fn in_registers(n_in: usize, tokens: usize) -> bool {
    n_in.is_multiple_of(STEP) && n_in > 0 && (1..=MAX_TOKENS).contains(&tokens)
}

/// The activations of 1 to [`MAX_TOKENS`] tokens packed for [`rows_dot`] (empty where
/// the register kernels do not run): per token and step, byte `4l + e` of vector `k`
/// holds input `16l + LANE_INPUTS[k] + 2e`, then block `l`'s correction `−12·Σq` and
/// its activation scale (both groups of a block share it in every activation mode).
pub(super) fn pack_tokens(act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    if !in_registers(n_in, tokens) {
        return Vec::new();
    }
    let (steps, groups) = (n_in / STEP, n_in / 8);
    let mut packed = vec![0u32; packed_words(n_in, tokens)];
    for (i, words) in packed.chunks_exact_mut(STEP_WORDS).enumerate() {
        let (t, s) = (i / steps, i % steps);
        let nat = &act.natural[t * n_in + STEP * s..][..STEP];
        let (vectors, rest) = words.split_at_mut(64);
        for (w, word) in vectors.iter_mut().enumerate() {
            let (k, l) = (w / 16, w % 16);
            let at = 16 * l + LANE_INPUTS[k];
            let b = core::array::from_fn(|e| nat[at + 2 * e] as u8);
            *word = u32::from_le_bytes(b);
        }
        let g0 = t * groups + 32 * s;
        let (corr, scale) = rest.split_at_mut(16);
        for (l, (c, sa)) in corr.iter_mut().zip(scale).enumerate() {
            let g = g0 + 2 * l;
            *c = (act.negcorr[g] + act.negcorr[g + 1]) as u32;
            *sa = act.sfa[g].to_bits();
        }
    }
    packed
}

/// Integer rows (see [`crate::linear::fast::Isa::a4_rows`]): up to [`MAX_TOKENS`]
/// tokens over rows of whole steps in registers ([`rows_dot`]), anything else (and rows
/// with a negative or NaN block scale) through the segment loop.
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
    if !in_registers(n_in, tokens) || act.packed.len() != packed_words(n_in, tokens) {
        return a4_rows_by_segments(isa, codes, scales, n_in, act, tokens, out);
    }
    let rows = Rows {
        isa,
        codes,
        scales,
        n_in,
        act,
    };
    // One token: four rows per pass, one from each quarter of the task (each a long
    // sequential stream, four DRAM streams in flight). More: two rows per pass, so
    // that the accumulators of every row and token stay in registers.
    match tokens {
        1 => rows.run::<4, 1>(out),
        2 => rows.run::<2, 2>(out),
        3 => rows.run::<2, 3>(out),
        _ => rows.run::<2, 4>(out),
    }
}

/// A task's rows and the pass's activations.
struct Rows<'a> {
    isa: Avx512,
    codes: &'a [u8],
    scales: &'a [u8],
    n_in: usize,
    act: &'a A4Act,
}

impl Rows<'_> {
    /// All rows, `N` per pass taken one from each of `N` equal parts of the rows, the
    /// rows past `N` equal parts one by one; `out` is `[rows, T]`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    fn run<const N: usize, const T: usize>(&self, out: &mut [f32]) {
        let rows = out.len() / T;
        let part = rows / N;
        for i in 0..part {
            self.pass::<N, T>(core::array::from_fn(|k| k * part + i), out);
        }
        for r in N * part..rows {
            self.pass::<1, T>([r], out);
        }
    }

    /// Rows `rs` for all `T` tokens into `out` (`[rows, T]`).
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    fn pass<const N: usize, const T: usize>(&self, rs: [usize; N], out: &mut [f32]) {
        let (cb, sb) = (self.n_in / 2, self.n_in / 16);
        let c = rs.map(|r| &self.codes[r * cb..][..cb]);
        let s = rs.map(|r| &self.scales[r * sb..][..sb]);
        match rows_dot::<N, T>(c, s, &self.act.packed) {
            Some(y) => {
                for (&r, y) in rs.iter().zip(y) {
                    out[r * T..][..T].copy_from_slice(&y);
                }
            }
            None => {
                for (&r, (c, s)) in rs.iter().zip(c.iter().zip(s)) {
                    let y = &mut out[r * T..][..T];
                    a4_rows_by_segments(self.isa, c, s, self.n_in, self.act, T, y);
                }
            }
        }
    }
}

/// `N` rows' dot products with each of `T` tokens (`packed` from [`pack_tokens`]), or
/// `None` where a row has a negative or NaN block scale (which the f16 widening leaves
/// out; ModelOpt writes none, so real rows stay here).
// The indices `r` and `t` address the weights, scales and sums of a row and token at once.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn rows_dot<const N: usize, const T: usize>(
    codes: [&[u8]; N],
    scales: [&[u8]; N],
    packed: &[u32],
) -> Option<[[f32; T]; N]> {
    let steps = scales[0].len() / 16;
    assert!(codes.iter().all(|c| c.len() == STEP / 2 * steps));
    assert!(scales.iter().all(|s| s.len() == 16 * steps));
    assert!(packed.len() == T * steps * STEP_WORDS);
    // SAFETY: OFFSET_DOUBLED holds 16 bytes.
    let lut = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(OFFSET_DOUBLED.as_ptr().cast()) });
    let low = _mm512_set1_epi8(0x0f);
    // Dword 2l (first) and 2l + 1 (second half of block l) of the step's two vectors.
    let first = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    let second = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    let mut top = _mm_setzero_si128();
    let mut sums = [[_mm512_setzero_ps(); T]; N];
    for s in 0..steps {
        // Every row's weights and scales first, then each token's activations meet
        // them all (loaded once per step for the N rows).
        let mut w = [[_mm512_setzero_si512(); 4]; N];
        let mut ws = [_mm512_setzero_ps(); N];
        for r in 0..N {
            // Both cache lines of the step PREFETCH bytes ahead, into L1.
            let ahead = codes[r].as_ptr().wrapping_add(128 * s + PREFETCH);
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64).cast());
            // SAFETY: step s reads codes [128s, 128s + 128) and block scales [16s,
            // 16s + 16) of the row (lengths asserted above).
            unsafe {
                let c = codes[r].as_ptr().add(128 * s);
                let (v0, v1) = (
                    _mm512_loadu_si512(c.cast()),
                    _mm512_loadu_si512(c.add(64).cast()),
                );
                let (a, b) = (
                    _mm512_permutex2var_epi32(v0, first, v1),
                    _mm512_permutex2var_epi32(v0, second, v1),
                );
                w[r] = [
                    _mm512_shuffle_epi8(lut, _mm512_and_si512(a, low)),
                    _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(a), low)),
                    _mm512_shuffle_epi8(lut, _mm512_and_si512(b, low)),
                    _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16::<4>(b), low)),
                ];
                let sv = _mm_loadu_si128(scales[r].as_ptr().add(16 * s).cast());
                top = _mm_max_epu8(top, sv);
                // E4M3 bits shifted into f16: e4m3 · 2⁻⁸ (no sign, no NaN: checked below).
                ws[r] = _mm512_cvtph_ps(_mm256_slli_epi16::<7>(_mm256_cvtepu8_epi16(sv)));
            }
        }
        for t in 0..T {
            // SAFETY: token t's packed words [(t·steps + s)·96, + 96) lie within the
            // length asserted above.
            let (x, corr, sa) = unsafe {
                let p = packed.as_ptr().add((t * steps + s) * STEP_WORDS);
                let x: [__m512i; 4] =
                    core::array::from_fn(|k| _mm512_loadu_si512(p.add(16 * k).cast()));
                let corr = _mm512_loadu_si512(p.add(64).cast());
                (x, corr, _mm512_loadu_ps(p.add(80).cast()))
            };
            for r in 0..N {
                let mut d = corr;
                for k in 0..4 {
                    d = _mm512_dpbusd_epi32(d, w[r][k], x[k]);
                }
                let sc = _mm512_mul_ps(ws[r], sa);
                sums[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, sums[r][t]);
            }
        }
    }
    // A scale byte of 0x7f or above is a NaN or negative.
    let odd = _mm_or_si128(top, _mm_cmpeq_epi8(top, _mm_set1_epi8(0x7f)));
    if _mm_movemask_epi8(odd) != 0 {
        return None;
    }
    let mut out = [[0.0f32; T]; N];
    for (o, row) in out.iter_mut().zip(&sums) {
        for (y, &v) in o.iter_mut().zip(row) {
            *y = _mm512_reduce_add_ps(v);
        }
    }
    Some(out)
}
