//! The AVX-512 VNNI kernel of the W4A8 prompt GEMM (see the parent module).
//!
//! `vpdpbusd` multiplies 64 unsigned activation bytes (`q + 128`) by 64 signed weight
//! bytes and adds each group of four products into a 32-bit lane. A chunk's bytes are
//! laid out so that lane `l` of each of its four vectors holds four inputs of one block
//! ([`block_of_lane`]), so four `vpdpbusd` leave each block's exact sum in its own lane
//! (at most 16·255·12 = 48 960). One conversion, one multiply (the row's integer block
//! scales, as exact floats, times the token's chunk scale) and one FMA finish the chunk:
//! 7 operations per 256 inputs and token, against 19 half-width ones for AVX2.
//!
//! The register tile is [`ROW_GROUP`] rows × [`TOKENS`] tokens: the tokens' activations
//! stay in registers while each row's weights are loaded once per chunk. Three tokens
//! (12 activation vectors, 12 sums) run 4–10% faster than two in the prefill bench;
//! four spill and run slower.

use super::super::{Avx2, Avx512};
use super::avx2::hsum4;
use super::{
    BLOCKS, CHUNK, CHUNK_BYTES, ChunkKernel, ColumnBand, DOUBLED_SIGNED, Decoded, Packed, ROW_GROUP,
};
use core::arch::x86_64::*;
use core::ops::Range;

/// Tokens of the register tile.
const TOKENS: usize = 3;

/// The block whose inputs lane `l` (of 16) holds: lane `4s + m` of a chunk's vectors
/// comes from 128-bit segment `s` of the `m`-th vector before the 4 × 4 dword transpose
/// ([`transpose_dwords`]), which holds block `8·(m/2) + 2s + m%2` (the order in which
/// [`decode_chunk`] produces the weights).
const fn block_of_lane(l: usize) -> usize {
    let (s, m) = (l / 4, l % 4);
    8 * (m / 2) + 2 * s + m % 2
}

/// A 4 × 4 transpose of dwords in each 128-bit segment: dword `m` of segment `s` of
/// output `k` is dword `k` of segment `s` of input `m`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn transpose_dwords(u: [__m512i; 4]) -> [__m512i; 4] {
    let t0 = _mm512_unpacklo_epi32(u[0], u[1]);
    let t1 = _mm512_unpackhi_epi32(u[0], u[1]);
    let t2 = _mm512_unpacklo_epi32(u[2], u[3]);
    let t3 = _mm512_unpackhi_epi32(u[2], u[3]);
    [
        _mm512_unpacklo_epi64(t0, t2),
        _mm512_unpackhi_epi64(t0, t2),
        _mm512_unpacklo_epi64(t1, t3),
        _mm512_unpackhi_epi64(t1, t3),
    ]
}

/// Stores a chunk's four vectors.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn store_chunk(dst: &mut [u8; CHUNK_BYTES], v: [__m512i; 4]) {
    for (k, x) in v.into_iter().enumerate() {
        // SAFETY: vector k covers bytes [64k, 64k + 64) of the 256.
        unsafe { _mm512_storeu_si512(dst.as_mut_ptr().add(64 * k).cast(), x) };
    }
}

/// [`ChunkKernel::pack_chunk`]: natural vector `m` holds blocks `4m..4m + 4`; segment
/// shuffles bring them into [`decode_chunk`]'s block order, then the transpose.
#[target_feature(enable = "avx512f,avx512bw")]
fn pack_chunk(src: &[i8; CHUNK], dst: &mut [u8; CHUNK_BYTES]) {
    let offset = _mm512_set1_epi8(i8::MIN);
    let mut v = [_mm512_setzero_si512(); 4];
    for (m, x) in v.iter_mut().enumerate() {
        // SAFETY: 64 bytes at 64m of the 256.
        let raw = unsafe { _mm512_loadu_si512(src.as_ptr().add(64 * m).cast()) };
        *x = _mm512_xor_si512(raw, offset);
    }
    // Even blocks of each half (segments 0 and 2 of two vectors), then odd ones.
    let u = [
        _mm512_shuffle_i32x4::<0b10_00_10_00>(v[0], v[1]),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(v[0], v[1]),
        _mm512_shuffle_i32x4::<0b10_00_10_00>(v[2], v[3]),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(v[2], v[3]),
    ];
    store_chunk(dst, transpose_dwords(u));
}

/// [`ChunkKernel::decode_chunk`]: per 64 code bytes (half a chunk), the nibbles'
/// doubled values interleave back into input order per 128-bit segment, the low
/// unpack giving the even blocks and the high one the odd blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn decode_chunk(
    codes: &[u8; CHUNK / 2],
    c: &[i16; BLOCKS],
    dst: &mut [u8; CHUNK_BYTES],
    scales: &mut [f32; BLOCKS],
) -> i32 {
    // SAFETY: the table holds 16 bytes.
    let table = unsafe { _mm_loadu_si128(DOUBLED_SIGNED.as_ptr().cast()) };
    let table = _mm512_broadcast_i32x4(table);
    let nibble = _mm512_set1_epi8(0x0f);
    let mut u = [_mm512_setzero_si512(); 4];
    for h in 0..2 {
        // SAFETY: 64 bytes at 64h of the 128.
        let v = unsafe { _mm512_loadu_si512(codes.as_ptr().add(64 * h).cast()) };
        let lo = _mm512_shuffle_epi8(table, _mm512_and_si512(v, nibble));
        let hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble));
        u[2 * h] = _mm512_unpacklo_epi8(lo, hi);
        u[2 * h + 1] = _mm512_unpackhi_epi8(lo, hi);
    }
    let w = transpose_dwords(u);
    store_chunk(dst, w);
    let mut lane_scales = [0i32; BLOCKS];
    for (l, (s, ls)) in scales.iter_mut().zip(&mut lane_scales).enumerate() {
        let cj = c[block_of_lane(l)];
        *s = f32::from(cj);
        *ls = i32::from(cj);
    }
    // Each lane's block weight sum (at most 16·12), times its scale.
    let ones = _mm512_set1_epi8(1);
    let sums = w.iter().fold(_mm512_setzero_si512(), |acc, &x| {
        _mm512_dpbusd_epi32(acc, ones, x)
    });
    // SAFETY: 16 lanes of i32.
    let cs = unsafe { _mm512_loadu_si512(lane_scales.as_ptr().cast()) };
    _mm512_reduce_add_epi32(_mm512_mullo_epi32(sums, cs))
}

/// `R` rows of a [`Decoded`] block against the tokens `ts` (a multiple of `T` of them),
/// `T` tokens at a time (see [`ChunkKernel::tile`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
fn tile<const R: usize, const T: usize>(
    dec: &Decoded<f32>,
    rows: [usize; R],
    act: Packed<'_>,
    ts: Range<usize>,
    out: &mut ColumnBand<'_>,
    r0: usize,
) {
    let chunks = dec.chunks;
    assert!(chunks == act.chunks && ts.end <= act.tokens && ts.len().is_multiple_of(T));
    // Bounds: every row's `chunks` chunks of weights and scales, and every token's
    // chunks of bytes and scales.
    assert!(rows.iter().all(|&r| r < dec.factors.len()));
    assert!(act.bytes.len() >= act.tokens * chunks * CHUNK_BYTES);
    assert!(act.scales.len() >= act.tokens * chunks);
    let (mut w, mut cs) = ([core::ptr::null(); R], [core::ptr::null(); R]);
    for i in 0..R {
        let (weights, scales) = dec.row(rows[i]);
        w[i] = weights.as_ptr();
        cs[i] = scales.as_ptr();
    }
    for t0 in ts.step_by(T) {
        let mut acc = [[_mm512_setzero_ps(); T]; R];
        for c in 0..chunks {
            let mut av = [[_mm512_setzero_si512(); 4]; T];
            let mut sa = [_mm512_setzero_ps(); T];
            for j in 0..T {
                // SAFETY: chunk c < chunks of token t0 + j < tokens (asserted above).
                unsafe {
                    let a = act
                        .bytes
                        .as_ptr()
                        .add(((t0 + j) * chunks + c) * CHUNK_BYTES);
                    for (k, v) in av[j].iter_mut().enumerate() {
                        *v = _mm512_loadu_si512(a.add(64 * k).cast());
                    }
                    sa[j] = _mm512_set1_ps(*act.scales.get_unchecked(c * act.tokens + t0 + j));
                }
            }
            for i in 0..R {
                // SAFETY: chunk c < chunks of row i's weights and scales.
                let (wv, sc) = unsafe {
                    let p = w[i].add(CHUNK_BYTES * c);
                    let wv = [
                        _mm512_loadu_si512(p.cast()),
                        _mm512_loadu_si512(p.add(64).cast()),
                        _mm512_loadu_si512(p.add(128).cast()),
                        _mm512_loadu_si512(p.add(192).cast()),
                    ];
                    (wv, _mm512_loadu_ps(cs[i].add(BLOCKS * c)))
                };
                for j in 0..T {
                    let mut d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), av[j][0], wv[0]);
                    d = _mm512_dpbusd_epi32(d, av[j][1], wv[1]);
                    d = _mm512_dpbusd_epi32(d, av[j][2], wv[2]);
                    d = _mm512_dpbusd_epi32(d, av[j][3], wv[3]);
                    let f = _mm512_mul_ps(sc, sa[j]);
                    acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), f, acc[i][j]);
                }
            }
        }
        for j in 0..T {
            let y = &mut out.row_mut(t0 + j)[r0..];
            if R == ROW_GROUP {
                let mut sums = [0.0f32; ROW_GROUP];
                let h = hsum4([
                    halves(acc[0][j]),
                    halves(acc[1][j]),
                    halves(acc[2][j]),
                    halves(acc[3][j]),
                ]);
                // SAFETY: `sums` holds 4 floats.
                unsafe { _mm_storeu_ps(sums.as_mut_ptr(), h) };
                for (&r, s) in rows.iter().zip(sums) {
                    y[r] = s;
                }
            } else {
                for (&r, a) in rows.iter().zip(&acc) {
                    y[r] = _mm512_reduce_add_ps(a[j]);
                }
            }
        }
    }
}

/// The sum of a vector's two 256-bit halves.
#[inline]
#[target_feature(enable = "avx512f,avx2")]
fn halves(v: __m512) -> __m256 {
    let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v));
    _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(high))
}

impl ChunkKernel for Avx512 {
    /// The integer scales as exact floats, in [`block_of_lane`] order.
    type Scale = f32;

    fn avx2_proof(self) -> Avx2 {
        self.avx2()
    }

    fn pack_chunk(self, src: &[i8; CHUNK], dst: &mut [u8; CHUNK_BYTES]) {
        // SAFETY: the token exists only if `detect` found AVX-512 F and BW.
        unsafe { pack_chunk(src, dst) }
    }

    fn decode_chunk(
        self,
        codes: &[u8; CHUNK / 2],
        c: &[i16; BLOCKS],
        dst: &mut [u8; CHUNK_BYTES],
        scales: &mut [f32; BLOCKS],
    ) -> i32 {
        // SAFETY: the token exists only if `detect` found AVX-512 F, BW and VNNI.
        unsafe { decode_chunk(codes, c, dst, scales) }
    }

    fn tile(
        self,
        dec: &Decoded<f32>,
        rows: &[usize],
        act: Packed<'_>,
        ts: Range<usize>,
        out: &mut ColumnBand<'_>,
        r0: usize,
    ) {
        let paired = ts.start..ts.end - ts.len() % TOKENS;
        let last = paired.end..ts.end;
        // SAFETY (every call): the token exists only if `detect` found AVX-512 F, BW,
        // VNNI and the AVX2 set.
        match *rows {
            [a, b, c, d] => unsafe {
                let rows = [a, b, c, d];
                tile::<ROW_GROUP, TOKENS>(dec, rows, act, paired, out, r0);
                // A sliver of 32 tokens leaves two: one pass over the rows for both.
                match last.len() {
                    2 => tile::<ROW_GROUP, 2>(dec, rows, act, last, out, r0),
                    _ => tile::<ROW_GROUP, 1>(dec, rows, act, last, out, r0),
                }
            },
            _ => {
                for &r in rows {
                    unsafe {
                        tile::<1, TOKENS>(dec, [r], act, paired.clone(), out, r0);
                        tile::<1, 1>(dec, [r], act, last.clone(), out, r0);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_layout, decode_and_pack};
    use super::*;

    /// Byte `64k + 4l + e` (lane `l` of vector `k`) holds input `16·block_of_lane(l) +
    /// 4k + e`, for the weights and the activations alike, and the scales follow the
    /// lanes; every block has a lane.
    #[test]
    fn chunk_layout() {
        let Some(isa) = Avx512::detect() else {
            return;
        };
        let got = decode_and_pack(isa);
        let blocks: Vec<usize> = (0..BLOCKS).map(block_of_lane).collect();
        let mut sorted = blocks.clone();
        sorted.sort_unstable();
        assert!(sorted.iter().copied().eq(0..BLOCKS), "{blocks:?}");
        for (&scale, &b) in got.scales.iter().zip(&blocks) {
            assert_eq!(scale, f32::from(got.c[b]));
        }
        assert_layout(&got, |at| {
            let (k, l, e) = (at / 64, at % 64 / 4, at % 4);
            16 * block_of_lane(l) + 4 * k + e
        });
    }
}
