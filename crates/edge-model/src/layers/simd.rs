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
