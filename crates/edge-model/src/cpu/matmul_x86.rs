//! The register blocks of [`super::simd::matmul_acc`] with fused multiply-adds: AVX-512,
//! 4 rows × 64 columns in 16 named accumulators; AVX2, 4 × 16 sub-blocks in 8. The
//! auto-vectorised block spilled accumulators to the stack and stored them on every
//! step (with AVX2's 16 registers, 4 × 64 columns is 32 vectors), and Rust never fuses
//! `x + a·b`; these blocks run the GDN chunk and prompt-attention products at FMA speed.

use super::simd::BlockOperands;
use core::arch::x86_64::*;

/// Columns of the block.
pub const COLS: usize = 64;
/// Rows of the block.
pub const ROWS: usize = 4;

/// `c[(i0+r)·ldc + j0 + j] += α · Σ_{p<k} a(i0+r, p) · b[p·ldb + j0 + j]` for `r < 4`,
/// `j < 64`.
///
/// # Safety
/// The CPU must support AVX-512 F and FMA (an [`edge_core::simd::Avx512`] token proves
/// both).
#[target_feature(enable = "avx512f,fma")]
pub unsafe fn block(ops: &BlockOperands, (i0, j0): (usize, usize), c: &mut [f32], ldc: usize) {
    let mut acc = [[_mm512_setzero_ps(); 4]; ROWS];
    for p in 0..ops.k {
        let brow = &ops.b[p * ops.ldb + j0..][..COLS];
        // SAFETY: `brow` holds 64 floats, so the four 16-float loads stay inside it.
        let bv = [0, 16, 32, 48].map(|o| unsafe { _mm512_loadu_ps(brow[o..].as_ptr()) });
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: rows i0..i0 + 4 and steps below `ops.k` are the ones `ops` was
            // built for (see `simd::matmul_acc_structured`).
            let av = _mm512_set1_ps(unsafe { ops.a_at(i0 + r, p) });
            for (x, &bj) in acc_r.iter_mut().zip(&bv) {
                *x = _mm512_fmadd_ps(av, bj, *x);
            }
        }
    }
    let alpha = _mm512_set1_ps(ops.alpha);
    for (r, acc_r) in acc.iter().enumerate() {
        let crow = &mut c[(i0 + r) * ldc + j0..][..COLS];
        for (j, &x) in acc_r.iter().enumerate() {
            let p = crow[16 * j..16 * j + 16].as_mut_ptr();
            // SAFETY: `p` points at 16 floats of `crow` (bounds checked by the slice).
            unsafe { _mm512_storeu_ps(p, _mm512_fmadd_ps(alpha, x, _mm512_loadu_ps(p))) };
        }
    }
}

/// Columns of one [`block_avx2`] register sub-block.
pub const AVX2_COLS: usize = 16;

/// [`block`]'s product for `cols` columns from `j0` (a multiple of [`AVX2_COLS`]), one
/// 4 × 16 sub-block at a time: 8 accumulators, two `b` loads and four broadcasts per
/// step.
///
/// # Safety
/// The CPU must support AVX2 and FMA (an [`edge_core::simd::Avx2`] token proves both).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn block_avx2(
    ops: &BlockOperands,
    (i0, j0, cols): (usize, usize, usize),
    c: &mut [f32],
    ldc: usize,
) {
    let alpha = _mm256_set1_ps(ops.alpha);
    for jj in (j0..j0 + cols).step_by(AVX2_COLS) {
        let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
        for p in 0..ops.k {
            let brow = &ops.b[p * ops.ldb + jj..][..AVX2_COLS];
            // SAFETY: `brow` holds 16 floats: two 8-float loads.
            let bv = unsafe {
                [
                    _mm256_loadu_ps(brow.as_ptr()),
                    _mm256_loadu_ps(brow.as_ptr().add(8)),
                ]
            };
            for (r, acc_r) in acc.iter_mut().enumerate() {
                // SAFETY: rows i0..i0 + 4 and steps below `ops.k` are the ones `ops`
                // was built for (see `simd::matmul_acc_structured`).
                let av = _mm256_set1_ps(unsafe { ops.a_at(i0 + r, p) });
                acc_r[0] = _mm256_fmadd_ps(av, bv[0], acc_r[0]);
                acc_r[1] = _mm256_fmadd_ps(av, bv[1], acc_r[1]);
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            let crow = &mut c[(i0 + r) * ldc + jj..][..AVX2_COLS];
            for (h, &x) in acc_r.iter().enumerate() {
                let p = crow[8 * h..8 * h + 8].as_mut_ptr();
                // SAFETY: `p` points at 8 floats of `crow` (bounds checked by the slice).
                unsafe { _mm256_storeu_ps(p, _mm256_fmadd_ps(alpha, x, _mm256_loadu_ps(p))) };
            }
        }
    }
}
