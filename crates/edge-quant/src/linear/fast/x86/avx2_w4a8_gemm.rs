//! AVX2 W4A8 rows for prompts: a GEMM of int8 activations (one scale per 256 inputs)
//! and NVFP4 weights whose block scales are applied in integers.
//!
//! An E4M3 block scale is `M·2^X` with an integer `M ≤ 15`. Relative to its row's
//! largest exponent less [`SCALE_BITS`], every block scale within `2^SCALE_BITS` of
//! the largest is an exact integer `c ≤ 15·2^10` ([`decode_scales`]), so a 256-input
//! chunk needs no float work per 16-input block:
//!
//! - weights and activations are laid out so that 16-bit lane `j` of each of a chunk's
//!   eight vectors holds two inputs of block `j` ([`lanes_by_block`]);
//! - four `vpmaddubsw` (unsigned activation `q + 128` times the signed doubled E2M1
//!   weight) add up in 16 bits to half-block sums (at most 8·255·12 = 24 480);
//! - one `vpmaddwd` per half multiplies them by the integer scales and adds block
//!   pairs, one `vpaddd` joins the halves (at most 4·24 480·15 360 < 2³¹);
//! - one conversion and one FMA with the chunk's activation scale.
//!
//! That is 19 vector operations per 256 inputs and token, where the per-16-input
//! float scaling of [`super::avx2_int_gemm`] takes 22; the kernel is bound by vector
//! operations on Zen 3 (this VM retires about two per cycle whatever their kind). The
//! `+128` offset of the activations is removed once per row and token afterwards
//! ([`Offsets::apply`]): it adds `128·Σ_j c_j·W_j` per chunk, with `W_j` the block's
//! weight sum. Rows with a block scale further below the largest, or a NaN, take the
//! per-block segment path ([`a4_rows_by_segments`]) instead (exact as well, only slower).
//!
//! Blocking: rows are decoded [`ROW_BLOCK`] at a time over all their inputs (kept in
//! L2), the tokens pass in slivers of [`SLIVER_TOKENS`] (their activations stay in
//! L2), and the register tile is [`ROW_GROUP`] rows × 1 token: the activations must be
//! the unsigned (register) operand of `vpmaddubsw`, so rows share them and the weights
//! come from memory (L1). Each output is finished in one pass, so the kernel writes its
//! rows' columns of the `[tokens, out]` result directly ([`ColumnBand`]) instead of a
//! tile to transpose (that transpose, its zeroed buffer and a scaling pass took 14% of a
//! 512-token prefill).

use super::super::{A4Act, A4Kind, ColumnBand, Isa, Nvfp4Rows, a4_rows_by_segments};
use crate::int8;
use core::arch::x86_64::*;

/// Inputs per chunk: one activation scale, sixteen 16-input weight blocks.
const CHUNK: usize = int8::BLOCK;
/// Weight blocks per chunk (16-bit lanes of a vector).
const BLOCKS: usize = CHUNK / 16;
/// Bytes per chunk's packed activations or decoded weights: eight vectors.
const CHUNK_BYTES: usize = 256;

/// Rows of the register tile.
const ROW_GROUP: usize = 4;
/// Rows decoded together: 64 rows of 3584 inputs are 224 KiB of weight bytes.
const ROW_BLOCK: usize = 64;
/// Tokens per pass over a row block: 32 tokens of 3584 inputs are 112 KiB.
const SLIVER_TOKENS: usize = 32;

/// Binades below a row's largest block scale that keep exact integer scales: with
/// `M ≤ 15`, `c ≤ 15·2¹⁰ = 15 360`, which keeps a chunk's 32-bit sums from overflowing.
const SCALE_BITS: i32 = 10;

/// Words of [`pack`]'s layout: every token's chunks of activation bytes, then the
/// activation scales chunk-major (`[chunk][token]`).
pub(super) fn gemm_words(n_in: usize, tokens: usize) -> usize {
    let chunks = n_in.div_ceil(CHUNK);
    tokens * chunks * CHUNK_BYTES / 4 + chunks * tokens
}

/// Whether [`gemm`] can run on `act` (W4A8 activations packed by [`pack`]).
pub(super) fn can_run(act: &A4Act, n_in: usize, tokens: usize) -> bool {
    act.kind == A4Kind::Int8 && act.packed.len() == gemm_words(n_in, tokens)
}

/// The sixteen 16-input blocks of one 256-input chunk of bytes in lane order: vector
/// `k` holds inputs `2k, 2k + 1` of block `j` in 16-bit lane `j`. `rows[i]` holds block
/// `i` in its low half and block `i + 8` in its high half (16 bytes each); the result
/// is an 8 × 8 transpose of 16-bit words in each half.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn lanes_by_block(rows: [__m256i; 8]) -> [__m256i; 8] {
    let [r0, r1, r2, r3, r4, r5, r6, r7] = rows;
    let t = [
        _mm256_unpacklo_epi16(r0, r1),
        _mm256_unpackhi_epi16(r0, r1),
        _mm256_unpacklo_epi16(r2, r3),
        _mm256_unpackhi_epi16(r2, r3),
        _mm256_unpacklo_epi16(r4, r5),
        _mm256_unpackhi_epi16(r4, r5),
        _mm256_unpacklo_epi16(r6, r7),
        _mm256_unpackhi_epi16(r6, r7),
    ];
    let u = [
        _mm256_unpacklo_epi32(t[0], t[2]),
        _mm256_unpackhi_epi32(t[0], t[2]),
        _mm256_unpacklo_epi32(t[1], t[3]),
        _mm256_unpackhi_epi32(t[1], t[3]),
        _mm256_unpacklo_epi32(t[4], t[6]),
        _mm256_unpackhi_epi32(t[4], t[6]),
        _mm256_unpacklo_epi32(t[5], t[7]),
        _mm256_unpackhi_epi32(t[5], t[7]),
    ];
    [
        _mm256_unpacklo_epi64(u[0], u[4]),
        _mm256_unpackhi_epi64(u[0], u[4]),
        _mm256_unpacklo_epi64(u[1], u[5]),
        _mm256_unpackhi_epi64(u[1], u[5]),
        _mm256_unpacklo_epi64(u[2], u[6]),
        _mm256_unpackhi_epi64(u[2], u[6]),
        _mm256_unpacklo_epi64(u[3], u[7]),
        _mm256_unpackhi_epi64(u[3], u[7]),
    ]
}

/// Stores the eight vectors of one chunk at `dst`.
///
/// # Safety
/// `dst` must point to 256 writable bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn store_chunk(dst: *mut u8, v: [__m256i; 8]) {
    for (k, x) in v.into_iter().enumerate() {
        // SAFETY: vector k covers bytes [32k, 32k + 32) of the caller's 256.
        unsafe { _mm256_storeu_si256(dst.add(32 * k).cast(), x) };
    }
}

/// All tokens' int8 activations in the GEMM's layout ([`gemm_words`]): per token and
/// chunk the codes plus 128 in [`lanes_by_block`] order (inputs past the row's end as
/// 128, a zero code), then the block scales. Built once per forward pass and read by
/// every row task.
#[target_feature(enable = "avx2,fma")]
pub(super) fn pack(act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    let chunks = n_in.div_ceil(CHUNK);
    let mut packed = vec![0u32; gemm_words(n_in, tokens)];
    let (bytes, scales) = packed.split_at_mut(tokens * chunks * CHUNK_BYTES / 4);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(bytes);
    let groups = n_in / 8;
    let offset = _mm256_set1_epi8(i8::MIN);
    let mut padded = [0i8; CHUNK];
    for (t, dst) in bytes.chunks_exact_mut(chunks * CHUNK_BYTES).enumerate() {
        let codes = &act.natural[t * n_in..][..n_in];
        for (c, dst) in dst.chunks_exact_mut(CHUNK_BYTES).enumerate() {
            let src = &codes[CHUNK * c..];
            let src = if src.len() >= CHUNK {
                &src[..CHUNK]
            } else {
                padded[..src.len()].copy_from_slice(src);
                padded[src.len()..].fill(0);
                &padded[..]
            };
            let p = src.as_ptr();
            // SAFETY: `src` holds 256 bytes: rows read 16 bytes at 16i and 16(i + 8);
            // `dst` holds 256.
            unsafe {
                let rows: [__m256i; 8] = core::array::from_fn(|i| {
                    let v = _mm256_loadu2_m128i(p.add(16 * (i + 8)).cast(), p.add(16 * i).cast());
                    _mm256_xor_si256(v, offset)
                });
                store_chunk(dst.as_mut_ptr(), lanes_by_block(rows));
            }
            // Group 32c is the block's first; every group of a block has its scale.
            scales[c * tokens + t] = act.sfa[t * groups + c * (CHUNK / 8)].to_bits();
        }
    }
    packed
}

/// E2M1 codes to signed doubled values (`2·E2M1`, −12..=12), for `vpshufb`.
const DOUBLED_SIGNED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Decodes one chunk's 128 code bytes at `codes` (natural NVFP4 packing: input `2i` in
/// the low nibble of byte `i`) into the signed doubled weights in [`lanes_by_block`]
/// order at `dst`, and returns `Σ_j c_j·W_j` over its blocks (`W_j` the block's weight
/// sum, `c` the 16 integer scales at `scales`).
///
/// # Safety
/// `codes` must point to 128 readable bytes, `scales` to 16 readable values and `dst`
/// to 256 writable bytes.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn decode_chunk(codes: *const u8, scales: *const i16, dst: *mut u8) -> i32 {
    // SAFETY: the table holds 16 bytes.
    let table = unsafe { _mm_loadu_si128(DOUBLED_SIGNED.as_ptr().cast()) };
    let table = _mm256_broadcastsi128_si256(table);
    let nibble = _mm256_set1_epi8(0x0f);
    // Per 32 code bytes (blocks 4q..4q + 4), the natural-order values of blocks
    // [4q | 4q + 2] and [4q + 1 | 4q + 3] (one block per 128-bit half).
    let mut halves = [[_mm256_setzero_si256(); 2]; 4];
    for (q, h) in halves.iter_mut().enumerate() {
        // SAFETY: 32 bytes at 32q < 128.
        let v = unsafe { _mm256_loadu_si256(codes.add(32 * q).cast()) };
        let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, nibble));
        let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble));
        *h = [_mm256_unpacklo_epi8(lo, hi), _mm256_unpackhi_epi8(lo, hi)];
    }
    let [[a0, b0], [a1, b1], [a2, b2], [a3, b3]] = halves;
    // Row i: block i low, block i + 8 high.
    let rows = [
        _mm256_permute2x128_si256::<0x20>(a0, a2),
        _mm256_permute2x128_si256::<0x20>(b0, b2),
        _mm256_permute2x128_si256::<0x31>(a0, a2),
        _mm256_permute2x128_si256::<0x31>(b0, b2),
        _mm256_permute2x128_si256::<0x20>(a1, a3),
        _mm256_permute2x128_si256::<0x20>(b1, b3),
        _mm256_permute2x128_si256::<0x31>(a1, a3),
        _mm256_permute2x128_si256::<0x31>(b1, b3),
    ];
    let w = lanes_by_block(rows);
    // Block sums in 16-bit lanes (at most 16·12), times the scales: at most
    // 16·192·15 360 in all.
    let ones = _mm256_set1_epi8(1);
    let sums = w.iter().fold(_mm256_setzero_si256(), |acc, &v| {
        _mm256_add_epi16(acc, _mm256_maddubs_epi16(ones, v))
    });
    // SAFETY: the caller vouches for 16 scales and 256 bytes at `dst`.
    let scaled = unsafe {
        store_chunk(dst, w);
        _mm256_madd_epi16(sums, _mm256_loadu_si256(scales.cast()))
    };
    let x = _mm_add_epi32(
        _mm256_castsi256_si128(scaled),
        _mm256_extracti128_si256::<1>(scaled),
    );
    let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
    _mm_cvtsi128_si32(_mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x)))
}

/// Marks a NaN in [`E4M3_PARTS`].
const NAN_EXPONENT: i8 = i8::MIN;

/// Every E4M3 byte as `(M, X)` with value `M·2^X` and `|M| ≤ 15` (normal `(8 +
/// m)·2^(e − 10)`, subnormal `m·2⁻⁹`); the NaNs 0x7f/0xff as [`NAN_EXPONENT`].
const E4M3_PARTS: [(i8, i8); 256] = {
    let mut parts = [(0i8, 0i8); 256];
    let mut b = 0;
    while b < 256 {
        let (e, m) = (((b >> 3) & 0x0f) as i8, (b & 7) as i8);
        let (mant, exp) = if e == 0 { (m, -9) } else { (8 + m, e - 10) };
        parts[b] = match (b & 0x7f == 0x7f, b & 0x80 != 0) {
            (true, _) => (0, NAN_EXPONENT),
            (false, true) => (-mant, exp),
            (false, false) => (mant, exp),
        };
        b += 1;
    }
    parts
};

/// Integer block scales of one row (`scales`: its E4M3 bytes, 16 per chunk in
/// `c`, zero-padded): `c_j = M_j·2^(X_j − X_ref)` with `X_ref` the largest exponent
/// less [`SCALE_BITS`]. Returns `2^X_ref`, or `None` where a block scale is NaN or a
/// non-zero one lies below `2^X_ref` (the row then takes the per-block path). Branch-free
/// table lookups: this runs once per weight block and GEMM call.
fn decode_scales(scales: &[u8], c: &mut [i16]) -> Option<f32> {
    let (mut top, mut nan) = (i32::MIN, false);
    for &b in scales {
        let (m, x) = E4M3_PARTS[usize::from(b)];
        nan |= x == NAN_EXPONENT;
        top = top.max(if m != 0 { i32::from(x) } else { i32::MIN });
    }
    let reference = if top == i32::MIN { 0 } else { top - SCALE_BITS };
    let mut below = false;
    for (dst, &b) in c.iter_mut().zip(scales) {
        let (m, x) = E4M3_PARTS[usize::from(b)];
        let shift = i32::from(x) - reference;
        below |= m != 0 && shift < 0;
        // |m|·2^shift ≤ 15·2¹⁰ fits; a NaN's m is 0.
        *dst = (i32::from(m) << shift.clamp(0, SCALE_BITS)) as i16;
    }
    c[scales.len()..].fill(0);
    (!nan && !below).then(|| (reference as f32).exp2())
}

/// A block of rows decoded for the tile: per row and chunk, 256 weight bytes and 16
/// integer scales; per row and chunk the offset correction `128·Σ_j c_j·W_j`; per row
/// the factor `2^X_ref` and whether it takes the integer path at all.
struct Decoded {
    chunks: usize,
    weights: Vec<u8>,
    scales: Vec<i16>,
    corrections: Vec<f32>,
    factors: Vec<f32>,
    integer: Vec<bool>,
}

impl Decoded {
    fn new(rows: usize, chunks: usize) -> Self {
        Decoded {
            chunks,
            weights: vec![0; rows * chunks * CHUNK_BYTES],
            scales: vec![0; rows * chunks * BLOCKS],
            corrections: vec![0.0; rows * chunks],
            factors: vec![0.0; rows],
            integer: vec![false; rows],
        }
    }

    /// Decodes `rows` rows of `n_in` inputs (`codes`, `scales` start at the first).
    #[target_feature(enable = "avx2,fma")]
    fn decode(&mut self, codes: &[u8], scales: &[u8], n_in: usize, rows: usize) {
        let chunks = self.chunks;
        let (cb, sb) = (n_in / 2, n_in / 16);
        let mut padded = [0u8; CHUNK / 2];
        for r in 0..rows {
            let scales = &scales[r * sb..][..sb];
            let cs = &mut self.scales[r * chunks * BLOCKS..][..chunks * BLOCKS];
            let Some(factor) = decode_scales(scales, cs) else {
                self.integer[r] = false;
                continue;
            };
            self.integer[r] = true;
            self.factors[r] = factor;
            let codes = &codes[r * cb..][..cb];
            let w = &mut self.weights[r * chunks * CHUNK_BYTES..][..chunks * CHUNK_BYTES];
            let corr = &mut self.corrections[r * chunks..][..chunks];
            let parts = w.chunks_exact_mut(CHUNK_BYTES).zip(cs.chunks_exact(BLOCKS));
            for (c, ((dst, cs), corr)) in parts.zip(corr).enumerate() {
                let src = &codes[c * CHUNK / 2..];
                let src = if src.len() >= CHUNK / 2 {
                    src
                } else {
                    padded[..src.len()].copy_from_slice(src);
                    padded[src.len()..].fill(0);
                    &padded[..]
                };
                // SAFETY: `src` holds at least 128 bytes, `cs` 16 scales, `dst` 256 bytes.
                let sum = unsafe { decode_chunk(src.as_ptr(), cs.as_ptr(), dst.as_mut_ptr()) };
                *corr = 128.0 * sum as f32;
            }
        }
    }
}

/// The packed activations of a forward pass: per token `chunks` chunks of bytes, and
/// the scales chunk-major (`scales[c·tokens + t]`).
#[derive(Clone, Copy)]
struct Packed<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
    tokens: usize,
    chunks: usize,
}

/// `R ≤ ROW_GROUP` rows of a [`Decoded`] block against the tokens `ts`: for each row
/// `r` and token `t`, `out.row_mut(t)[r0 + r] = Σ_c s_a[c]·Σ_j c_j·Σ_{k∈j}
/// w_k·(q_k + 128)` (the offset and the row factor not yet removed). The rows' weights
/// stay in L1 while the tokens pass.
#[target_feature(enable = "avx2,fma")]
fn tile<const R: usize>(
    dec: &Decoded,
    rows: [usize; R],
    act: Packed<'_>,
    ts: core::ops::Range<usize>,
    out: &mut ColumnBand<'_>,
    r0: usize,
) {
    let chunks = dec.chunks;
    assert!(chunks == act.chunks && ts.end <= act.tokens);
    // Bounds: every row's `chunks` chunks of weights and scales, and every token's
    // chunks of bytes and scales (`chunks` chunks of each of `tokens` tokens).
    assert!(rows.iter().all(|&r| r < dec.factors.len()));
    assert!(act.bytes.len() >= act.tokens * chunks * CHUNK_BYTES);
    assert!(act.scales.len() >= act.tokens * chunks);
    // Loops, not closures: a closure would not inherit the target features.
    let (mut w, mut cs) = ([core::ptr::null(); R], [core::ptr::null(); R]);
    for i in 0..R {
        w[i] = dec.weights[rows[i] * chunks * CHUNK_BYTES..].as_ptr();
        cs[i] = dec.scales[rows[i] * chunks * BLOCKS..].as_ptr();
    }
    for t in ts {
        let mut acc = [_mm256_setzero_ps(); R];
        for c in 0..chunks {
            // SAFETY: chunk c < chunks of token t < tokens and of the rows, within the
            // lengths asserted above.
            unsafe {
                let a = act.bytes.as_ptr().add((t * chunks + c) * CHUNK_BYTES);
                let mut av = [_mm256_setzero_si256(); 8];
                for (k, v) in av.iter_mut().enumerate() {
                    *v = _mm256_loadu_si256(a.add(32 * k).cast());
                }
                let s = _mm256_broadcast_ss(act.scales.get_unchecked(c * act.tokens + t));
                for i in 0..R {
                    let p = w[i].add(CHUNK_BYTES * c);
                    macro_rules! product {
                        ($k:expr) => {
                            _mm256_maddubs_epi16(av[$k], _mm256_loadu_si256(p.add(32 * $k).cast()))
                        };
                    }
                    let lo = _mm256_add_epi16(
                        _mm256_add_epi16(product!(0), product!(1)),
                        _mm256_add_epi16(product!(2), product!(3)),
                    );
                    let hi = _mm256_add_epi16(
                        _mm256_add_epi16(product!(4), product!(5)),
                        _mm256_add_epi16(product!(6), product!(7)),
                    );
                    let scale = _mm256_loadu_si256(cs[i].add(BLOCKS * c).cast());
                    let d = _mm256_add_epi32(
                        _mm256_madd_epi16(lo, scale),
                        _mm256_madd_epi16(hi, scale),
                    );
                    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, acc[i]);
                }
            }
        }
        let mut sums = [0.0f32; ROW_GROUP];
        if R == ROW_GROUP {
            // SAFETY: `sums` holds 4 floats.
            unsafe { _mm_storeu_ps(sums.as_mut_ptr(), hsum4([acc[0], acc[1], acc[2], acc[3]])) };
        } else {
            for (s, &v) in sums.iter_mut().zip(&acc) {
                *s = hsum(v);
            }
        }
        let y = &mut out.row_mut(t)[r0..];
        for (&r, s) in rows.iter().zip(sums) {
            y[r] = s;
        }
    }
}

/// The lane sums of four vectors: `[Σa, Σb, Σc, Σd]`.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum4([a, b, c, d]: [__m256; 4]) -> __m128 {
    let h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h))
}

/// The sum of a vector's eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn hsum(v: __m256) -> f32 {
    let x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)))
}

/// W4A8 rows for many tokens (see [`crate::linear::fast::Isa::a4_rows_into`]): the
/// band's `band.width()` rows `w` for its `band.rows()` tokens, times `scale`, into the
/// band. `act` must hold [`pack`]'s layout ([`can_run`]); `isa` (whose `A4_PERM`
/// ordered `act.qa`) runs the per-block rows. The CPU must support AVX2, FMA and
/// F16C (every [`Isa`] token that can prepare such activations proves it).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn gemm<I: Isa>(
    isa: I,
    w: Nvfp4Rows<'_>,
    act: &A4Act,
    scale: f32,
    band: &mut ColumnBand<'_>,
) {
    let Nvfp4Rows {
        codes,
        scales,
        n_in,
    } = w;
    let (rows, tokens) = (band.width(), band.rows());
    let chunks = n_in.div_ceil(CHUNK);
    let (bytes, act_scales) = act.packed.split_at(tokens * chunks * CHUNK_BYTES / 4);
    let packed = Packed {
        bytes: bytemuck::cast_slice(bytes),
        scales: bytemuck::cast_slice(act_scales),
        tokens,
        chunks,
    };
    let mut dec = Decoded::new(ROW_BLOCK.min(rows), chunks);
    let (cb, sb) = (n_in / 2, n_in / 16);
    for rb in (0..rows).step_by(ROW_BLOCK) {
        let nr = ROW_BLOCK.min(rows - rb);
        dec.decode(&codes[rb * cb..], &scales[rb * sb..], n_in, nr);
        let fast: Vec<usize> = (0..nr).filter(|&r| dec.integer[r]).collect();
        let offsets = Offsets::new(&dec, nr, scale);
        for t0 in (0..tokens).step_by(SLIVER_TOKENS) {
            let sliver = t0..tokens.min(t0 + SLIVER_TOKENS);
            let mut groups = fast.chunks_exact(ROW_GROUP);
            for g in groups.by_ref() {
                let g = [g[0], g[1], g[2], g[3]];
                tile::<ROW_GROUP>(&dec, g, packed, sliver.clone(), band, rb);
            }
            for &r in groups.remainder() {
                tile::<1>(&dec, [r], packed, sliver.clone(), band, rb);
            }
            // While the sliver's outputs are in L1.
            offsets.apply(packed, sliver, band, rb);
        }
        // Rows outside the integer scales' range: the per-block path.
        let mut y = vec![0.0; tokens];
        for r in (0..nr).filter(|&r| !dec.integer[r]) {
            let (c, s) = (
                &codes[(rb + r) * cb..][..cb],
                &scales[(rb + r) * sb..][..sb],
            );
            a4_rows_by_segments(isa, c, s, n_in, act, tokens, &mut y);
            for (t, &v) in y.iter().enumerate() {
                band.row_mut(t)[rb + r] = scale * v;
            }
        }
    }
}

/// The activation offset's share of a block's rows and their output factors.
struct Offsets {
    /// `128·Σ_j c_j·W_j` per chunk and row, chunk-major (so each token's pass runs
    /// along contiguous rows).
    corr: Vec<f32>,
    /// `scale·2^(X_ref − 8)` per row, the 2⁻⁸ being the E4M3 scale unit of
    /// [`crate::linear::fast::Isa::a4_rows`]'s contract.
    factors: Vec<f32>,
}

impl Offsets {
    fn new(dec: &Decoded, nr: usize, scale: f32) -> Self {
        let chunks = dec.chunks;
        let mut corr = vec![0.0f32; chunks * nr];
        for r in 0..nr {
            for c in 0..chunks {
                corr[c * nr + r] = dec.corrections[r * chunks + c];
            }
        }
        let factors = dec.factors[..nr]
            .iter()
            .map(|f| f * scale / 256.0)
            .collect();
        Offsets { corr, factors }
    }

    /// Finishes the tile sums of tokens `ts` in band columns `r0..r0 + nr`: `y =
    /// factor·(y − Σ_c s_a[c]·corr[c])`. Rows on the per-block path are overwritten
    /// afterwards.
    #[target_feature(enable = "avx2,fma")]
    fn apply(
        &self,
        act: Packed<'_>,
        ts: core::ops::Range<usize>,
        band: &mut ColumnBand<'_>,
        r0: usize,
    ) {
        let nr = self.factors.len();
        let whole = nr / 8 * 8;
        let mut s = vec![0.0f32; self.corr.len() / nr.max(1)];
        for t in ts {
            for (c, s) in s.iter_mut().enumerate() {
                *s = act.scales[c * act.tokens + t];
            }
            let y = &mut band.row_mut(t)[r0..][..nr];
            // Eight rows at a time, their corrections summed in a register: one load
            // and store of the outputs per token.
            for r in (0..whole).step_by(8) {
                // SAFETY: rows r..r + 8 ≤ nr of `y`, `factors` and each chunk's `nr`
                // corrections.
                unsafe {
                    let mut v = _mm256_loadu_ps(y.as_ptr().add(r));
                    for (c, &sc) in s.iter().enumerate() {
                        let k = _mm256_loadu_ps(self.corr.as_ptr().add(c * nr + r));
                        v = _mm256_fnmadd_ps(_mm256_set1_ps(sc), k, v);
                    }
                    let f = _mm256_loadu_ps(self.factors.as_ptr().add(r));
                    _mm256_storeu_ps(y.as_mut_ptr().add(r), _mm256_mul_ps(v, f));
                }
            }
            for (r, y) in y.iter_mut().enumerate().skip(whole) {
                let mut v = *y;
                for (c, &sc) in s.iter().enumerate() {
                    v -= sc * self.corr[c * nr + r];
                }
                *y = v * self.factors[r];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// E4M3 bytes: exponent field `e`, mantissa `m`.
    fn e4m3(e: u8, m: u8) -> u8 {
        (e << 3) | m
    }

    #[test]
    fn integer_scales_are_exact_within_ten_binades() {
        // 1.0 (e = 7: 8·2⁻³), 448 (e = 15, m = 6: 14·2⁵), a subnormal, zero, −1.5.
        let scales = [e4m3(7, 0), e4m3(15, 6), 0x01, 0x00, 0x80 | e4m3(7, 4)];
        let mut c = [7i16; 16];
        // Largest exponent 5, so X_ref = −5: 1.0 = 8·2⁻³ → 8·2² = 32.
        assert_eq!(decode_scales(&scales[..2], &mut c), Some(2f32.powi(-5)));
        assert_eq!(&c[..3], &[32, 14 << 10, 0]);
        // The subnormal (1·2⁻⁹) lies 14 binades below 448: per-block path.
        assert_eq!(decode_scales(&scales[..3], &mut c), None);
        // Without 448: X_ref = −3 − 10 = −13; zero stays zero, signs carry over.
        let small = [scales[0], scales[2], scales[3], scales[4]];
        assert_eq!(decode_scales(&small, &mut c), Some(2f32.powi(-13)));
        assert_eq!(&c[..5], &[8 << 10, 1 << 4, 0, -(12 << 10), 0]);
        // All zero: every integer scale is zero.
        assert_eq!(decode_scales(&[0, 0x80], &mut c), Some(1.0));
        assert_eq!(&c[..2], &[0, 0]);
        // NaN (either sign): per-block path.
        assert_eq!(decode_scales(&[scales[0], 0x7f], &mut c), None);
        assert_eq!(decode_scales(&[0xff], &mut c), None);
    }

    /// The weight decoder's lane layout and weight-sum product against their
    /// definitions: byte `32k + 2j + e` holds input `16j + 2k + e`.
    #[test]
    fn decoded_chunk_layout() {
        if !is_x86_feature_detected!("avx2") || !is_x86_feature_detected!("fma") {
            return;
        }
        let codes: Vec<u8> = (0..128u32).map(|i| (i * 37 + 11) as u8).collect();
        let scales: Vec<i16> = (0..16).map(|j| 100 * j - 700).collect();
        let natural: Vec<i8> = codes
            .iter()
            .flat_map(|&b| {
                [
                    DOUBLED_SIGNED[usize::from(b & 15)],
                    DOUBLED_SIGNED[usize::from(b >> 4)],
                ]
            })
            .collect();
        let mut dst = [0u8; 256];
        // SAFETY: AVX2 and FMA were detected; 128 code bytes, 16 scales, 256 bytes out.
        let sum = unsafe { decode_chunk(codes.as_ptr(), scales.as_ptr(), dst.as_mut_ptr()) };
        for k in 0..8 {
            for j in 0..16 {
                for e in 0..2 {
                    assert_eq!(dst[32 * k + 2 * j + e] as i8, natural[16 * j + 2 * k + e]);
                }
            }
        }
        let want: i32 = (0..16)
            .map(|j| {
                i32::from(scales[j])
                    * natural[16 * j..][..16]
                        .iter()
                        .map(|&w| i32::from(w))
                        .sum::<i32>()
            })
            .sum();
        assert_eq!(sum, want);
    }
}
