//! W4A8 rows for prompts: a GEMM of int8 activations (one scale per 256 inputs) and
//! NVFP4 weights whose block scales are applied as exact integers, with one kernel per
//! ISA ([`ChunkKernel`]): AVX2 `vpmaddubsw` ([`avx2`]) and AVX-512 VNNI `vpdpbusd`
//! ([`vnni`]).
//!
//! An E4M3 block scale is `M·2^X` with an integer `M ≤ 15`. Relative to its row's
//! largest exponent less [`SCALE_BITS`], every block scale within `2^SCALE_BITS` of
//! the largest is an exact integer `c ≤ 15·2^10` ([`decode_scales`]); the row's factor
//! `2^X_ref` is applied once per output. Rows with a block scale further below the
//! largest, or a NaN, take the per-block segment path ([`a4_rows_by_segments`]) instead
//! (exact as well, only slower).
//!
//! The activations are the unsigned operand of both ISAs' byte products, so they are
//! stored as `q + 128`; the offset is removed once per row and token afterwards
//! ([`Offsets::apply`]): it adds `128·Σ_j c_j·W_j` per chunk, with `W_j` the block's
//! weight sum.
//!
//! Blocking: rows are decoded [`ROW_BLOCK`] at a time over all their inputs (kept in
//! L2), the tokens pass in slivers of [`SLIVER_TOKENS`] (their activations stay in
//! L2), and the kernel's register tile covers up to [`ROW_GROUP`] rows. Each output is
//! finished in one pass, so the kernel writes its rows' columns of the `[tokens, out]`
//! result directly ([`ColumnBand`]) instead of a tile to transpose (that transpose, its
//! zeroed buffer and a scaling pass took 14% of a 512-token prefill).

pub(super) mod avx2;
pub(super) mod vnni;

use super::super::{A4Act, A4Kind, ColumnBand, Isa, Nvfp4Rows, a4_rows_by_segments};
use super::Avx2;
use crate::int8;
use core::ops::Range;

/// Inputs per chunk: one activation scale, sixteen 16-input weight blocks.
const CHUNK: usize = int8::BLOCK;
/// Weight blocks per chunk.
const BLOCKS: usize = CHUNK / 16;
/// Bytes per chunk's packed activations or decoded weights.
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

/// The ISA-specific half of the GEMM: the byte order of a chunk's activations and
/// weights (the same for both, so that lane `i` of a product meets its own weight),
/// the order of its block scales, and the register tile. The token type proves the
/// kernel's CPU features.
pub(super) trait ChunkKernel: Copy {
    /// A block scale as the tile reads it.
    type Scale: Copy + Default;

    /// The AVX2 proof every kernel's CPU also gives ([`Offsets::apply`] uses it).
    fn avx2_proof(self) -> Avx2;

    /// One chunk's 256 int8 codes as `q + 128` bytes in the kernel's order.
    fn pack_chunk(self, src: &[i8; CHUNK], dst: &mut [u8; CHUNK_BYTES]);

    /// Decodes one chunk's 128 code bytes (natural NVFP4 packing: input `2i` in the low
    /// nibble of byte `i`) into signed doubled weights (`2·E2M1`) in the kernel's
    /// order, and its integer block scales `c` into `scales` (the kernel's order and
    /// type); returns `Σ_j c_j·W_j`.
    fn decode_chunk(
        self,
        codes: &[u8; CHUNK / 2],
        c: &[i16; BLOCKS],
        dst: &mut [u8; CHUNK_BYTES],
        scales: &mut [Self::Scale; BLOCKS],
    ) -> i32;

    /// The rows `rows` (at most [`ROW_GROUP`], all on the integer path) of `dec`
    /// against the tokens `ts`: `out.row_mut(t)[r0 + r] = Σ_c s_a[c]·Σ_j c_j·Σ_{k∈j}
    /// w_k·(q_k + 128)` (the offset and the row factor not yet removed).
    fn tile(
        self,
        dec: &Decoded<Self::Scale>,
        rows: &[usize],
        act: Packed<'_>,
        ts: Range<usize>,
        out: &mut ColumnBand<'_>,
        r0: usize,
    );
}

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

/// All tokens' int8 activations in `kernel`'s layout ([`gemm_words`]): per token and
/// chunk the bytes of [`ChunkKernel::pack_chunk`] (inputs past the row's end as a zero
/// code), then the chunks' scales. Built once per forward pass and read by every row
/// task.
pub(super) fn pack<K: ChunkKernel>(kernel: K, act: &A4Act, n_in: usize, tokens: usize) -> Vec<u32> {
    let chunks = n_in.div_ceil(CHUNK);
    let mut packed = vec![0u32; gemm_words(n_in, tokens)];
    let (bytes, scales) = packed.split_at_mut(tokens * chunks * CHUNK_BYTES / 4);
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(bytes);
    let groups = n_in / 8;
    let mut padded = [0i8; CHUNK];
    for (t, dst) in bytes.chunks_exact_mut(chunks * CHUNK_BYTES).enumerate() {
        let codes = &act.natural[t * n_in..][..n_in];
        for (c, dst) in dst.chunks_exact_mut(CHUNK_BYTES).enumerate() {
            let dst = dst.try_into().expect("chunks_exact gives whole chunks");
            kernel.pack_chunk(whole_or_padded(&codes[CHUNK * c..], &mut padded), dst);
            // Group 32c is the block's first; every group of a block has its scale.
            scales[c * tokens + t] = act.sfa[t * groups + c * (CHUNK / 8)].to_bits();
        }
    }
    packed
}

/// E2M1 codes to signed doubled values (`2·E2M1`, −12..=12), for `vpshufb`.
const DOUBLED_SIGNED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The first `N` elements of `src`, or, where it is shorter (a row's last chunk),
/// `src` copied into `padded` with zeros after it (a zero code).
fn whole_or_padded<'a, T: Copy + Default, const N: usize>(
    src: &'a [T],
    padded: &'a mut [T; N],
) -> &'a [T; N] {
    match src.first_chunk::<N>() {
        Some(whole) => whole,
        None => {
            padded[..src.len()].copy_from_slice(src);
            padded[src.len()..].fill(T::default());
            padded
        }
    }
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
/// table lookups: this runs once per weight block and GEMM call, compiled with AVX2
/// ([`decode_scales_avx2`]).
#[inline(always)]
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

/// [`decode_scales`] compiled for AVX2 (`_` proves it).
#[target_feature(enable = "avx2,fma")]
fn decode_scales_avx2(_: Avx2, scales: &[u8], c: &mut [i16]) -> Option<f32> {
    decode_scales(scales, c)
}

/// A block of rows decoded for the tile: per row and chunk, 256 weight bytes and 16
/// block scales; per row and chunk the offset correction `128·Σ_j c_j·W_j`; per row
/// the factor `2^X_ref` and whether it takes the integer path at all.
pub(super) struct Decoded<S> {
    chunks: usize,
    weights: Vec<u8>,
    scales: Vec<S>,
    corrections: Vec<f32>,
    factors: Vec<f32>,
    integer: Vec<bool>,
    /// One row's integer scales, before the kernel reorders them.
    row_scales: Vec<i16>,
}

impl<S: Copy + Default> Decoded<S> {
    fn new(rows: usize, chunks: usize) -> Self {
        Decoded {
            chunks,
            weights: vec![0; rows * chunks * CHUNK_BYTES],
            scales: vec![S::default(); rows * chunks * BLOCKS],
            corrections: vec![0.0; rows * chunks],
            factors: vec![0.0; rows],
            integer: vec![false; rows],
            row_scales: vec![0; chunks * BLOCKS],
        }
    }

    /// Decodes `rows` rows of `n_in` inputs (`codes`, `scales` start at the first).
    fn decode<K: ChunkKernel<Scale = S>>(
        &mut self,
        kernel: K,
        codes: &[u8],
        scales: &[u8],
        n_in: usize,
        rows: usize,
    ) {
        let chunks = self.chunks;
        let (cb, sb) = (n_in / 2, n_in / 16);
        let mut padded = [0u8; CHUNK / 2];
        for r in 0..rows {
            let row = &scales[r * sb..][..sb];
            // SAFETY: the kernel's token proves the AVX2 set.
            let factor =
                unsafe { decode_scales_avx2(kernel.avx2_proof(), row, &mut self.row_scales) };
            let Some(factor) = factor else {
                self.integer[r] = false;
                continue;
            };
            self.integer[r] = true;
            self.factors[r] = factor;
            let codes = &codes[r * cb..][..cb];
            let w = &mut self.weights[r * chunks * CHUNK_BYTES..][..chunks * CHUNK_BYTES];
            let s = &mut self.scales[r * chunks * BLOCKS..][..chunks * BLOCKS];
            let corr = &mut self.corrections[r * chunks..][..chunks];
            let parts = w
                .chunks_exact_mut(CHUNK_BYTES)
                .zip(s.chunks_exact_mut(BLOCKS));
            let parts = parts.zip(self.row_scales.chunks_exact(BLOCKS)).zip(corr);
            for (c, (((dst, s), cs), corr)) in parts.enumerate() {
                let src = whole_or_padded(&codes[c * CHUNK / 2..], &mut padded);
                let whole = "chunks_exact gives whole chunks";
                let (dst, s) = (dst.try_into().expect(whole), s.try_into().expect(whole));
                let sum = kernel.decode_chunk(src, cs.try_into().expect(whole), dst, s);
                *corr = 128.0 * sum as f32;
            }
        }
    }

    /// Row `r`'s decoded weights and scales (every chunk).
    fn row(&self, r: usize) -> (&[u8], &[S]) {
        let c = self.chunks;
        (
            &self.weights[r * c * CHUNK_BYTES..][..c * CHUNK_BYTES],
            &self.scales[r * c * BLOCKS..][..c * BLOCKS],
        )
    }
}

/// The packed activations of a forward pass: per token `chunks` chunks of bytes, and
/// the scales chunk-major (`scales[c·tokens + t]`).
#[derive(Clone, Copy)]
pub(super) struct Packed<'a> {
    bytes: &'a [u8],
    scales: &'a [f32],
    tokens: usize,
    chunks: usize,
}

impl Packed<'_> {
    /// Token `t`'s scale of chunk `c`.
    fn scale(&self, t: usize, c: usize) -> f32 {
        self.scales[c * self.tokens + t]
    }
}

/// W4A8 rows for many tokens (see [`crate::linear::fast::Isa::a4_rows_into`]): the
/// band's `band.width()` rows `w` for its `band.rows()` tokens, times `scale`, into the
/// band. `act` must hold [`pack`]'s layout for this `kernel` ([`can_run`]); `isa`
/// (whose `A4_PERM` ordered `act.qa`) runs the per-block rows.
pub(super) fn gemm<I: Isa, K: ChunkKernel>(
    isa: I,
    kernel: K,
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
        dec.decode(kernel, &codes[rb * cb..], &scales[rb * sb..], n_in, nr);
        let fast: Vec<usize> = (0..nr).filter(|&r| dec.integer[r]).collect();
        let offsets = Offsets::new(&dec, nr, scale);
        for t0 in (0..tokens).step_by(SLIVER_TOKENS) {
            let sliver = t0..tokens.min(t0 + SLIVER_TOKENS);
            let mut groups = fast.chunks_exact(ROW_GROUP);
            for g in groups.by_ref() {
                kernel.tile(&dec, g, packed, sliver.clone(), band, rb);
            }
            for r in groups.remainder() {
                kernel.tile(
                    &dec,
                    core::slice::from_ref(r),
                    packed,
                    sliver.clone(),
                    band,
                    rb,
                );
            }
            // While the sliver's outputs are in L1.
            // SAFETY: the kernel's token proves the AVX2 set.
            unsafe { offsets.apply(kernel.avx2_proof(), packed, sliver, band, rb) };
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
    fn new<S>(dec: &Decoded<S>, nr: usize, scale: f32) -> Self {
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
    /// (`_` proves AVX2 and FMA.)
    #[target_feature(enable = "avx2,fma")]
    fn apply(
        &self,
        _: Avx2,
        act: Packed<'_>,
        ts: Range<usize>,
        band: &mut ColumnBand<'_>,
        r0: usize,
    ) {
        use core::arch::x86_64::*;
        let nr = self.factors.len();
        let whole = nr / 8 * 8;
        let mut s = vec![0.0f32; self.corr.len() / nr.max(1)];
        for t in ts {
            for (c, s) in s.iter_mut().enumerate() {
                *s = act.scale(t, c);
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

    /// What a kernel made of [`sample_chunk`] and of a chunk of activations.
    pub(super) struct ChunkSample<S> {
        /// Natural-order doubled weights and activation codes, the integer scales.
        pub natural: Vec<i8>,
        pub act: [i8; CHUNK],
        pub c: [i16; BLOCKS],
        /// The kernel's decoded weights, scales and packed activations.
        pub weights: [u8; CHUNK_BYTES],
        pub scales: [S; BLOCKS],
        pub packed: [u8; CHUNK_BYTES],
    }

    /// Runs `kernel`'s chunk decoding and packing on [`sample_chunk`] and checks the
    /// returned weight-sum product; the caller checks the layout.
    pub(super) fn decode_and_pack<K: ChunkKernel>(kernel: K) -> ChunkSample<K::Scale> {
        let (codes, natural, c, want) = sample_chunk();
        let mut weights = [0u8; CHUNK_BYTES];
        let mut scales = [K::Scale::default(); BLOCKS];
        assert_eq!(
            kernel.decode_chunk(&codes, &c, &mut weights, &mut scales),
            want
        );
        let act: [i8; CHUNK] = core::array::from_fn(|i| (i as i32 * 7 - 128) as i8);
        let mut packed = [0u8; CHUNK_BYTES];
        kernel.pack_chunk(&act, &mut packed);
        ChunkSample {
            natural,
            act,
            c,
            weights,
            scales,
            packed,
        }
    }

    /// Byte `at` of the decoded weights and of the packed activations holds input
    /// `input_at(at)` of the chunk (every one of the 256 bytes is checked).
    pub(super) fn assert_layout<S>(got: &ChunkSample<S>, input_at: impl Fn(usize) -> usize) {
        for at in 0..CHUNK_BYTES {
            let input = input_at(at);
            assert_eq!(
                got.weights[at] as i8, got.natural[input],
                "weight byte {at}"
            );
            let packed = i32::from(got.packed[at]);
            assert_eq!(
                packed,
                i32::from(got.act[input]) + 128,
                "activation byte {at}"
            );
        }
    }

    /// A chunk of code bytes, their natural-order doubled weights and 16 integer scales,
    /// and the `Σ_j c_j·W_j` a kernel's [`ChunkKernel::decode_chunk`] must return.
    fn sample_chunk() -> ([u8; 128], Vec<i8>, [i16; 16], i32) {
        let codes: [u8; 128] = core::array::from_fn(|i| (i as u32 * 37 + 11) as u8);
        let scales: [i16; 16] = core::array::from_fn(|j| 100 * j as i16 - 700);
        let natural: Vec<i8> = codes
            .iter()
            .flat_map(|&b| {
                [
                    DOUBLED_SIGNED[usize::from(b & 15)],
                    DOUBLED_SIGNED[usize::from(b >> 4)],
                ]
            })
            .collect();
        let sum = (0..16)
            .map(|j| {
                let w: i32 = natural[16 * j..][..16].iter().map(|&w| i32::from(w)).sum();
                i32::from(scales[j]) * w
            })
            .sum();
        (codes, natural, scales, sum)
    }
}
