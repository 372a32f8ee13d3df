//! `NeonI8mm` integer (W4A4 / W4A8) rows with `smmla`, for two or more tokens: decode
//! batches and the prompt GEMM alike. One token takes the `sdot` rows of
//! [`super::dotprod`] (a 2 × 2 product would waste half of each `smmla` on it).
//!
//! `smmla` multiplies a 2 × 8 block of signed bytes by an 8 × 2 one: here two weight
//! rows' 8 even (or odd) inputs of one 16-input NVFP4 block against two tokens' same
//! 8 inputs, so two `smmla`s give the exact integer sums of one block for 2 rows × 2
//! tokens. Pairing rows costs nothing extra: the 8 code bytes of one row's block and the
//! other's form one vector (a 64-bit zip) whose low and high nibbles, looked up, are
//! the two operands; the activations' [`int::A4_PERM`] order already holds each block's
//! even inputs, then odd ones, and a token pair is packed once per sliver of tokens
//! ([`pack_tokens`]). Each block sum is then scaled by its weight block scale times
//! the token's activation scale, which is one value per 16-input block in both W4A4
//! (the NVFP4 block) and W4A8 (one per 256 inputs): the sums of a block's two 8-input
//! groups are never needed apart.
//!
//! Blocking, as a small GEMM: tokens pass in slivers of [`SLIVER_TOKENS`] (their
//! packed activations stay in L2); per sliver, blocks of [`ROW_PAIRS`] row pairs are
//! decoded one [`SEG`]-input segment at a time into an L1 buffer
//! ([`decode_pairs`]), which the register tile of up to 2 row pairs × 2 token pairs
//! ([`tile`]) reads for every token pair; so each weight byte is decoded once per sliver
//! and read from memory once per call.

use super::super::{A4Act, Isa, Perm, SEG, a4_rows_by_segments};
use super::dotprod::a4_rows_few;
use super::int::{self, CHUNK, doubled_table, nibbles, smmla, tail_dot};
use crate::linear::fast::portable::e4m3_unit;
use core::arch::aarch64::*;
use edge_core::simd::I8mm;

/// Tokens per sliver: 32 tokens of 4096 inputs are 128 KiB of packed activations.
const SLIVER_TOKENS: usize = 32;
/// Row pairs decoded together: 4 pairs × one segment are 24 KiB of weights and scales.
const ROW_PAIRS: usize = 4;
/// Chunks per decoded segment.
const SEG_CHUNKS: usize = SEG / CHUNK;
/// Bytes of one row pair's or token pair's chunk: even and odd bytes of its two blocks.
const PAIR_BYTES: usize = 64;
/// Scales of one row pair's or token pair's chunk: a 4-lane vector per block.
const PAIR_SCALES: usize = 8;

impl Isa for I8mm {
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
        match tokens {
            1 => a4_rows_few(self.dotprod(), codes, scales, n_in, act, tokens, out),
            // Rows shorter than a chunk have nothing for the tile.
            _ if n_in < CHUNK => a4_rows_by_segments(self, codes, scales, n_in, act, tokens, out),
            // SAFETY: the token proves i8mm.
            _ => unsafe { a4_rows_mm(codes, scales, n_in, act, tokens, out) },
        }
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
        self.dotprod()
            .dot_a4(wq, wsc, qa, sfa, negcorr, stride, gstride, acc);
    }
}

/// Token pairs of a sliver packed for [`tile`]: per pair and chunk, [`PAIR_BYTES`]
/// bytes `[even₀, odd₀, even₁, odd₁]` (16 each: the two tokens' 8 even or odd inputs of
/// the chunk's first or second block) and [`PAIR_SCALES`] scales (per block the lanes
/// `[s_t, s_t', s_t, s_t']`, matching `smmla`'s `[r·t, r·t', r'·t, r'·t']`). A missing
/// second token (odd sliver) is zero.
struct Packed {
    bytes: Vec<i8>,
    scales: Vec<f32>,
}

/// Packs tokens `t0..t0 + nt` of `act` (whole chunks only).
fn pack_tokens(act: &A4Act, n_in: usize, t0: usize, nt: usize) -> Packed {
    let (chunks, groups) = (n_in / CHUNK, n_in / 8);
    let pairs = nt.div_ceil(2);
    let mut p = Packed {
        bytes: vec![0; pairs * chunks * PAIR_BYTES],
        scales: vec![0.0; pairs * chunks * PAIR_SCALES],
    };
    let zero = [0i8; CHUNK];
    for q in 0..pairs {
        let ts = [t0 + 2 * q, t0 + 2 * q + 1];
        let live = ts.map(|t| t < t0 + nt);
        for c in 0..chunks {
            let x = ts.map(|t| match t < t0 + nt {
                true => &act.qa[t * n_in + CHUNK * c..][..CHUNK],
                false => &zero[..],
            });
            let d = &mut p.bytes[(q * chunks + c) * PAIR_BYTES..][..PAIR_BYTES];
            // Blocks b = 0, 1 of the chunk: evens at x[8b..], odds at x[16 + 8b..].
            for b in 0..2 {
                for (h, half) in [8 * b, 16 + 8 * b].into_iter().enumerate() {
                    let o = 32 * b + 16 * h;
                    d[o..o + 8].copy_from_slice(&x[0][half..half + 8]);
                    d[o + 8..o + 16].copy_from_slice(&x[1][half..half + 8]);
                }
            }
            let s = &mut p.scales[(q * chunks + c) * PAIR_SCALES..][..PAIR_SCALES];
            for b in 0..2 {
                // A block's two groups share the activation scale (see the module docs).
                let g = 4 * c + 2 * b;
                let sa = ts.map(|t| match t < t0 + nt {
                    true => act.sfa[t * groups + g],
                    false => 0.0,
                });
                debug_assert!(
                    ts.iter().zip(live).all(|(&t, l)| !l
                        || act.sfa[t * groups + g].to_bits()
                            == act.sfa[t * groups + g + 1].to_bits()),
                    "activation scales differ within a 16-input block"
                );
                s[4 * b..4 * b + 4].copy_from_slice(&[sa[0], sa[1], sa[0], sa[1]]);
            }
        }
    }
    p
}

/// Row pairs of one segment decoded for [`tile`]: per pair and chunk, [`PAIR_BYTES`]
/// signed doubled weights `[even₀, odd₀, even₁, odd₁]` (each 16 bytes: the first row's
/// 8, then the second's) and [`PAIR_SCALES`] weight scales (per block `[w, w, w', w']`).
struct Decoded {
    bytes: Vec<i8>,
    scales: Vec<f32>,
}

/// Decodes chunks `c0..c0 + nc` of rows `rows` (`None`: a missing second row, zero) of
/// `codes` / `scales` (`cb`, `sb` bytes per row) into `dec`, pair `p` at `p·nc` chunks.
#[target_feature(enable = "neon,i8mm")]
fn decode_pairs(
    codes: &[u8],
    scales: &[u8],
    (cb, sb): (usize, usize),
    pairs: &[[Option<usize>; 2]],
    (c0, nc): (usize, usize),
    dec: &mut Decoded,
) {
    let table = doubled_table();
    let zero = [0u8; 16];
    assert!(dec.bytes.len() >= pairs.len() * nc * PAIR_BYTES);
    assert!(dec.scales.len() >= pairs.len() * nc * PAIR_SCALES);
    for (p, rows) in pairs.iter().enumerate() {
        let rc = rows.map(|r| r.map(|r| &codes[r * cb..][..cb]));
        let rs = rows.map(|r| r.map(|r| &scales[r * sb..][..sb]));
        for c in 0..nc {
            let src = rc.map(|row| row.map_or(&zero[..], |row| &row[16 * (c0 + c)..][..16]));
            let i = p * nc + c;
            // SAFETY: each source holds 16 bytes (sliced above); chunk i < pairs·nc of the
            // buffer has PAIR_BYTES bytes at i·PAIR_BYTES (asserted).
            unsafe {
                let (v0, v1) = (
                    vld1q_u64(src[0].as_ptr().cast()),
                    vld1q_u64(src[1].as_ptr().cast()),
                );
                let d = dec.bytes.as_mut_ptr().add(i * PAIR_BYTES);
                for (b, v) in [vzip1q_u64(v0, v1), vzip2q_u64(v0, v1)]
                    .into_iter()
                    .enumerate()
                {
                    let (lo, hi) = nibbles(table, vreinterpretq_u8_u64(v));
                    vst1q_s8(d.add(32 * b), lo);
                    vst1q_s8(d.add(32 * b + 16), hi);
                }
            }
            let s = &mut dec.scales[i * PAIR_SCALES..][..PAIR_SCALES];
            for b in 0..2 {
                let w = rs.map(|row| row.map_or(0.0, |row| e4m3_unit(row[2 * (c0 + c) + b])));
                s[4 * b..4 * b + 4].copy_from_slice(&[w[0], w[0], w[1], w[1]]);
            }
        }
    }
}

/// [`Isa::a4_rows`] with `smmla` for two or more tokens (see the module docs); `out` is
/// `[rows, tokens]`, overwritten.
#[target_feature(enable = "neon,i8mm")]
fn a4_rows_mm(
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    let (cb, sb) = (n_in / 2, n_in / 16);
    let (chunks, groups) = (n_in / CHUNK, n_in / 8);
    let rows = out.len() / tokens;
    out.fill(0.0);
    let seg = SEG_CHUNKS.min(chunks);
    let mut dec = Decoded {
        bytes: vec![0; ROW_PAIRS * seg * PAIR_BYTES],
        scales: vec![0.0; ROW_PAIRS * seg * PAIR_SCALES],
    };
    for t0 in (0..tokens).step_by(SLIVER_TOKENS) {
        let nt = SLIVER_TOKENS.min(tokens - t0);
        let packed = pack_tokens(act, n_in, t0, nt);
        let tpairs = nt.div_ceil(2);
        for r0 in (0..rows).step_by(2 * ROW_PAIRS) {
            let nr = (2 * ROW_PAIRS).min(rows - r0);
            let pairs: Vec<[Option<usize>; 2]> = (0..nr.div_ceil(2))
                .map(|p| {
                    [
                        Some(r0 + 2 * p),
                        Some(r0 + 2 * p + 1).filter(|&r| r < r0 + nr),
                    ]
                })
                .collect();
            for c0 in (0..chunks).step_by(seg) {
                let nc = seg.min(chunks - c0);
                decode_pairs(codes, scales, (cb, sb), &pairs, (c0, nc), &mut dec);
                let mut sums =
                    |p0: usize, q0: usize, y: &[[float32x4_t; 2]; 2], np: usize, nq: usize| {
                        for (i, y) in y.iter().enumerate().take(np) {
                            for (j, &v) in y.iter().enumerate().take(nq) {
                                let mut lanes = [0.0f32; 4];
                                // SAFETY: `lanes` holds 4 floats.
                                unsafe { vst1q_f32(lanes.as_mut_ptr(), v) };
                                // Lanes [r·t, r·t', r'·t, r'·t'] of row pair p0 + i, token
                                // pair q0 + j; missing rows and tokens are dropped.
                                for (l, &s) in lanes.iter().enumerate() {
                                    let r = r0 + 2 * (p0 + i) + l / 2;
                                    let t = t0 + 2 * (q0 + j) + l % 2;
                                    if r < r0 + nr && t < t0 + nt {
                                        out[r * tokens + t] += s;
                                    }
                                }
                            }
                        }
                    };
                for q0 in (0..tpairs).step_by(2) {
                    let nq = 2.min(tpairs - q0);
                    for p0 in (0..pairs.len()).step_by(2) {
                        let np = 2.min(pairs.len() - p0);
                        let w = |p: usize| {
                            let p = (p0 + p).min(p0 + np - 1);
                            (
                                &dec.bytes[p * nc * PAIR_BYTES..][..nc * PAIR_BYTES],
                                &dec.scales[p * nc * PAIR_SCALES..][..nc * PAIR_SCALES],
                            )
                        };
                        let x = |q: usize| {
                            let q = (q0 + q).min(q0 + nq - 1);
                            (
                                &packed.bytes[(q * chunks + c0) * PAIR_BYTES..][..nc * PAIR_BYTES],
                                &packed.scales[(q * chunks + c0) * PAIR_SCALES..]
                                    [..nc * PAIR_SCALES],
                            )
                        };
                        let mut y = [[vdupq_n_f32(0.0); 2]; 2];
                        match (np, nq) {
                            (2, 2) => y = tile::<2, 2>([w(0), w(1)], [x(0), x(1)]),
                            (2, _) => {
                                let [a, b] = tile::<2, 1>([w(0), w(1)], [x(0)]);
                                (y[0][0], y[1][0]) = (a[0], b[0]);
                            }
                            (_, 2) => y[0] = tile::<1, 2>([w(0)], [x(0), x(1)])[0],
                            _ => y[0][0] = tile::<1, 1>([w(0)], [x(0)])[0][0],
                        }
                        sums(p0, q0, &y, np, nq);
                    }
                }
            }
        }
    }
    let done = CHUNK * chunks;
    if done < n_in {
        for r in 0..rows {
            for t in 0..tokens {
                let (qa, sfa) = (
                    &act.qa[t * n_in + done..][..n_in - done],
                    &act.sfa[t * groups + done / 8..][..(n_in - done) / 8],
                );
                out[r * tokens + t] += tail_dot(
                    &codes[r * cb + done / 2..][..(n_in - done) / 2],
                    &scales[r * sb + done / 16..][..(n_in - done) / 16],
                    qa,
                    sfa,
                );
            }
        }
    }
}

/// One operand of [`tile`]: a row or token pair's chunks of bytes and scales.
type Operand<'a> = (&'a [i8], &'a [f32]);

/// `P` row pairs × `Q` token pairs over the chunks of `w` (decoded weights) and `x`
/// (packed activations): per pair of pairs the f32 lanes `[r·t, r·t', r'·t, r'·t']`.
// The indices `p` and `q` address several arrays at once.
#[allow(clippy::needless_range_loop)]
#[inline]
#[target_feature(enable = "neon,i8mm")]
fn tile<const P: usize, const Q: usize>(
    w: [Operand<'_>; P],
    x: [Operand<'_>; Q],
) -> [[float32x4_t; Q]; P] {
    let nc = w[0].0.len() / PAIR_BYTES;
    assert!(
        w.iter()
            .chain(&x)
            .all(|(b, s)| b.len() == nc * PAIR_BYTES && s.len() == nc * PAIR_SCALES)
    );
    let mut acc = [[vdupq_n_f32(0.0); Q]; P];
    let zero = vdupq_n_s32(0);
    for c in 0..nc {
        let (mut wv, mut ws) = ([[vdupq_n_s8(0); 4]; P], [[vdupq_n_f32(0.0); 2]; P]);
        for p in 0..P {
            // SAFETY: chunk c < nc reads bytes [64c, 64c + 64) and scales [8c, 8c + 8)
            // of each operand (lengths asserted).
            unsafe {
                let (b, s) = (
                    w[p].0.as_ptr().add(c * PAIR_BYTES),
                    w[p].1.as_ptr().add(c * PAIR_SCALES),
                );
                wv[p] = core::array::from_fn(|i| vld1q_s8(b.add(16 * i)));
                ws[p] = [vld1q_f32(s), vld1q_f32(s.add(4))];
            }
        }
        for q in 0..Q {
            // SAFETY: as above.
            let (xv, xs) = unsafe {
                let (b, s) = (
                    x[q].0.as_ptr().add(c * PAIR_BYTES),
                    x[q].1.as_ptr().add(c * PAIR_SCALES),
                );
                let xv: [int8x16_t; 4] = core::array::from_fn(|i| vld1q_s8(b.add(16 * i)));
                (xv, [vld1q_f32(s), vld1q_f32(s.add(4))])
            };
            for p in 0..P {
                let b0 = smmla(smmla(zero, wv[p][0], xv[0]), wv[p][1], xv[1]);
                let b1 = smmla(smmla(zero, wv[p][2], xv[2]), wv[p][3], xv[3]);
                let a = vfmaq_f32(acc[p][q], vcvtq_f32_s32(b0), vmulq_f32(ws[p][0], xs[0]));
                acc[p][q] = vfmaq_f32(a, vcvtq_f32_s32(b1), vmulq_f32(ws[p][1], xs[1]));
            }
        }
    }
    acc
}
