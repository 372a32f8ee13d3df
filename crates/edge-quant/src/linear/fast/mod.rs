//! The fast linear path: the [`Isa`] kernel interface (one implementation per
//! [`SimdLevel`], chosen by the level's proof token from [`edge_core::simd`]), and the
//! driver that prepares activations, splits output rows over rayon tasks and runs an
//! ISA's kernels row by row.
//!
//! Per output row the weight is processed in segments of [`SEG`] inputs: a segment is
//! decoded into an L1-resident f32 buffer (or, for W4A4, offset E2M1 bytes plus
//! per-8-element scales) and then dotted with every token's activations, so each weight
//! byte is read from memory once per forward pass whatever the token count.
//!
//! Kernels may decode NVFP4 segments in a permuted element order that suits their
//! shuffles ([`Perm`]); the driver permutes the activations the same way once per call.

mod band;
mod driver;
mod gemm;
mod portable;
mod prepare;

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use driver::{forward, forward_group};

use band::ColumnBand;

/// Inputs per decoded weight segment. A multiple of every [`Perm::chunk`].
pub(crate) const SEG: usize = 2048;

/// With one token, rows of at least this many inputs are processed several at a time
/// (pairs for bf16/FP8, four for NVFP4 on AVX-512) so that each activation load serves
/// several rows: from here on the f32 activation row (32 KiB) no longer fits L1 next
/// to the weight streams, and dividing its L2 traffic pays. Below it the single-row
/// loop is faster (measured on the AVX-512 dev machine).
pub(crate) const PAIR_MIN_INPUTS: usize = 8192;

/// The instruction-set levels of the kernel families, and the level
/// [`crate::linear::Linear::forward`] runs at (the detected one, or the one
/// [`edge_core::simd::with_level`] forces): the one CPU-feature home is
/// [`edge_core::simd`], re-exported here for the paths users already have.
pub use edge_core::simd::{SimdLevel, level as simd_level};

/// `(start, len)` of each [`SEG`]-input segment of a row of `n_in` inputs.
pub(crate) fn segments(n_in: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n_in)
        .step_by(SEG)
        .map(move |k0| (k0, SEG.min(n_in - k0)))
}

/// An element order within fixed-size chunks of a row. Position `p` of a permuted
/// chunk holds element [`Perm::source`]`(p)` of the natural chunk; a row's trailing
/// partial chunk stays in natural order. The portable and NEON kernels take natural
/// order, the aarch64 integer kernels `EvenOdd(32)`, the x86 ones the others; each
/// order is compiled where a kernel reads it and in the tests, which check
/// [`Perm::apply`] on every host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Perm {
    /// Natural order.
    Natural,
    /// Chunks of `n` elements: the even elements first, then the odd ones (the low and
    /// high nibbles of `n/2` packed bytes).
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
    EvenOdd(usize),
    /// Chunks of 128: position `16j + i` holds element `8i + j` (nibble `j` of the
    /// `i`-th 32-bit word of 64 packed bytes).
    #[cfg(any(target_arch = "x86_64", test))]
    Nibble16x8,
    /// Chunks of 128: position `32j + w` holds element `4w + j` (nibble `j` of the
    /// `w`-th 16-bit word of 64 packed bytes; the bf16 one-token kernels).
    #[cfg(any(target_arch = "x86_64", test))]
    Nibble32x4,
}

impl Perm {
    /// Chunk length in elements (1 for natural order).
    pub(crate) fn chunk(self) -> usize {
        match self {
            Perm::Natural => 1,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
            Perm::EvenOdd(n) => n,
            #[cfg(any(target_arch = "x86_64", test))]
            Perm::Nibble16x8 | Perm::Nibble32x4 => 128,
        }
    }

    /// The natural index (within its chunk) of the element at position `p`: the
    /// definition [`Perm::apply`]'s specialised loops implement (tests check them
    /// against it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn source(self, p: usize) -> usize {
        match self {
            Perm::Natural => p,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
            Perm::EvenOdd(n) if p < n / 2 => 2 * p,
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
            Perm::EvenOdd(n) => 2 * (p - n / 2) + 1,
            #[cfg(any(target_arch = "x86_64", test))]
            Perm::Nibble16x8 => 8 * (p % 16) + p / 16,
            #[cfg(any(target_arch = "x86_64", test))]
            Perm::Nibble32x4 => 4 * (p % 32) + p / 32,
        }
    }

    /// Writes `src` (one row) into `dst` in this order.
    pub(crate) fn apply<T: Copy>(self, src: &[T], dst: &mut [T]) {
        let c = self.chunk();
        let full = src.len() / c * c;
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
        let chunks = src[..full].chunks_exact(c).zip(dst.chunks_exact_mut(c));
        // One loop per order, so the index arithmetic is constant-folded.
        match self {
            Perm::Natural => dst[..full].copy_from_slice(&src[..full]),
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64", test))]
            Perm::EvenOdd(n) => {
                for (s, d) in chunks {
                    let (even, odd) = d.split_at_mut(n / 2);
                    for ((e, o), pair) in even.iter_mut().zip(odd).zip(s.chunks_exact(2)) {
                        *e = pair[0];
                        *o = pair[1];
                    }
                }
            }
            #[cfg(any(target_arch = "x86_64", test))]
            Perm::Nibble16x8 => {
                for (s, d) in chunks {
                    for (j, dj) in d.chunks_exact_mut(16).enumerate() {
                        for (i, v) in dj.iter_mut().enumerate() {
                            *v = s[8 * i + j];
                        }
                    }
                }
            }
            #[cfg(any(target_arch = "x86_64", test))]
            Perm::Nibble32x4 => {
                for (s, d) in chunks {
                    for (j, dj) in d.chunks_exact_mut(32).enumerate() {
                        for (w, v) in dj.iter_mut().enumerate() {
                            *v = s[4 * w + j];
                        }
                    }
                }
            }
        }
        dst[full..].copy_from_slice(&src[full..]);
    }
}

/// Which 8-bit activations an [`A4Act`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum A4Kind {
    /// W4A4: doubled E2M1 codes, one E4M3 block scale per 16 inputs.
    Nvfp4,
    /// W4A8: int8 codes, one f32 scale per [`crate::int8::BLOCK`] inputs.
    Int8,
}

/// Activations of one W4A4 or W4A8 forward pass, prepared for an ISA's integer dot
/// products. Row `t` of each array belongs to token `t`.
pub(crate) struct A4Act {
    /// What the codes and scales are (read by the x86 kernels to pick the W4A8 GEMM).
    #[cfg_attr(
        not(target_arch = "x86_64"),
        expect(dead_code, reason = "only the x86 kernels tell W4A4 from W4A8 so far")
    )]
    pub kind: A4Kind,
    /// The 8-bit activations, `[tokens, in]`, in natural order: twice the E2M1 value of
    /// each code for W4A4 (−12..=12), the int8 code for W4A8 (−127..=127).
    pub natural: Vec<i8>,
    /// The same codes in the ISA's `A4_PERM` order.
    pub qa: Vec<i8>,
    /// The activation scale of each 8-element group (natural group order), `[tokens,
    /// in/8]`.
    pub sfa: Vec<f32>,
    /// `−12 · Σ qa` over each 8-element group, `[tokens, in/8]`: cancels the +12 offset
    /// of the unsigned weight bytes.
    pub negcorr: Vec<i32>,
    /// The same activations in an ISA's own layout for its prompt kernel, built once per
    /// forward pass by [`Isa::pack_a4`] and shared by every row task (empty when the
    /// ISA has none; the layout is private to that ISA's kernels; only x86 has one).
    #[cfg(target_arch = "x86_64")]
    pub packed: Vec<u32>,
}

/// Whole rows of an NVFP4 weight: their packed E2M1 codes (`n_in/2` bytes per row) and
/// E4M3 block scales (`n_in/16` per row).
#[derive(Clone, Copy)]
pub(crate) struct Nvfp4Rows<'a> {
    pub codes: &'a [u8],
    pub scales: &'a [u8],
    pub n_in: usize,
}

impl<'a> Nvfp4Rows<'a> {
    /// Rows `r0..r0 + rows` of `t`.
    pub(crate) fn of(t: &'a crate::Nvfp4Tensor, r0: usize, rows: usize) -> Self {
        let n_in = t.cols();
        Nvfp4Rows {
            codes: &t.codes()[r0 * n_in / 2..][..rows * n_in / 2],
            scales: &t.scales()[r0 * n_in / crate::nvfp4::BLOCK..]
                [..rows * n_in / crate::nvfp4::BLOCK],
            n_in,
        }
    }
}

/// One instruction set's kernels. Implementors are zero-sized tokens whose existence
/// proves the CPU supports the instructions (see each `detect`).
///
/// Conventions: `xs`/`qa`/`sfa`/`negcorr` start at the segment's first input of token 0
/// and token `t` is `stride` (inputs) or `gstride` (groups) further on; `acc[t]` is
/// added to, never overwritten; decoded FP8 and NVFP4 values carry a factor 2⁻⁸ (the
/// E4M3 scale unit of the f16 decoding trick) that the driver removes.
pub(crate) trait Isa: Copy + Send + Sync {
    /// Element order of [`Isa::decode_nvfp4`] output.
    const NVFP4_PERM: Perm;
    /// Element order of [`Isa::decode_w4`] weight bytes and of [`A4Act::qa`].
    const A4_PERM: Perm;

    /// `acc[t] += Σ_i w[i] · xs[t·stride + i]`.
    fn dot(self, w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]);

    /// Two dot products sharing each activation load: `[Σ w0·x, Σ w1·x]`.
    fn dot2(self, w0: &[f32], w1: &[f32], x: &[f32]) -> [f32; 2] {
        let mut acc = [0.0f32; 2];
        self.dot(w0, x, 0, &mut acc[..1]);
        self.dot(w1, x, 0, &mut acc[1..]);
        acc
    }

    /// Widens little-endian bf16 bytes (`2·dst.len()`) to f32.
    fn decode_bf16(self, src: &[u8], dst: &mut [f32]);

    /// Decodes E4M3 bytes to `e4m3(q) · 2⁻⁸` (NaN codes stay NaN).
    fn decode_fp8(self, src: &[u8], dst: &mut [f32]);

    /// Decodes NVFP4 codes (`dst.len()/2` bytes) and block scales (`dst.len()/16`) to
    /// `E2M1[q] · e4m3(SF) · 2⁻⁸` in [`Isa::NVFP4_PERM`] order.
    fn decode_nvfp4(self, codes: &[u8], scales: &[u8], dst: &mut [f32]);

    /// NVFP4 W4A16 for a tile of whole rows: `out[r·tokens + t] = Σ_k ŵ[r][k] ·
    /// xs[t·n_in + k]` for the `out.len()/tokens` rows whose codes and block scales are
    /// given, with `ŵ` as [`Isa::decode_nvfp4`] produces it and `xs` in that order
    /// (`out` is overwritten). The default decodes [`SEG`]-input segments into `buf`
    /// (at least `min(SEG, n_in)` floats) and calls [`Isa::dot`]; ISAs may fuse the two.
    #[allow(clippy::too_many_arguments)]
    fn nvfp4_rows(
        self,
        codes: &[u8],
        scales: &[u8],
        n_in: usize,
        xs: &[f32],
        tokens: usize,
        out: &mut [f32],
        buf: &mut [f32],
    ) {
        for (r, acc) in out.chunks_exact_mut(tokens).enumerate() {
            acc.fill(0.0);
            for (k0, len) in segments(n_in) {
                let e = r * n_in + k0;
                let w = &mut buf[..len];
                self.decode_nvfp4(&codes[e / 2..][..len / 2], &scales[e / 16..][..len / 16], w);
                self.dot(w, &xs[k0..], n_in, acc);
            }
        }
    }

    /// One token through bf16 rows with a fused kernel: `out[r] = Σ_k w[r][k] · x[k]`
    /// for the `out.len()` rows of little-endian bf16 bytes in `w` (`2·n_in` each).
    /// Returns `false`, writing nothing, where the ISA has no such kernel (the caller
    /// then decodes segments and calls [`Isa::dot`]).
    fn bf16_rows_one_token(self, _w: &[u8], _n_in: usize, _x: &[f32], _out: &mut [f32]) -> bool {
        false
    }

    /// Transposes one 8 × 8 block of f32: `dst[k·dst_stride + r] = src[r·src_stride + k]`
    /// for `r, k < 8` (default: element by element, through a block on the stack).
    fn transpose8x8(self, src: &[f32], src_stride: usize, dst: &mut [f32], dst_stride: usize) {
        let mut block = [[0.0f32; 8]; 8];
        for (r, row) in block.iter_mut().enumerate() {
            // Element by element: a `copy_from_slice` of this length is a memmove call.
            row.iter_mut()
                .zip(&src[r * src_stride..][..8])
                .for_each(|(d, &s)| *d = s);
        }
        for k in 0..8 {
            for (r, d) in dst[k * dst_stride..][..8].iter_mut().enumerate() {
                *d = block[r][k];
            }
        }
    }

    /// Lays one token's natural-order 8-bit codes out for the integer kernels: `qa` in
    /// [`Isa::A4_PERM`] order and `negcorr[g] = −12 · Σ nat[8g..8g + 8]` (cancelling
    /// the +12 offset of the weight bytes).
    fn layout_a4_codes(self, nat: &[i8], qa: &mut [i8], negcorr: &mut [i32]) {
        Self::A4_PERM.apply(nat, qa);
        a4_corrections(nat, negcorr);
    }

    /// Builds [`A4Act::packed`] for `tokens` tokens of `n_in` inputs, if this ISA's
    /// [`Isa::a4_rows`] reads a packed layout for that many tokens (default: nothing).
    fn pack_a4(self, _act: &mut A4Act, _n_in: usize, _tokens: usize) {}

    /// Decodes NVFP4 codes to `2·E2M1[q] + 12` bytes in [`Isa::A4_PERM`] order and
    /// block scales to `wsc[g] = e4m3(SF[g/2]) · 2⁻⁸` per 8-element group.
    fn decode_w4(self, codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]);

    /// Integer (W4A4 / W4A8) products for a tile of whole rows: `out[r·tokens + t] =
    /// Σ_g wsc[g] · sfa[t][g] · Σ_{k∈g} (wq[k] − 12) · qa[t][k]` over row `r`'s
    /// inputs, with `wq`, `wsc` as [`Isa::decode_w4`] produces them from the given
    /// codes and block scales (`out` is overwritten). The default decodes [`SEG`]-input
    /// segments and calls [`Isa::dot_a4`]; ISAs may fuse the two.
    fn a4_rows(
        self,
        codes: &[u8],
        scales: &[u8],
        n_in: usize,
        act: &A4Act,
        tokens: usize,
        out: &mut [f32],
    ) {
        a4_rows_by_segments(self, codes, scales, n_in, act, tokens, out);
    }

    /// Whether [`Isa::a4_rows_into`] has a kernel of its own for `act` (a prompt GEMM
    /// that finishes each output in one pass): the driver then hands its tasks output
    /// columns instead of tiles to transpose (default: none).
    fn a4_writes_columns(self, _act: &A4Act, _n_in: usize, _tokens: usize) -> bool {
        false
    }

    /// [`Isa::a4_rows`] for the `band.width()` given rows and `band.rows()` tokens,
    /// times `scale`, written into the rows' output columns: `band.row_mut(t)[r] =
    /// scale · Σ_g …`. The default runs [`Isa::a4_rows`] into a tile and copies it.
    fn a4_rows_into(self, w: Nvfp4Rows<'_>, act: &A4Act, scale: f32, band: &mut ColumnBand<'_>) {
        a4_rows_into_by_tile(self, w, act, scale, band);
    }

    /// `acc[t] += Σ_g wsc[g] · sfa[t][g] · Σ_{k∈g} (wq[k] − 12) · qa[t][k]`.
    #[allow(clippy::too_many_arguments)]
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
    );
}

/// The default [`Isa::a4_rows_into`]: [`Isa::a4_rows`] into a tile, then copied.
pub(crate) fn a4_rows_into_by_tile<I: Isa>(
    isa: I,
    w: Nvfp4Rows<'_>,
    act: &A4Act,
    scale: f32,
    band: &mut ColumnBand<'_>,
) {
    let tokens = band.rows();
    let mut tile = vec![0.0; band.width() * tokens];
    isa.a4_rows(w.codes, w.scales, w.n_in, act, tokens, &mut tile);
    for t in 0..tokens {
        for (r, y) in band.row_mut(t).iter_mut().enumerate() {
            *y = scale * tile[r * tokens + t];
        }
    }
}

/// `negcorr[g] = −12 · Σ nat[8g..8g + 8]` for every whole 8-element group.
pub(crate) fn a4_corrections(nat: &[i8], negcorr: &mut [i32]) {
    for (c, group) in negcorr.iter_mut().zip(nat.chunks_exact(8)) {
        *c = -12 * group.iter().map(|&q| i32::from(q)).sum::<i32>();
    }
}

/// The default [`Isa::a4_rows`]: each [`SEG`]-input segment decoded once with
/// [`Isa::decode_w4`], then [`Isa::dot_a4`] for every token.
pub(crate) fn a4_rows_by_segments<I: Isa>(
    isa: I,
    codes: &[u8],
    scales: &[u8],
    n_in: usize,
    act: &A4Act,
    tokens: usize,
    out: &mut [f32],
) {
    let mut wq = vec![0u8; SEG.min(n_in)];
    let mut wsc = vec![0.0f32; SEG.min(n_in) / 8];
    for (r, acc) in out.chunks_exact_mut(tokens).enumerate() {
        acc.fill(0.0);
        for (k0, len) in segments(n_in) {
            let e = r * n_in + k0;
            let (wq, wsc) = (&mut wq[..len], &mut wsc[..len / 8]);
            isa.decode_w4(
                &codes[e / 2..][..len / 2],
                &scales[e / 16..][..len / 16],
                wq,
                wsc,
            );
            let g0 = k0 / 8;
            let (qa, sfa, nc) = (&act.qa[k0..], &act.sfa[g0..], &act.negcorr[g0..]);
            isa.dot_a4(wq, wsc, qa, sfa, nc, n_in, n_in / 8, acc);
        }
    }
}

#[cfg(test)]
mod tests;
