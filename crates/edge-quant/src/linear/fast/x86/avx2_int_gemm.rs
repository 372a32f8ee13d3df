//! AVX2 integer (W4A4 / W4A8) rows for prompts: a register-blocked GEMM over 8-bit
//! activations and NVFP4 weights decoded to offset doubled bytes.
//!
//! Blocking, from the outside in (Goto-style): a [`KC`]-input block of every row;
//! all tokens' activations for it packed once, [`TILE_TOKENS`] tokens interleaved per
//! 64-input chunk (a 16 KiB sliver that stays in L1); [`ROW_BLOCK`] rows decoded once
//! ([`decode_w4`], kept in L2) and reused by every sliver; and a 1-row × 8-token
//! register tile, in which each weight register serves eight tokens. Per 64 inputs
//! and token the tile issues two `vpmaddubsw`, one `vpaddw`, one `vpmaddwd`, one
//! conversion and two FMAs: `(D·s_a + c)·s_w`, with the offset correction `c` scaled
//! once at packing time (`c = −12·Σq·s_a`), so it costs no integer add. Wider row
//! tiles measured slower on Zen 3: with two rows the 16 registers spill accumulators
//! (2×4: 31 GMAC/s against 1×8: 57 GMAC/s on one core, L1-resident data).

use super::super::A4Act;
use super::super::portable::dot_a4_groups;
use super::avx2::decode_w4;
use super::avx2_int::{load, store};
use core::arch::x86_64::*;

/// Inputs per block: 64-input aligned, so blocks follow the weights' and activations'
/// 64-element permutation chunks; eight tokens' packed block is 16 KiB.
const KC: usize = 1024;

/// Rows decoded together per input block: 64 rows × 1024 inputs are 64 KiB of weight
/// bytes and 32 KiB of group scales, which stay in L2 while every sliver passes.
const ROW_BLOCK: usize = 64;

/// Tokens per register tile (and per packed sliver).
const TILE_TOKENS: usize = 8;

/// Vectors per packed (sliver, 64-input chunk): the tokens' activation bytes (two
/// vectors per token), then their scaled correction vectors, then their scale vectors.
const PACKED_VECTORS: usize = 4 * TILE_TOKENS;
/// The same in 32-bit words (the packed buffer is a `Vec<u32>`).
const PACKED_WORDS: usize = 8 * PACKED_VECTORS;
const CORR_AT: usize = 2 * TILE_TOKENS;
const SCALE_AT: usize = 3 * TILE_TOKENS;

/// Integer rows for many tokens (see [`crate::linear::fast::Isa::a4_rows`]): `out` is
/// `[rows, tokens]`, overwritten. `act.packed` must hold [`pack`]'s layout (the caller
/// checks it is not empty).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn a4_gemm(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    let rows = out.len() / tokens;
    out.fill(0.0);
    let kc = KC.min(n_in);
    let mut wq = vec![0u8; ROW_BLOCK * kc];
    let mut wsc = vec![0.0f32; ROW_BLOCK * kc / 8];
    let slivers = tokens.div_ceil(TILE_TOKENS);
    let packed = &act.packed;
    let groups = n_in / 8;
    for k0 in (0..n_in).step_by(KC) {
        let len = KC.min(n_in - k0);
        let token = |t: usize| token_block(act, n_in, groups, k0, len, t);
        let sliver_len = len / 64 * PACKED_WORDS;
        let block = &packed[k0 / KC * slivers * (kc / 64) * PACKED_WORDS..];
        for rb in (0..rows).step_by(ROW_BLOCK) {
            let nr = ROW_BLOCK.min(rows - rb);
            for r in 0..nr {
                let e = (rb + r) * n_in + k0;
                decode_w4(
                    &codes[e / 2..][..len / 2],
                    &scales[e / 16..][..len / 16],
                    &mut wq[r * len..][..len],
                    &mut wsc[r * len / 8..][..len / 8],
                );
            }
            for q in 0..slivers {
                let t0 = TILE_TOKENS * q;
                let nt = TILE_TOKENS.min(tokens - t0);
                let sliver = Sliver {
                    packed: &block[q * sliver_len..][..sliver_len],
                    tokens: core::array::from_fn(|t| token(t0 + t.min(nt - 1))),
                };
                for r in 0..nr {
                    let w = (&wq[r * len..][..len], &wsc[r * len / 8..][..len / 8]);
                    let y = &mut out[(rb + r) * tokens + t0..][..nt];
                    match nt {
                        8 => tile::<8>(w, &sliver, y),
                        7 => tile::<7>(w, &sliver, y),
                        6 => tile::<6>(w, &sliver, y),
                        5 => tile::<5>(w, &sliver, y),
                        4 => tile::<4>(w, &sliver, y),
                        3 => tile::<3>(w, &sliver, y),
                        2 => tile::<2>(w, &sliver, y),
                        _ => tile::<1>(w, &sliver, y),
                    }
                }
            }
        }
    }
}

/// Words of [`pack`]'s layout for `tokens` tokens of `n_in` inputs.
pub(super) fn gemm_words(n_in: usize, tokens: usize) -> usize {
    n_in.div_ceil(KC) * tokens.div_ceil(TILE_TOKENS) * (KC.min(n_in) / 64) * PACKED_WORDS
}

/// One token's activations over the current input block.
#[derive(Clone, Copy)]
struct TokenBlock<'a> {
    qa: &'a [i8],
    sfa: &'a [f32],
    negcorr: &'a [i32],
}

/// Token `t`'s activations over inputs `[k0, k0 + len)`.
fn token_block(
    act: &A4Act,
    n_in: usize,
    groups: usize,
    k0: usize,
    len: usize,
    t: usize,
) -> TokenBlock<'_> {
    TokenBlock {
        qa: &act.qa[t * n_in + k0..][..len],
        sfa: &act.sfa[t * groups + k0 / 8..][..len / 8],
        negcorr: &act.negcorr[t * groups + k0 / 8..][..len / 8],
    }
}

/// All tokens' activations in the GEMM's layout ([`crate::linear::fast::A4Act::packed`]):
/// per [`KC`]-input block, per sliver of [`TILE_TOKENS`] tokens, per whole 64-input
/// chunk, [`PACKED_VECTORS`] vectors of 8 words. Built once per forward pass and read
/// by every row task (each task packed its own copy before: 8 copies of 1 MiB per
/// 512-token layer).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn pack(act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    let slivers = tokens.div_ceil(TILE_TOKENS);
    let chunks_per_block = KC.min(n_in) / 64;
    let mut packed = vec![0u32; gemm_words(n_in, tokens)];
    let groups = n_in / 8;
    for k0 in (0..n_in).step_by(KC) {
        let len = KC.min(n_in - k0);
        let sliver_len = len / 64 * PACKED_WORDS;
        if sliver_len == 0 {
            continue;
        }
        let block = &mut packed[k0 / KC * slivers * chunks_per_block * PACKED_WORDS..];
        for (q, dst) in block.chunks_exact_mut(sliver_len).take(slivers).enumerate() {
            let t0 = TILE_TOKENS * q;
            let token = |t: usize| token_block(act, n_in, groups, k0, len, t);
            pack_sliver(t0..tokens.min(t0 + TILE_TOKENS), token, dst);
        }
    }
    packed
}

/// Up to [`TILE_TOKENS`] tokens' block: the whole 64-input chunks packed
/// ([`PACKED_VECTORS`] per chunk, so the tile walks one pointer), and each token's
/// slices for the tail.
struct Sliver<'a> {
    packed: &'a [u32],
    tokens: [TokenBlock<'a>; TILE_TOKENS],
}

/// Packs the whole chunks of tokens `ts` (at most [`TILE_TOKENS`]) into `dst`.
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_sliver<'a>(
    ts: core::ops::Range<usize>,
    token: impl Fn(usize) -> TokenBlock<'a>,
    dst: &mut [u32],
) {
    let t0 = ts.start;
    for t in ts {
        let a = token(t);
        let i = t - t0;
        for (c, v) in dst.chunks_exact_mut(PACKED_WORDS).enumerate() {
            // SAFETY: whole chunk c reads bytes [64c, 64c + 64) of `qa` and groups
            // [8c, 8c + 8) of `negcorr` and `sfa`, all within the block.
            unsafe {
                let x = a.qa.as_ptr().add(64 * c);
                store(v, 2 * i, _mm256_loadu_si256(x.cast()));
                store(v, 2 * i + 1, _mm256_loadu_si256(x.add(32).cast()));
                let corr = _mm256_loadu_si256(a.negcorr.as_ptr().add(8 * c).cast());
                let sa = _mm256_loadu_ps(a.sfa.as_ptr().add(8 * c));
                let scaled = _mm256_mul_ps(_mm256_cvtepi32_ps(corr), sa);
                store(v, CORR_AT + i, _mm256_castps_si256(scaled));
                store(v, SCALE_AT + i, _mm256_castps_si256(sa));
            }
        }
    }
}

/// Adds the block's products of one decoded row `(wq, wsc)` and the sliver's first `T`
/// tokens to `y[t]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const T: usize>((wq, wsc): (&[u8], &[f32]), sliver: &Sliver<'_>, y: &mut [f32]) {
    let chunks = wq.len() / 64;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (c, v) in sliver.packed.chunks_exact(PACKED_WORDS).enumerate() {
        // SAFETY: chunk c < len/64 reads bytes [64c, 64c + 64) of the row's weights
        // (len) and groups [8c, 8c + 8) of its scales (len/8).
        unsafe {
            let p = wq.as_ptr().add(64 * c);
            let (w0, w1) = (
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            );
            let ws = _mm256_loadu_ps(wsc.as_ptr().add(8 * c));
            for (t, acc) in acc.iter_mut().enumerate() {
                let p0 = _mm256_maddubs_epi16(w0, load(v, 2 * t));
                let p1 = _mm256_maddubs_epi16(w1, load(v, 2 * t + 1));
                let d = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), ones);
                let d = _mm256_cvtepi32_ps(d);
                // The activation scale and correction first (memory operands), the
                // weight scale in the second FMA: no scale product to hold, so all
                // eight accumulators stay in registers.
                let sa = _mm256_castsi256_ps(load(v, SCALE_AT + t));
                let d = _mm256_fmadd_ps(d, sa, _mm256_castsi256_ps(load(v, CORR_AT + t)));
                *acc = _mm256_fmadd_ps(d, ws, *acc);
            }
        }
    }
    let mut padded = [_mm256_setzero_ps(); TILE_TOKENS];
    padded[..T].copy_from_slice(&acc);
    let mut sums = [0.0f32; TILE_TOKENS];
    // SAFETY: `sums` holds 8 floats.
    unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), hsum8(padded)) };
    let done = 64 * chunks;
    if done < wq.len() {
        for (s, a) in sums.iter_mut().zip(&sliver.tokens[..T]) {
            *s += dot_a4_groups(
                &wq[done..],
                &wsc[done / 8..],
                &a.qa[done..],
                &a.sfa[done / 8..],
            );
        }
    }
    for (y, s) in y.iter_mut().zip(sums) {
        *y += s;
    }
}

/// The lane sums of eight vectors, as one vector: `[Σv₀, …, Σv₇]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum8(v: [__m256; 8]) -> __m256 {
    // Each `hadd` halves the lanes per vector; the two 128-bit halves then hold partial
    // sums of the same vectors.
    let a = [
        _mm256_hadd_ps(v[0], v[1]),
        _mm256_hadd_ps(v[2], v[3]),
        _mm256_hadd_ps(v[4], v[5]),
        _mm256_hadd_ps(v[6], v[7]),
    ];
    let b0 = _mm256_hadd_ps(a[0], a[1]);
    let b1 = _mm256_hadd_ps(a[2], a[3]);
    _mm256_add_ps(
        _mm256_permute2f128_ps::<0x20>(b0, b1),
        _mm256_permute2f128_ps::<0x31>(b0, b1),
    )
}
