//! The AVX-512 register block of [`super::simd::matmul_acc`]: 4 rows × 64 columns in 16
//! named accumulators with fused multiply-adds. The auto-vectorised block spilled one
//! accumulator to the stack and stored it on every step, and Rust never fuses `x + a·b`;
//! this block runs the GDN chunk products at FMA speed.

use core::arch::x86_64::*;

/// Columns of the block.
pub const COLS: usize = 64;
/// Rows of the block.
pub const ROWS: usize = 4;

/// Whether this CPU can run [`block`].
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("fma")
}

/// `c[(i0+r)·ldc + j0 + j] += α · Σ_{p<k} a[(i0+r)·a_rs + p·a_cs] · b[p·ldb + j0 + j]`
/// for `r < 4`, `j < 64`.
///
/// # Safety
/// The CPU must support AVX-512 F and FMA ([`available`]).
#[target_feature(enable = "avx512f,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn block(
    k: usize,
    alpha: f32,
    a: &[f32],
    (a_rs, a_cs): (usize, usize),
    i0: usize,
    b: &[f32],
    ldb: usize,
    j0: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); 4]; ROWS];
    for p in 0..k {
        let brow = &b[p * ldb + j0..][..COLS];
        // SAFETY: `brow` holds 64 floats, so the four 16-float loads stay inside it.
        let bv = [0, 16, 32, 48].map(|o| unsafe { _mm512_loadu_ps(brow[o..].as_ptr()) });
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(a[(i0 + r) * a_rs + p * a_cs]);
            for (x, &bj) in acc_r.iter_mut().zip(&bv) {
                *x = _mm512_fmadd_ps(av, bj, *x);
            }
        }
    }
    let alpha = _mm512_set1_ps(alpha);
    for (r, acc_r) in acc.iter().enumerate() {
        let crow = &mut c[(i0 + r) * ldc + j0..][..COLS];
        for (j, &x) in acc_r.iter().enumerate() {
            let p = crow[16 * j..16 * j + 16].as_mut_ptr();
            // SAFETY: `p` points at 16 floats of `crow` (bounds checked by the slice).
            unsafe { _mm512_storeu_ps(p, _mm512_fmadd_ps(alpha, x, _mm512_loadu_ps(p))) };
        }
    }
}
