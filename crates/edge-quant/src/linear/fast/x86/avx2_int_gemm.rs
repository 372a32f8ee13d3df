//! AVX2 integer (W4A4 / W4A8) rows for prompts: a register-blocked GEMM over 8-bit
//! activations and NVFP4 weights decoded to offset doubled bytes.
//!
//! Blocking, from the outside in (Goto-style): a [`KC`]-input block of every row;
//! all tokens' activations for it packed once, [`TILE_TOKENS`] tokens interleaved per
//! [`CHUNK`]-input chunk (a 24 KiB sliver that stays in L1); [`ROW_BLOCK`] rows decoded
//! once ([`decode_rows`], kept in L2) and reused by every sliver; and a 1-row × 8-token
//! register tile, in which each weight register serves eight tokens.
//!
//! Within a chunk, weights and activations are laid out so that 32-bit lane `l` of
//! each of the chunk's four vectors holds four inputs of one 16-input block
//! ([`lanes_by_block`]). The four `vpmaddubsw` products of a token then add up in
//! 16 bits to whole-block sums (at most 4·2·24·127 = 24 384, no overflow), and one
//! `vpmaddwd` widens them: per 128 inputs and token four `vpmaddubsw`, three `vpaddw`,
//! one `vpmaddwd`, one conversion and two FMAs, `(D·s_a + c)·s_w`, with the offset
//! correction `c = −12·Σq·s_a` scaled once at packing time. That is 11 vector
//! operations where 64-input chunks with a `vpmaddwd` per 8-input group took 14; the
//! kernel is bound by vector operations (Zen 3 in this VM retires about two per cycle
//! whatever their kind), so the count is the speed. Wider row tiles measured slower
//! on Zen 3: with two rows the 16 registers spill accumulators.

use super::super::A4Act;
use super::avx2::{decode_w4, dot_a4};
use super::avx2_int::{block_corrections, block_lanes, load, store};
use core::arch::x86_64::*;

/// Inputs per block: a multiple of [`CHUNK`], so every block but a row's last holds
/// whole chunks; eight tokens' packed block is 24 KiB.
const KC: usize = 1024;

/// Rows decoded together per input block: 64 rows × 1024 inputs are 64 KiB of weight
/// bytes and 32 KiB of scales, which stay in L2 while every sliver passes.
const ROW_BLOCK: usize = 64;

/// Tokens per register tile (and per packed sliver).
const TILE_TOKENS: usize = 8;

/// Inputs per chunk: eight 16-input blocks, one per 32-bit lane of four vectors.
const CHUNK: usize = 128;

/// Vectors per packed (sliver, chunk): the tokens' activation bytes (four vectors per
/// token), then their scaled correction vectors, then their scale vectors.
const PACKED_VECTORS: usize = 6 * TILE_TOKENS;
/// The same in 32-bit words (the packed buffer is a `Vec<u32>`).
const PACKED_WORDS: usize = 8 * PACKED_VECTORS;
const CORR_AT: usize = 4 * TILE_TOKENS;
const SCALE_AT: usize = 5 * TILE_TOKENS;

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
        let sliver_len = len / CHUNK * PACKED_WORDS;
        let block = &packed[k0 / KC * slivers * (kc / CHUNK) * PACKED_WORDS..];
        for rb in (0..rows).step_by(ROW_BLOCK) {
            let nr = ROW_BLOCK.min(rows - rb);
            let e = rb * n_in + k0;
            let (wq, wsc) = (&mut wq[..nr * len], &mut wsc[..nr * len / 8]);
            decode_rows(&codes[e / 2..], &scales[e / 16..], n_in, len, wq, wsc);
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

/// Decodes `nr` rows' input block `[k0, k0 + len)` (`codes`/`scales` start at the
/// first row's `k0`; rows are `n_in` inputs apart) into `wq` (`len` bytes per row) and
/// `wsc` (`len/8` floats per row): each row's whole chunks in [`lanes_by_block`] order
/// with chunk `c`'s 8 block scales at `wsc[8c..]` in the same lane order, and the rest
/// (under 128 inputs) as [`decode_w4`] leaves it, its group scales from
/// `wsc[whole/8..]` on.
#[target_feature(enable = "avx2,fma,f16c")]
fn decode_rows(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    len: usize,
    wq: &mut [u8],
    wsc: &mut [f32],
) {
    let rows = wq.chunks_exact_mut(len).zip(wsc.chunks_exact_mut(len / 8));
    for (r, (q, s)) in rows.enumerate() {
        let e = r * n_in;
        decode_w4(
            &codes[e / 2..][..len / 2],
            &scales[e / 16..][..len / 16],
            q,
            s,
        );
        for c in 0..len / CHUNK {
            // SAFETY: chunk c < len/128 reads and writes bytes [128c, 128c + 128) of
            // `q` (len) and reads groups [16c, 16c + 16) of `s` (len/8), writing
            // [8c, 8c + 8): its loads precede its stores, and later chunks read from
            // 16(c + 1) > 8c + 8 on.
            unsafe {
                let p = q.as_mut_ptr().add(CHUNK * c);
                let v = load_chunk(p);
                for (i, x) in lanes_by_block(v).into_iter().enumerate() {
                    _mm256_storeu_si256(p.add(32 * i).cast(), x);
                }
                let g = s.as_mut_ptr().add(16 * c);
                let b = block_lanes(_mm256_loadu_ps(g), _mm256_loadu_ps(g.add(8)));
                _mm256_storeu_ps(s.as_mut_ptr().add(8 * c), b);
            }
        }
    }
}

/// Rearranges one 128-input chunk in `EvenOdd(64)` order (the even, then the odd
/// inputs of its first 64, then the same for its second 64) so that 32-bit lane `l`
/// of every returned vector holds four inputs of block `PAIR_BLOCK_ORDER[l]` (see
/// [`block_lanes`]).
///
/// Dword `d` of an even or odd vector holds inputs `8d..8d + 8` (every other one) of
/// its 64, so block `d/2` of them; the even dwords of both halves' vectors, then the
/// odd ones, put one dword of every block in each result.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn lanes_by_block(v: [__m256i; 4]) -> [__m256i; 4] {
    let [e0, o0, e1, o1] = [
        _mm256_castsi256_ps(v[0]),
        _mm256_castsi256_ps(v[1]),
        _mm256_castsi256_ps(v[2]),
        _mm256_castsi256_ps(v[3]),
    ];
    [
        _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(e0, e1)),
        _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(e0, e1)),
        _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(o0, o1)),
        _mm256_castps_si256(_mm256_shuffle_ps::<0b11_01_11_01>(o0, o1)),
    ]
}

/// The four vectors of one [`CHUNK`]-input chunk of bytes.
///
/// # Safety
/// `p` must point to 128 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load_chunk(p: *const u8) -> [__m256i; 4] {
    // SAFETY: the caller vouches for 128 bytes: four 32-byte loads.
    unsafe {
        [
            _mm256_loadu_si256(p.cast()),
            _mm256_loadu_si256(p.add(32).cast()),
            _mm256_loadu_si256(p.add(64).cast()),
            _mm256_loadu_si256(p.add(96).cast()),
        ]
    }
}

/// Words of [`pack`]'s layout for `tokens` tokens of `n_in` inputs.
pub(super) fn gemm_words(n_in: usize, tokens: usize) -> usize {
    n_in.div_ceil(KC) * tokens.div_ceil(TILE_TOKENS) * (KC.min(n_in) / CHUNK) * PACKED_WORDS
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
/// per [`KC`]-input block, per sliver of [`TILE_TOKENS`] tokens, per whole
/// [`CHUNK`]-input chunk, [`PACKED_VECTORS`] vectors of 8 words. Built once per forward
/// pass and read by every row task.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn pack(act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    let slivers = tokens.div_ceil(TILE_TOKENS);
    let chunks_per_block = KC.min(n_in) / CHUNK;
    let mut packed = vec![0u32; gemm_words(n_in, tokens)];
    let groups = n_in / 8;
    for k0 in (0..n_in).step_by(KC) {
        let len = KC.min(n_in - k0);
        let sliver_len = len / CHUNK * PACKED_WORDS;
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

/// Up to [`TILE_TOKENS`] tokens' block: the whole chunks packed ([`PACKED_VECTORS`]
/// per chunk, so the tile walks one pointer), and each token's slices for the tail.
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
            // SAFETY: whole chunk c reads bytes [128c, 128c + 128) of `qa` and groups
            // [16c, 16c + 16) of `negcorr` and `sfa`, all within the block.
            unsafe {
                let x = a.qa.as_ptr().add(CHUNK * c);
                let bytes = load_chunk(x.cast());
                for (j, b) in lanes_by_block(bytes).into_iter().enumerate() {
                    store(v, 4 * i + j, b);
                }
                let g = 16 * c;
                let [corr, sa] =
                    block_corrections(a.negcorr.as_ptr().add(g), a.sfa.as_ptr().add(g));
                store(v, CORR_AT + i, _mm256_castps_si256(corr));
                store(v, SCALE_AT + i, _mm256_castps_si256(sa));
            }
        }
    }
}

/// Adds the block's products of one decoded row `(wq, wsc)` ([`decode_rows`]'s
/// layout) and the sliver's first `T` tokens to `y[t]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<const T: usize>((wq, wsc): (&[u8], &[f32]), sliver: &Sliver<'_>, y: &mut [f32]) {
    let chunks = wq.len() / CHUNK;
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    for (c, v) in sliver.packed.chunks_exact(PACKED_WORDS).enumerate() {
        // SAFETY: chunk c < len/128 reads bytes [128c, 128c + 128) of the row's weights
        // (len) and block scales [8c, 8c + 8) of its scales (len/8).
        unsafe {
            let p = wq.as_ptr().add(CHUNK * c);
            let w = load_chunk(p);
            let ws = _mm256_loadu_ps(wsc.as_ptr().add(8 * c));
            for (t, acc) in acc.iter_mut().enumerate() {
                // Whole-block sums in 16 bits (at most 24 384), widened once.
                let mut s = _mm256_maddubs_epi16(w[0], load(v, 4 * t));
                s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[1], load(v, 4 * t + 1)));
                s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[2], load(v, 4 * t + 2)));
                s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[3], load(v, 4 * t + 3)));
                let d = _mm256_cvtepi32_ps(_mm256_madd_epi16(s, ones));
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
    let done = CHUNK * chunks;
    if done < wq.len() {
        // The rest keeps `decode_w4`'s order (a 64-input `EvenOdd` chunk, then
        // natural), which `dot_a4` reads.
        let g = done / 8;
        for (s, a) in sums.iter_mut().zip(&sliver.tokens[..T]) {
            let mut sum = [0.0f32];
            let (qa, sfa, nc) = (&a.qa[done..], &a.sfa[g..], &a.negcorr[g..]);
            dot_a4(&wq[done..], &wsc[g..], qa, sfa, nc, 0, 0, &mut sum);
            *s += sum[0];
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
