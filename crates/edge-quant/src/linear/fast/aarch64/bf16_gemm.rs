//! The bf16 prompt GEMM's micro-kernel with `bfmmla` (FEAT_BF16, proved by
//! [`NeonBf16`]): the packing and blocking are [`crate::linear::fast::gemm`]'s, this
//! file only multiplies one `MR × NR` tile.
//!
//! `bfmmla` multiplies a 2 × 4 bf16 matrix by a 4 × 2 one into a 2 × 2 f32 block. The
//! packed operands hold bf16 pairs (`u32`), `[pair][MR]` for the tokens and
//! `[pair][NR]` for the weights, so two consecutive pairs of two tokens, zipped as
//! 32-bit lanes, are exactly the 2 × 4 operand (`zip1`/`zip2` of the two pairs' token
//! vectors), and likewise for two outputs. A register tile of all 8 tokens × 8 outputs
//! takes 16 accumulators of 2 × 2 blocks, 4 token and 4 output operands per two pairs
//! (16 `bfmmla`s per 8 loads); the tile walks the `NR` outputs 8 at a time, and the 2 × 2
//! blocks are put back into rows with 64-bit zips at the end.
//!
//! The products of bf16 values are exact in f32; `bfmmla` sums four of them per lane
//! and step (without FEAT_EBF16 it may also flush denormals and round to odd), a
//! different f32 summation order than the portable kernel, within the fast path's
//! documented tolerance.

use super::super::gemm::{Bf16Kernel, MR, NR};
use core::arch::aarch64::*;
use core::arch::asm;
use edge_core::simd::NeonBf16;

/// Outputs per register tile.
const NB: usize = 8;
const _: () = assert!(MR == 8 && NR.is_multiple_of(NB));

impl Bf16Kernel for NeonBf16 {
    fn tile(self, a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
        // SAFETY: the token proves FEAT_BF16.
        unsafe { tile(a, b, c, accumulate) }
    }
}

/// `acc + A·Bᵀ` for the 2 × 4 bf16 matrices `A` (`a`: row 0 in lanes 0–3, row 1 in
/// lanes 4–7) and `B` (`b`, the same): lanes `[a0·b0, a0·b1, a1·b0, a1·b1]`
/// (`bfmmla`).
#[inline]
#[target_feature(enable = "neon,bf16")]
fn bfmmla(acc: float32x4_t, a: uint32x4_t, b: uint32x4_t) -> float32x4_t {
    let mut acc = acc;
    // SAFETY: `bfmmla` only reads and writes these registers; the target feature of
    // this function (proved by the caller's token) guarantees the instruction exists.
    unsafe {
        asm!(
            "bfmmla {0:v}.4s, {1:v}.8h, {2:v}.8h",
            inout(vreg) acc,
            in(vreg) a,
            in(vreg) b,
            options(pure, nomem, nostack),
        );
    }
    acc
}

/// Two consecutive pairs' four 2 × 4 operands: from the `u32` vectors `p0`, `p1` of
/// one pair and `q0`, `q1` of the next (lanes 0–3 and 4–7 of the tile), the operands
/// of lanes (0, 1), (2, 3), (4, 5), (6, 7).
#[inline(always)]
fn operands(p0: uint32x4_t, p1: uint32x4_t, q0: uint32x4_t, q1: uint32x4_t) -> [uint32x4_t; 4] {
    // SAFETY: register-only NEON operations (NEON is the aarch64 baseline).
    unsafe {
        [
            vzip1q_u32(p0, q0),
            vzip2q_u32(p0, q0),
            vzip1q_u32(p1, q1),
            vzip2q_u32(p1, q1),
        ]
    }
}

/// [`Bf16Kernel::tile`] with `bfmmla`.
// The indices `i` and `j` address the accumulators and the output rows at once.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "neon,bf16")]
fn tile(a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
    let pairs = a.len() / MR;
    assert!(a.len() == pairs * MR && b.len() >= pairs * NR && c.len() >= MR * NR);
    let zero = vdupq_n_u32(0);
    for j0 in (0..NR).step_by(NB) {
        // acc[i][j]: tokens 2i, 2i + 1 × outputs j0 + 2j, j0 + 2j + 1.
        let mut acc = [[vdupq_n_f32(0.0); 4]; 4];
        let mut step = |p: usize, next: bool| {
            // SAFETY: pair p (and p + 1 where `next`) < pairs: tokens [p·MR, p·MR + 8)
            // of `a` and outputs [p·NR + j0, + 8) of `b`, j0 + 8 <= NR (asserted).
            let (av, bv) = unsafe {
                let (ap, bp) = (a.as_ptr().add(p * MR), b.as_ptr().add(p * NR + j0));
                let load2 = |q: *const u32, stride: usize| match next {
                    true => [vld1q_u32(q.add(stride)), vld1q_u32(q.add(stride + 4))],
                    false => [zero, zero],
                };
                let [a0, a1] = [vld1q_u32(ap), vld1q_u32(ap.add(4))];
                let [b0, b1] = [vld1q_u32(bp), vld1q_u32(bp.add(4))];
                let [a2, a3] = load2(ap, MR);
                let [b2, b3] = load2(bp, NR);
                (operands(a0, a1, a2, a3), operands(b0, b1, b2, b3))
            };
            for i in 0..4 {
                for j in 0..4 {
                    acc[i][j] = bfmmla(acc[i][j], av[i], bv[j]);
                }
            }
        };
        let mut p = 0;
        while p + 2 <= pairs {
            step(p, true);
            p += 2;
        }
        if p < pairs {
            step(p, false);
        }
        for i in 0..4 {
            for j in (0..4).step_by(2) {
                let (x, y) = (
                    vreinterpretq_u64_f32(acc[i][j]),
                    vreinterpretq_u64_f32(acc[i][j + 1]),
                );
                let rows = [vzip1q_u64(x, y), vzip2q_u64(x, y)];
                for (h, row) in rows.into_iter().enumerate() {
                    let at = (2 * i + h) * NR + j0 + 2 * j;
                    // SAFETY: token 2i + h < MR, outputs [j0 + 2j, + 4) < NR: inside the
                    // MR·NR floats asserted.
                    unsafe {
                        let d = c.as_mut_ptr().add(at);
                        let mut v = vreinterpretq_f32_u64(row);
                        if accumulate {
                            v = vaddq_f32(vld1q_f32(d), v);
                        }
                        vst1q_f32(d, v);
                    }
                }
            }
        }
    }
}
