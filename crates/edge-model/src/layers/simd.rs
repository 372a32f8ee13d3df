//! Vectorisable inner loops and runtime dispatch for the model's own (non-GEMM)
//! kernels: the Gated DeltaNet core and attention.
//!
//! The loops are written so LLVM vectorises them (independent lanes, no ordered float
//! reduction); [`dispatch!`] compiles a body once more with AVX-512 or AVX2+FMA enabled
//! and picks the best at run time. aarch64 gets NEON by default.

/// Lanes of the partial sums in [`dot`]; a multiple of every SIMD width used.
const LANES: usize = 16;

/// `Σ aᵢ·bᵢ` with 16 independent partial sums (vectorisable).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    acc.iter().sum::<f32>() + tail
}

/// `y += α·x`.
#[inline(always)]
pub fn axpy(alpha: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// Rows of a [`matmul_acc`] register block.
const MM_ROWS: usize = 4;
/// Columns of a [`matmul_acc`] register block (two AVX-512 vectors, four AVX2).
const MM_COLS: usize = 32;

/// `c[i·ldc + j] += α · Σ_p a[i·a_rs + p·a_cs] · b[p·ldb + j]` for `i < m`, `j < n`,
/// `p < k`: a small dense matmul with `a` read through strides (so `Aᵀ` costs
/// nothing) and `b`, `c` row-major. Full `MM_ROWS × MM_COLS` blocks accumulate in
/// registers over all of `k`; edges take a plain loop.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_acc(
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    (a_rs, a_cs): (usize, usize),
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let full_rows = m / MM_ROWS * MM_ROWS;
    let full_cols = n / MM_COLS * MM_COLS;
    for i0 in (0..full_rows).step_by(MM_ROWS) {
        for j0 in (0..full_cols).step_by(MM_COLS) {
            let mut acc = [[0.0f32; MM_COLS]; MM_ROWS];
            for p in 0..k {
                let brow: &[f32; MM_COLS] = b[p * ldb + j0..][..MM_COLS]
                    .try_into()
                    .expect("MM_COLS elements");
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let av = a[(i0 + r) * a_rs + p * a_cs];
                    for (x, &bv) in acc_r.iter_mut().zip(brow) {
                        *x += av * bv;
                    }
                }
            }
            for (r, acc_r) in acc.iter().enumerate() {
                let crow = &mut c[(i0 + r) * ldc + j0..][..MM_COLS];
                for (y, &x) in crow.iter_mut().zip(acc_r) {
                    *y += alpha * x;
                }
            }
        }
    }
    // Edges: the last rows (all columns) and the last columns (full-row blocks).
    let edge = |i: usize, j0: usize, c: &mut [f32]| {
        let crow = &mut c[i * ldc + j0..i * ldc + n];
        for p in 0..k {
            let av = alpha * a[i * a_rs + p * a_cs];
            axpy(av, &b[p * ldb + j0..p * ldb + n], crow);
        }
    };
    for i in 0..full_rows {
        if full_cols < n {
            edge(i, full_cols, c);
        }
    }
    for i in full_rows..m {
        edge(i, 0, c);
    }
}

/// Calls `$body` (an expression) compiled for the best instruction set this CPU has.
/// The functions it calls must be `#[inline(always)]` to inherit the features.
macro_rules! dispatch {
    ($name:ident, ($($arg:ident : $ty:ty),*) $body:block) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx2,fma")]
            unsafe fn avx512($($arg: $ty),*) $body
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) $body
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU supports AVX-512F (checked just above).
                return unsafe { avx512($($arg),*) };
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU supports AVX2 and FMA (checked just above).
                return unsafe { avx2($($arg),*) };
            }
        }
        fn $name($($arg: $ty),*) $body
        $name($($arg),*)
    }};
}
pub(crate) use dispatch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_acc_matches_naive_with_strides_and_edges() {
        for (m, n, k) in [(1, 1, 1), (4, 32, 3), (9, 70, 5), (64, 128, 17), (3, 33, 0)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.25).collect();
            // a read transposed: element (i, p) at a[p·m + i].
            let mut c = vec![1.0f32; m * n];
            matmul_acc((m, n, k), -0.5, &a, (1, m), &b, n, &mut c, n);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 =
                        1.0 - 0.5 * (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum::<f32>();
                    assert!(
                        (c[i * n + j] - want).abs() < 1e-3,
                        "({m},{n},{k}) [{i},{j}]"
                    );
                }
            }
        }
    }

    #[test]
    fn dot_matches_naive_on_all_tail_lengths() {
        for n in 0..40 {
            let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let b: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
            let naive: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64) * (*y as f64))
                .sum();
            assert!((dot(&a, &b) as f64 - naive).abs() < 1e-4, "n={n}");
        }
    }
}
