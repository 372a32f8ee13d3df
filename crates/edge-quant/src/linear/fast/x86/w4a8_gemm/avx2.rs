//! The AVX2 kernel of the W4A8 prompt GEMM (see the parent module).
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
//! float scaling of [`super::super::avx2_int_gemm`] takes 22; the kernel is bound by
//! vector operations on Zen 3 (that VM retires about two per cycle whatever their
//! kind). The register tile is [`ROW_GROUP`] rows × 1 token: the activations must be
//! the unsigned (register) operand of `vpmaddubsw`, so rows share them and the weights
//! come from memory (L1).

use super::super::Avx2;
use super::{
    BLOCKS, CHUNK, CHUNK_BYTES, ChunkKernel, ColumnBand, DOUBLED_SIGNED, Decoded, Packed, ROW_GROUP,
};
use core::arch::x86_64::*;
use core::ops::Range;

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

/// [`ChunkKernel::pack_chunk`]: `rows[i]` = codes `16i..16i + 16` and `16(i + 8)..`, plus
/// 128, into [`lanes_by_block`] order.
#[target_feature(enable = "avx2,fma")]
fn pack_chunk(src: &[i8; CHUNK], dst: &mut [u8; CHUNK_BYTES]) {
    let offset = _mm256_set1_epi8(i8::MIN);
    let p = src.as_ptr();
    let mut rows = [_mm256_setzero_si256(); 8];
    for (i, row) in rows.iter_mut().enumerate() {
        // SAFETY: `src` holds 256 bytes: row i reads 16 bytes at 16i and 16(i + 8).
        let v = unsafe { _mm256_loadu2_m128i(p.add(16 * (i + 8)).cast(), p.add(16 * i).cast()) };
        *row = _mm256_xor_si256(v, offset);
    }
    // SAFETY: `dst` holds 256 bytes.
    unsafe { store_chunk(dst.as_mut_ptr(), lanes_by_block(rows)) };
}

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

/// `R ≤ ROW_GROUP` rows of a [`Decoded`] block against the tokens `ts`: for each row
/// `r` and token `t`, `out.row_mut(t)[r0 + r] = Σ_c s_a[c]·Σ_j c_j·Σ_{k∈j}
/// w_k·(q_k + 128)` (the offset and the row factor not yet removed). The rows' weights
/// stay in L1 while the tokens pass.
#[target_feature(enable = "avx2,fma")]
fn tile<const R: usize>(
    dec: &Decoded<i16>,
    rows: [usize; R],
    act: Packed<'_>,
    ts: Range<usize>,
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
pub(super) fn hsum4([a, b, c, d]: [__m256; 4]) -> __m128 {
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

impl ChunkKernel for Avx2 {
    /// The integer scales themselves, in block order.
    type Scale = i16;

    fn avx2_proof(self) -> Avx2 {
        self
    }

    fn pack_chunk(self, src: &[i8; CHUNK], dst: &mut [u8; CHUNK_BYTES]) {
        // SAFETY: the token exists only if `detect` found AVX2 and FMA.
        unsafe { pack_chunk(src, dst) }
    }

    fn decode_chunk(
        self,
        codes: &[u8; CHUNK / 2],
        c: &[i16; BLOCKS],
        dst: &mut [u8; CHUNK_BYTES],
        scales: &mut [i16; BLOCKS],
    ) -> i32 {
        *scales = *c;
        // SAFETY: the token proves AVX2 and FMA; 128 code bytes, 16 scales, 256 bytes
        // out.
        unsafe { decode_chunk(codes.as_ptr(), c.as_ptr(), dst.as_mut_ptr()) }
    }

    fn tile(
        self,
        dec: &Decoded<i16>,
        rows: &[usize],
        act: Packed<'_>,
        ts: Range<usize>,
        out: &mut ColumnBand<'_>,
        r0: usize,
    ) {
        // SAFETY: the token exists only if `detect` found AVX2, FMA and F16C.
        unsafe { tile_rows(dec, rows, act, ts, out, r0) }
    }
}

/// [`ChunkKernel::tile`]: whole groups through the 4-row tile, anything else row by
/// row. One target-feature function around both, so that the tiles inline into it
/// (standalone, the 4-row tile ran about 10% slower).
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_rows(
    dec: &Decoded<i16>,
    rows: &[usize],
    act: Packed<'_>,
    ts: Range<usize>,
    out: &mut ColumnBand<'_>,
    r0: usize,
) {
    match *rows {
        [a, b, c, d] => tile::<ROW_GROUP>(dec, [a, b, c, d], act, ts, out, r0),
        _ => {
            for &r in rows {
                tile::<1>(dec, [r], act, ts.clone(), out, r0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_layout, decode_and_pack};
    use super::*;

    /// Byte `32k + 2j + e` holds input `16j + 2k + e`, for the weights and the
    /// activations alike; the scales stay in block order.
    #[test]
    fn chunk_layout() {
        let Some(isa) = Avx2::detect() else {
            return;
        };
        let got = decode_and_pack(isa);
        assert_eq!(got.scales, got.c);
        assert_layout(&got, |at| {
            let (k, j, e) = (at / 32, at % 32 / 2, at % 2);
            16 * j + 2 * k + e
        });
    }
}
