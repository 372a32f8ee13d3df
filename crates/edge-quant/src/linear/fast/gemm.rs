//! The bf16-activation GEMM used for prompts ([`crate::linear::ActivationQuant::Bf16`] with several
//! tokens): activations and weights are packed as bf16 pairs and a register-blocked
//! micro-kernel ([`Bf16Kernel`]) multiplies [`MR`] tokens by [`NR`] outputs at a time.
//!
//! Every weight format the GEMM takes (bf16, FP8 E4M3, NVFP4 `E2M1·E4M3`) is exactly
//! representable in bf16 once its per-tensor factor is set aside, so the only rounding
//! is that of the activations (round to nearest even), the same rounding the one-token
//! path applies; products are exact and sums are f32.
//!
//! Work split: rayon tasks own blocks of [`NR`] output features. A task decodes its
//! weight rows once per [`KC`]-input chunk into an L2-resident panel and runs the
//! micro-kernel over every token tile, so each weight byte is read and decoded once per
//! call whatever the token count (the property the prompt path lives on).

use super::{Isa, Perm};
use crate::linear::{Linear, LinearWeight};
use crate::nvfp4::BLOCK;
use rayon::prelude::*;

/// Tokens per micro-kernel tile.
pub(crate) const MR: usize = 8;
/// Output features per micro-kernel tile (three 16-lane vectors).
pub(crate) const NR: usize = 48;
/// Inputs per packed weight chunk: a multiple of every permutation chunk and of the
/// NVFP4 block, small enough that a `KC × NR` bf16 panel (192 KiB) stays in L2.
const KC: usize = 2048;

/// The prompt path takes over from the per-row kernels at this many tokens (below it,
/// packing costs more than the register blocking saves).
pub(crate) const GEMM_MIN_TOKENS: usize = 8;

/// A micro-kernel: `c[i·NR + j] (+)= Σ_p a[p·MR + i] ⊙ b[p·NR + j]` for `i < MR`,
/// `j < NR`, where each `u32` holds two bf16 values (low half first) and `⊙` is the sum
/// of the two products, accumulated in f32. `a` and `b` hold the same number of pairs.
/// With `accumulate` false `c` is overwritten (the first input chunk), else added to.
pub(crate) trait Bf16Kernel: Copy + Send + Sync {
    /// Runs one tile; see the trait docs.
    fn tile(self, a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool);
}

/// The portable micro-kernel (the GEMM's oracle and its path on CPUs without a bf16
/// dot-product instruction when the portable level is forced).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PortableKernel;

impl Bf16Kernel for PortableKernel {
    fn tile(self, a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
        if !accumulate {
            c[..MR * NR].fill(0.0);
        }
        let lo = |v: u32| f32::from_bits(v << 16);
        let hi = |v: u32| f32::from_bits(v & 0xffff_0000);
        for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
            for (&av, ci) in ap.iter().zip(c.chunks_exact_mut(NR)) {
                let (a0, a1) = (lo(av), hi(av));
                for (cij, &bv) in ci.iter_mut().zip(bp) {
                    *cij += a0 * lo(bv) + a1 * hi(bv);
                }
            }
        }
    }
}

/// The bf16 bits of `x` rounded to nearest even; NaN stays a (quiet) NaN.
#[inline]
pub(crate) fn bf16_bits(x: f32) -> u32 {
    let b = x.to_bits();
    // Wrapping: a negative NaN pattern overflows here, and the select below discards it.
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16;
    // A select, not a branch, so packing loops vectorise.
    let nan = (b & 0x7fff_ffff) > 0x7f80_0000;
    if nan { (b >> 16) | 0x40 } else { rounded }
}

/// `x` rounded to the nearest bf16 value (ties to even), as an f32.
#[inline]
pub(crate) fn round_bf16(x: f32) -> f32 {
    f32::from_bits(bf16_bits(x) << 16)
}

/// Whether the GEMM handles this layer's weight format (f32 weights are not bf16
/// values, so they keep the f32 kernels).
pub(crate) fn supports(w: &LinearWeight) -> bool {
    !matches!(w, LinearWeight::F32(_))
}

/// A layer's output pointer, shared by the tasks that write disjoint columns of it.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: each task writes one block of NR output columns of one layer's output, which
// outlives the parallel loop; no element is written by two tasks or read by any.
unsafe impl Send for SharedOut {}
// SAFETY: as above.
unsafe impl Sync for SharedOut {}

/// Per-task scratch: the packed weight panel, a decoded row chunk and the task's
/// `[tokens, NR]` f32 results.
struct Scratch {
    panel: Vec<u32>,
    row: Vec<f32>,
    c: Vec<f32>,
}

/// `outs[i] = round_bf16(x)·Wᵢᵀ` for `tokens` rows and every layer of `layers`, which
/// share `in_features` and all satisfy [`supports`]. The activations are packed once per
/// element order the layers need, and one parallel loop covers every output block of
/// every layer (no barrier between layers; small layers fill gaps).
pub(crate) fn forward_group<I: Isa, K: Bf16Kernel>(
    isa: I,
    kernel: K,
    layers: &[&Linear],
    x: &[f32],
    tokens: usize,
    outs: &mut [&mut [f32]],
) {
    let Some(first) = layers.first() else { return };
    let n_in = first.in_features();
    let perm_of = |lin: &Linear| match lin.weight() {
        LinearWeight::Nvfp4(_) => I::NVFP4_PERM,
        _ => Perm::Natural,
    };
    let mut packed: Vec<(Perm, Vec<u32>)> = Vec::new();
    for lin in layers {
        let perm = perm_of(lin);
        if !packed.iter().any(|(p, _)| *p == perm) {
            packed.push((perm, pack_activations(perm, x, tokens, n_in)));
        }
    }
    struct Job<'a> {
        a: &'a [u32],
        n_out: usize,
        scale: f32,
        decode: RowDecoder<'a>,
        out: SharedOut,
    }
    let jobs: Vec<Job> = layers
        .iter()
        .zip(outs.iter_mut())
        .map(|(lin, out)| {
            let perm = perm_of(lin);
            let a = &packed
                .iter()
                .find(|(p, _)| *p == perm)
                .expect("packed above")
                .1;
            let (scale, decode) = decoder(isa, lin.weight(), n_in);
            Job {
                a,
                n_out: lin.out_features(),
                scale,
                decode,
                out: SharedOut(out.as_mut_ptr()),
            }
        })
        .collect();
    let tasks: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(j, job)| (0..job.n_out.div_ceil(NR)).map(move |b| (j, b)))
        .collect();
    let pairs = n_in.div_ceil(2);
    let tiles = tokens.div_ceil(MR);
    let scratch = || Scratch {
        panel: vec![0; KC / 2 * NR],
        row: vec![0.0; PACK_ROWS * ROW_STRIDE],
        c: vec![0.0; tiles * MR * NR],
    };
    tasks
        .into_par_iter()
        .with_max_len(1)
        .for_each_init(scratch, |s, (j, block)| {
            let job = &jobs[j];
            let (o0, n_out) = (block * NR, job.n_out);
            let rows = NR.min(n_out - o0);
            for k0 in (0..n_in).step_by(KC) {
                let klen = KC.min(n_in - k0);
                let kp = klen.div_ceil(2);
                let panel = &mut s.panel[..kp * NR];
                pack_panel(&job.decode, o0, rows, k0, klen, &mut s.row, panel);
                let (p0, b) = (k0 / 2, &s.panel[..kp * NR]);
                for (tile, c) in s.c.chunks_exact_mut(MR * NR).enumerate() {
                    let at = &job.a[(tile * pairs + p0) * MR..][..kp * MR];
                    kernel.tile(at, b, c, k0 > 0);
                }
            }
            let out = job.out;
            for (t, c) in s.c.chunks_exact(NR).take(tokens).enumerate() {
                let dst = (t * n_out + o0)..(t * n_out + o0 + rows);
                debug_assert!(dst.end <= tokens * n_out);
                // SAFETY: `dst` lies inside this job's output (t < tokens, o0 + rows <=
                // n_out; the caller checked its length), and columns o0..o0+rows of it
                // belong to this task only (see `SharedOut`).
                let y = unsafe { std::slice::from_raw_parts_mut(out.0.add(dst.start), rows) };
                for (y, &v) in y.iter_mut().zip(c) {
                    *y = v * job.scale;
                }
            }
        });
}

/// Activations as bf16 pairs in token tiles: `[tile][pair][MR]`, tokens past the end
/// and the odd last input zero; rows permuted by `perm` first.
fn pack_activations(perm: Perm, x: &[f32], tokens: usize, n_in: usize) -> Vec<u32> {
    let pairs = n_in.div_ceil(2);
    let mut a = vec![0u32; tokens.div_ceil(MR) * pairs * MR];
    a.par_chunks_mut(pairs * MR).enumerate().for_each_init(
        || vec![0.0f32; n_in],
        |row, (tile, dst)| {
            for m in 0..MR.min(tokens - tile * MR) {
                perm.apply(&x[(tile * MR + m) * n_in..][..n_in], row);
                let mut it = row.chunks(2);
                for (p, pair) in it.by_ref().enumerate() {
                    let hi = pair.get(1).map_or(0, |&v| bf16_bits(v));
                    dst[p * MR + m] = bf16_bits(pair[0]) | (hi << 16);
                }
            }
        },
    );
    a
}

/// A row-chunk decoder: writes weight row `r`, inputs `[k0, k0 + len)`, as f32 values
/// exactly representable in bf16 (in the packing order of the activations), and the
/// factor that turns the GEMM's sums into outputs.
type RowDecoder<'a> = Box<dyn Fn(usize, usize, &mut [f32]) + Send + Sync + 'a>;

fn decoder<'a, I: Isa + 'a>(isa: I, w: &'a LinearWeight, n_in: usize) -> (f32, RowDecoder<'a>) {
    match w {
        LinearWeight::Bf16(b) => (
            1.0,
            Box::new(move |r, k0, dst: &mut [f32]| {
                let e = r * n_in + k0;
                isa.decode_bf16(&b[2 * e..2 * (e + dst.len())], dst);
            }),
        ),
        // Decoded values carry the 2⁻⁸ unit of the kernels' E4M3 trick.
        LinearWeight::Fp8(t) => (
            t.scale() * 256.0,
            Box::new(move |r, k0, dst: &mut [f32]| {
                let e = r * n_in + k0;
                isa.decode_fp8(&t.codes()[e..e + dst.len()], dst);
            }),
        ),
        LinearWeight::Nvfp4(t) => (
            t.global_scale() * 256.0,
            Box::new(move |r, k0, dst: &mut [f32]| {
                let e = r * n_in + k0;
                let (codes, scales) = (&t.codes()[e / 2..], &t.scales()[e / BLOCK..]);
                isa.decode_nvfp4(&codes[..dst.len() / 2], &scales[..dst.len() / BLOCK], dst);
            }),
        ),
        LinearWeight::F32(_) => unreachable!("f32 weights do not take the bf16 GEMM"),
    }
}

/// Rows decoded at a time by [`pack_panel`]: each packed input pair then fills one
/// 64-byte line of the panel instead of touching 48 lines.
const PACK_ROWS: usize = 16;
/// Row stride of the decoded rows in [`pack_panel`]: padded past a multiple of 4 KiB,
/// where the 16 rows read together would fall into the same L1 set.
const ROW_STRIDE: usize = KC + 32;

/// Packs weight rows `o0..o0 + rows`, inputs `[k0, k0 + klen)`, as `[pair][NR]` bf16
/// pairs; rows past `rows` and the odd last input are zero. `rowbuf` holds
/// `PACK_ROWS · ROW_STRIDE` floats.
fn pack_panel(
    decode: &RowDecoder<'_>,
    o0: usize,
    rows: usize,
    k0: usize,
    klen: usize,
    rowbuf: &mut [f32],
    panel: &mut [u32],
) {
    if rows < NR {
        panel.fill(0);
    }
    let kp = klen.div_ceil(2);
    for g0 in (0..rows).step_by(PACK_ROWS) {
        let g = PACK_ROWS.min(rows - g0);
        for (o, row) in rowbuf.chunks_exact_mut(ROW_STRIDE).take(g).enumerate() {
            decode(o0 + g0 + o, k0, &mut row[..klen]);
            if klen % 2 == 1 {
                row[klen] = 0.0;
            }
        }
        let rowbuf = &rowbuf[..g * ROW_STRIDE];
        for (p, dst) in panel.chunks_exact_mut(NR).take(kp).enumerate() {
            for (d, row) in dst[g0..g0 + g]
                .iter_mut()
                .zip(rowbuf.chunks_exact(ROW_STRIDE))
            {
                // Exact: the decoded values are bf16 values, so truncation loses nothing.
                *d = (row[2 * p].to_bits() >> 16) | (row[2 * p + 1].to_bits() & 0xffff_0000);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding_is_nearest_even() {
        for x in [1.0f32, -2.5, 1e-40, 3.0e38, f32::INFINITY, -0.0] {
            let want = half::bf16::from_f32(x).to_f32();
            assert_eq!(round_bf16(x).to_bits(), want.to_bits(), "{x}");
        }
        // Ties: 1 + 2⁻⁸ rounds down to 1 (even), 1 + 3·2⁻⁸ rounds up.
        assert_eq!(round_bf16(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(round_bf16(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert!(round_bf16(f32::NAN).is_nan());
        // The largest finite value that rounds up overflows to infinity, as in `half`.
        let big = f32::from_bits(0x7f7f_ffff);
        assert_eq!(round_bf16(big), half::bf16::from_f32(big).to_f32());
    }
}
