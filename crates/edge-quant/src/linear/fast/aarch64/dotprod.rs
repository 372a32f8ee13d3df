//! `NeonDotprod` integer (W4A4 / W4A8) rows with `sdot`, for decode steps of one to
//! four tokens, and the `sdot` form of the segment kernel for more.
//!
//! Per 32 inputs a row's 16 code bytes become its even and odd doubled weights in two
//! table lookups ([`int::nibbles`]), and for each token two `sdot`s against the
//! token's [`int::A4_PERM`]-ordered codes give the exact integer sum of each of the
//! chunk's four 8-input groups in its own lane; one conversion, one multiply (weight
//! times activation group scale) and one FMA apply the scales per group, as the
//! portable kernel does, so the only difference from it is the order of the f32
//! additions. The weights are decoded in registers and never stored: at decode they
//! stream from DRAM once per step, and this is the kernel that has to keep up with the
//! memory bus.
//!
//! Rows are taken four at a time for one token (each activation load serves four
//! rows, and four code streams keep more loads in flight) and two at a time for two to
//! four tokens (2 × 4 accumulators; each decoded weight vector meets every token).
//! More tokens go through the segment loop with an `sdot` [`dot_a4`]: a segment is
//! decoded once and dotted with every token.

use super::super::{A4Act, Isa, Perm, a4_rows_by_segments, portable};
use super::int::{self, CHUNK, chunk_scales, doubled_table, nibbles, sdot, tail_dot};
use core::arch::aarch64::*;
use edge_core::simd::Dotprod;

/// Most tokens the register kernels take.
pub(super) const MAX_TOKENS: usize = 4;

impl Isa for Dotprod {
    const NVFP4_PERM: Perm = Perm::Natural;
    const A4_PERM: Perm = int::A4_PERM;

    super::neon_methods!();

    fn decode_w4(self, codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
        int::decode_w4(codes, scales, wq, wsc);
    }

    fn layout_a4_codes(self, nat: &[i8], qa: &mut [i8], negcorr: &mut [i32]) {
        int::layout_codes(nat, qa, negcorr);
    }

    fn a4_rows(
        self,
        codes: &[u8],
        scales: &[u8],
        n_in: usize,
        act: &A4Act,
        tokens: usize,
        out: &mut [f32],
    ) {
        if tokens > MAX_TOKENS {
            return a4_rows_by_segments(self, codes, scales, n_in, act, tokens, out);
        }
        a4_rows_few(self, codes, scales, n_in, act, tokens, out);
    }

    fn dot_a4(
        self,
        wq: &[u8],
        wsc: &[f32],
        qa: &[i8],
        sfa: &[f32],
        negcorr: &[i32],
        stride: usize,
        gstride: usize,
        acc: &mut [f32],
    ) {
        // SAFETY: the token proves dotprod.
        unsafe { dot_a4(wq, wsc, qa, sfa, negcorr, stride, gstride, acc) }
    }
}

/// [`Isa::a4_rows`] for one to [`MAX_TOKENS`] tokens with the weights decoded in
/// registers (`out` is `[rows, tokens]`); the token proves dotprod (the i8mm level's
/// one-token rows come here too).
pub(super) fn a4_rows_few(
    _: Dotprod,
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    debug_assert!((1..=MAX_TOKENS).contains(&tokens));
    // SAFETY: the token proves dotprod.
    unsafe { rows_tokens(codes, scales, n_in, act, tokens, out) }
}

#[target_feature(enable = "neon,dotprod")]
fn rows_tokens(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    let (cb, sb) = (n_in / 2, n_in / 16);
    let rows = out.len() / tokens;
    macro_rules! by_rows {
        ($n:literal, $t:literal) => {{
            let mut r = 0;
            while r + $n <= rows {
                let c: [&[u8]; $n] = core::array::from_fn(|i| &codes[(r + i) * cb..][..cb]);
                let s: [&[u8]; $n] = core::array::from_fn(|i| &scales[(r + i) * sb..][..sb]);
                let y = rows_dot::<$n, $t>(c, s, act, n_in);
                for (i, y) in y.iter().enumerate() {
                    out[(r + i) * $t..][..$t].copy_from_slice(y);
                }
                r += $n;
            }
            while r < rows {
                let c = [&codes[r * cb..][..cb]];
                let s = [&scales[r * sb..][..sb]];
                let [y] = rows_dot::<1, $t>(c, s, act, n_in);
                out[r * $t..][..$t].copy_from_slice(&y);
                r += 1;
            }
        }};
    }
    match tokens {
        1 => by_rows!(4, 1),
        2 => by_rows!(2, 2),
        3 => by_rows!(2, 3),
        _ => by_rows!(2, 4),
    }
}

/// `N` rows' sums with each of `T` tokens (token `t`'s codes start at `t · n_in` of
/// `act.qa`, its group scales at `t · n_in / 8` of `act.sfa`): whole chunks in
/// registers, then the natural-order tail.
// The indices `r` and `t` address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn rows_dot<const N: usize, const T: usize>(
    codes: [&[u8]; N],
    scales: [&[u8]; N],
    act: &A4Act,
    n_in: usize,
) -> [[f32; T]; N] {
    let (chunks, groups) = (n_in / CHUNK, n_in / 8);
    assert!(codes.iter().all(|c| c.len() == n_in / 2));
    assert!(scales.iter().all(|s| s.len() == n_in / 16));
    assert!(act.qa.len() >= T * n_in && act.sfa.len() >= T * groups);
    let table = doubled_table();
    let mut acc = [[vdupq_n_f32(0.0); T]; N];
    for c in 0..chunks {
        let mut lo = [vdupq_n_s8(0); N];
        let mut hi = [vdupq_n_s8(0); N];
        let mut wsc = [vdupq_n_f32(0.0); N];
        for r in 0..N {
            // SAFETY: chunk c < n_in/32 reads code bytes [16c, 16c + 16) of the row
            // (n_in/2, asserted).
            let v = unsafe { vld1q_u8(codes[r].as_ptr().add(16 * c)) };
            (lo[r], hi[r]) = nibbles(table, v);
            wsc[r] = chunk_scales(scales[r], c);
        }
        for t in 0..T {
            // SAFETY: token t's codes [t·n_in + 32c, + 32) and group scales
            // [t·groups + 4c, + 4) lie inside the lengths asserted above.
            let (x0, x1, sa) = unsafe {
                let x = act.qa.as_ptr().add(t * n_in + CHUNK * c);
                let sa = vld1q_f32(act.sfa.as_ptr().add(t * groups + 4 * c));
                (vld1q_s8(x), vld1q_s8(x.add(16)), sa)
            };
            for r in 0..N {
                let d = sdot(sdot(vdupq_n_s32(0), lo[r], x0), hi[r], x1);
                acc[r][t] = vfmaq_f32(acc[r][t], vcvtq_f32_s32(d), vmulq_f32(wsc[r], sa));
            }
        }
    }
    let done = CHUNK * chunks;
    let mut out = [[0.0f32; T]; N];
    for r in 0..N {
        for t in 0..T {
            out[r][t] = vaddvq_f32(acc[r][t]);
            if done < n_in {
                let (qa, sfa) = (
                    &act.qa[t * n_in + done..][..n_in - done],
                    &act.sfa[t * groups + done / 8..][..(n_in - done) / 8],
                );
                out[r][t] += tail_dot(&codes[r][done / 2..], &scales[r][done / 16..], qa, sfa);
            }
        }
    }
    out
}

/// [`Isa::dot_a4`] with `sdot`: `wq` holds offset bytes (`2·E2M1 + 12`, non-negative,
/// so also valid signed bytes) in [`int::A4_PERM`] order, and each chunk's two `sdot`s
/// start from the group corrections `−12·Σqa`, which cancel the offset exactly.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "neon,dotprod")]
fn dot_a4(
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
    let chunks = n / CHUNK;
    let done = CHUNK * chunks;
    assert!(wsc.len() >= n / 8);
    for (t, a) in acc.iter_mut().enumerate() {
        let (qa, sfa, nc) = (
            &qa[t * stride..][..n],
            &sfa[t * gstride..][..n / 8],
            &negcorr[t * gstride..][..n / 8],
        );
        let mut v = vdupq_n_f32(0.0);
        for c in 0..chunks {
            // SAFETY: chunk c < n/32 reads bytes [32c, 32c + 32) of `wq` and `qa` (n
            // each) and groups [4c, 4c + 4) of `wsc`, `sfa` and `nc` (n/8 each).
            unsafe {
                let (w, x) = (
                    wq.as_ptr().add(CHUNK * c).cast::<i8>(),
                    qa.as_ptr().add(CHUNK * c),
                );
                let nc = vld1q_s32(nc.as_ptr().add(4 * c));
                let d = sdot(
                    sdot(nc, vld1q_s8(w), vld1q_s8(x)),
                    vld1q_s8(w.add(16)),
                    vld1q_s8(x.add(16)),
                );
                let sc = vmulq_f32(
                    vld1q_f32(wsc.as_ptr().add(4 * c)),
                    vld1q_f32(sfa.as_ptr().add(4 * c)),
                );
                v = vfmaq_f32(v, vcvtq_f32_s32(d), sc);
            }
        }
        let tail =
            portable::dot_a4_groups(&wq[done..], &wsc[done / 8..], &qa[done..], &sfa[done / 8..]);
        *a += vaddvq_f32(v) + tail;
    }
}
