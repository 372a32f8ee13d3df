//! Vectorisable inner loops for the model's own (non-GEMM) kernels: the Gated DeltaNet
//! core and attention.
//!
//! The loops are written so LLVM vectorises them (independent lanes, no ordered float
//! reduction); [`dispatch!`] (from [`edge_core::simd`]) compiles a body once more with
//! AVX-512 or AVX2+FMA enabled and runs the variant of the one SIMD level, detected once
//! (or forced by [`edge_core::simd::with_level`]). aarch64 gets NEON by default.

pub(crate) use crate::math::exp;
pub(crate) use edge_core::simd::dispatch;

/// Lanes of the partial sums in [`dot`]: a multiple of every SIMD width used, and four
/// AVX-512 vectors, so four add chains run at once instead of one (decode attention's
/// dot products over 256-dimension heads were bound by that chain's latency).
const LANES: usize = 64;

/// `Σ aᵢ·bᵢ` with [`LANES`] independent partial sums (vectorisable), added as a tree
/// (an ordered sum of the lanes was a chain of scalar adds).
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
    let mut width = LANES / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    acc[0] + tail
}

/// Magnitude below which a weight (a decay factor, a softmax probability) or a product
/// of weights counts as zero: 2⁻⁶⁰ ≈ 8.7e-19, far below f32's resolution next to the
/// weight-1 terms it is summed with. The reason is speed, not accuracy: Intel cores take
/// a microcode assist (about 100 times a vector FMA) for every operation with a
/// subnormal operand or result, and decay factors such as `e^{γ_r − γ_s}` of a
/// fast-forgetting GDN head multiply into subnormals all over a chunk (a 64-token GDN
/// chunk ran 20 times slower on a Xeon without this). Two non-negligible weights
/// multiply to at least 2⁻¹²⁰, still a normal float.
pub const NEGLIGIBLE: f32 = 8.673_617e-19;

/// `ln NEGLIGIBLE` = −60 ln 2.
const LN_NEGLIGIBLE: f32 = -41.588_83;

/// `eˣ` as a weight: 0 where it is below [`NEGLIGIBLE`].
#[inline(always)]
pub fn weight_exp(x: f32) -> f32 {
    if x < LN_NEGLIGIBLE { 0.0 } else { exp(x) }
}

/// `x`, or 0 where `|x|` is below [`NEGLIGIBLE`].
#[inline(always)]
pub fn flush_negligible(x: f32) -> f32 {
    if x.abs() < NEGLIGIBLE { 0.0 } else { x }
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

/// What [`matmul_acc_structured`] may skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structure {
    /// Nothing: every product.
    Dense,
    /// `a` is lower triangular (`a(i, p) = 0` for `p > i`): each row block stops its
    /// inner product after its last row's diagonal.
    LowerA,
    /// Only `c(i, j)` with `j ≤ i` is wanted: each row block skips the column blocks
    /// right of its diagonal (entries above the diagonal may or may not be added to).
    LowerC,
}

/// `c[i·ldc + j] += α · Σ_p a[i·a_rs + p·a_cs] · b[p·ldb + j]` for `i < m`, `j < n`,
/// `p < k`: a small dense matmul with `a` read through strides (so `Aᵀ` costs
/// nothing) and `b`, `c` row-major. Full `4 × COLS` blocks accumulate in registers
/// over all of `k` (`COLS` = 64 is four AVX-512 vectors per row: 16 accumulators; use
/// 32 when `n` is 32); edges take a plain loop.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn matmul_acc<const MM_COLS: usize>(
    dims: (usize, usize, usize),
    alpha: f32,
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
) {
    let operands = (a, a_strides, b, ldb);
    matmul_acc_structured::<MM_COLS>(dims, alpha, operands, c, ldc, Structure::Dense);
}

/// `a` with its (row, step) strides, and `b` with its row stride.
pub type MatmulOperands<'a> = (&'a [f32], (usize, usize), &'a [f32], usize);

/// [`matmul_acc`] skipping the work a triangular [`Structure`] makes unnecessary (the
/// Gated DeltaNet chunk's `T`, masked `QKᵀ` and `KKᵀ` products): about a quarter of
/// those products' multiply-adds for 64-token chunks.
#[inline(always)]
pub fn matmul_acc_structured<const MM_COLS: usize>(
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    (a, (a_rs, a_cs), b, ldb): MatmulOperands<'_>,
    c: &mut [f32],
    ldc: usize,
    structure: Structure,
) {
    let full_rows = m / MM_ROWS * MM_ROWS;
    let full_cols = n / MM_COLS * MM_COLS;
    // Inner-product length for rows up to `last`, and columns wanted from rows up to
    // `last`.
    let steps = |last: usize| match structure {
        Structure::LowerA => k.min(last + 1),
        _ => k,
    };
    let wanted = |last: usize| match structure {
        Structure::LowerC => n.min(last + 1),
        _ => n,
    };
    #[cfg(target_arch = "x86_64")]
    let token = edge_core::simd::token();
    #[cfg(target_arch = "x86_64")]
    let fma_block = MM_COLS == super::matmul_x86::COLS && token.avx512().is_some();
    #[cfg(target_arch = "x86_64")]
    let avx2_block = !fma_block
        && MM_COLS.is_multiple_of(super::matmul_x86::AVX2_COLS)
        && token.avx2().is_some();
    for i0 in (0..full_rows).step_by(MM_ROWS) {
        let last = i0 + MM_ROWS - 1;
        let ops = BlockOperands::new((last + 1, steps(last)), alpha, (a, (a_rs, a_cs)), (b, ldb));
        let wanted = wanted(last);
        for j0 in (0..full_cols).step_by(MM_COLS) {
            if j0 >= wanted {
                break;
            }
            #[cfg(target_arch = "x86_64")]
            if fma_block {
                // SAFETY: the level's token (checked above) proves AVX-512 F and FMA.
                unsafe { super::matmul_x86::block(&ops, (i0, j0), c, ldc) };
                continue;
            }
            #[cfg(target_arch = "x86_64")]
            if avx2_block {
                let step = super::matmul_x86::AVX2_COLS;
                let cols = (wanted - j0).next_multiple_of(step).min(MM_COLS);
                // SAFETY: the level's token (checked above) proves AVX2 and FMA.
                unsafe { super::matmul_x86::block_avx2(&ops, (i0, j0, cols), c, ldc) };
                continue;
            }
            block::<MM_COLS>(&ops, (i0, j0), c, ldc);
        }
    }
    // Edges: the last rows (all columns) and the last columns of the full-block rows.
    let edge = |i: usize, j0: usize, c: &mut [f32]| {
        let crow = &mut c[i * ldc + j0..i * ldc + n];
        for p in 0..steps(i) {
            let av = alpha * a[i * a_rs + p * a_cs];
            axpy(av, &b[p * ldb + j0..p * ldb + n], crow);
        }
    };
    for i in 0..full_rows {
        if full_cols < wanted(i) {
            edge(i, full_cols, c);
        }
    }
    for i in full_rows..m {
        edge(i, 0, c);
    }
}

/// The operands every register block of [`matmul_acc`] reads: `k` steps, the factor
/// `alpha`, `a` through `a_strides` (row, step) and `b` row-major with stride `ldb`.
pub struct BlockOperands<'a> {
    /// Steps of the inner product.
    pub k: usize,
    /// Factor applied once per block on store.
    pub alpha: f32,
    /// Left operand, `a[i·a_strides.0 + p·a_strides.1]` (private: [`BlockOperands::new`]
    /// checks it covers `rows × k`, which [`BlockOperands::a_at`] relies on).
    a: &'a [f32],
    /// Row and step strides of `a`.
    a_strides: (usize, usize),
    /// Rows of `a` that [`BlockOperands::new`] checked.
    rows: usize,
    /// Right operand, `b[p·ldb + j]`.
    pub b: &'a [f32],
    /// Row stride of `b`.
    pub ldb: usize,
}

impl<'a> BlockOperands<'a> {
    /// Operands for `rows` rows of `a` and `k` steps; panics unless `a` holds element
    /// `(i, p)` for every `i < rows`, `p < k`.
    pub fn new(
        (rows, k): (usize, usize),
        alpha: f32,
        (a, a_strides): (&'a [f32], (usize, usize)),
        (b, ldb): (&'a [f32], usize),
    ) -> Self {
        if rows > 0 && k > 0 {
            // The largest index; every other (i, p) is below it (strides ≥ 0).
            let last = (rows - 1) * a_strides.0 + (k - 1) * a_strides.1;
            assert!(
                last < a.len(),
                "matmul operand a holds {} of {} elements",
                a.len(),
                last + 1
            );
        }
        BlockOperands {
            k,
            alpha,
            a,
            a_strides,
            rows,
            b,
            ldb,
        }
    }

    /// `a` at row `i`, step `p`.
    ///
    /// # Safety
    /// `i` must be below the `rows` and `p` below the `k` given to
    /// [`BlockOperands::new`]. Unchecked because the register blocks read `a` once per
    /// row and step: the bounds check cost 18% of a 512-token GDN head (1.54 → 1.27 ms).
    #[inline(always)]
    pub unsafe fn a_at(&self, i: usize, p: usize) -> f32 {
        debug_assert!(i < self.rows && p < self.k);
        // SAFETY: i < rows and p < k (the caller's contract), for which `new` checked
        // that the index is in bounds.
        unsafe {
            *self
                .a
                .get_unchecked(i * self.a_strides.0 + p * self.a_strides.1)
        }
    }
}

/// One `MM_ROWS × COLS` block of [`matmul_acc`] (rows from `i0`, columns from `j0`),
/// written for auto-vectorisation.
#[inline(always)]
fn block<const COLS: usize>(
    ops: &BlockOperands,
    (i0, j0): (usize, usize),
    c: &mut [f32],
    ldc: usize,
) {
    let mut acc = [[0.0f32; COLS]; MM_ROWS];
    for p in 0..ops.k {
        let brow: &[f32; COLS] = ops.b[p * ops.ldb + j0..][..COLS]
            .try_into()
            .expect("COLS elements");
        for (r, acc_r) in acc.iter_mut().enumerate() {
            // SAFETY: rows i0..i0 + 4 and steps below `ops.k` are the ones `ops` was
            // built for (see `matmul_acc_structured`).
            let av = unsafe { ops.a_at(i0 + r, p) };
            for (x, &bv) in acc_r.iter_mut().zip(brow) {
                *x += av * bv;
            }
        }
    }
    for (r, acc_r) in acc.iter().enumerate() {
        let crow = &mut c[(i0 + r) * ldc + j0..][..COLS];
        for (y, &x) in crow.iter_mut().zip(acc_r) {
            *y += ops.alpha * x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_below_negligible_are_zero_and_never_subnormal() {
        assert_eq!(weight_exp(LN_NEGLIGIBLE - 1e-3), 0.0);
        assert!(weight_exp(LN_NEGLIGIBLE + 1e-3) >= NEGLIGIBLE);
        assert_eq!(weight_exp(-0.5), exp(-0.5));
        assert_eq!(flush_negligible(-NEGLIGIBLE * 0.99), 0.0);
        assert_eq!(flush_negligible(-NEGLIGIBLE), -NEGLIGIBLE);
        assert!(flush_negligible(f32::NAN).is_nan());
        // Two kept weights multiply to a normal float.
        let smallest_product = std::hint::black_box(NEGLIGIBLE) * NEGLIGIBLE;
        assert!(smallest_product >= f32::MIN_POSITIVE);
        for i in 0..200_000 {
            let x = -(i as f32) * 1e-3;
            let w = weight_exp(x);
            assert!(w == 0.0 || w >= NEGLIGIBLE, "e^{x} = {w}");
        }
    }

    #[test]
    fn structured_matmul_matches_dense_where_it_promises() {
        for (m, n, k) in [
            (64, 128, 64),
            (64, 64, 128),
            (9, 70, 9),
            (13, 13, 20),
            (61, 61, 61),
        ] {
            // Row-major a; for LowerA, zero above the diagonal.
            let full: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let lower: Vec<f32> = (0..m * k)
                .map(|i| if i % k <= i / k { full[i] } else { 0.0 })
                .collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.25).collect();
            for (structure, a) in [(Structure::LowerA, &lower), (Structure::LowerC, &full)] {
                let mut dense = vec![1.0f32; m * n];
                matmul_acc::<64>((m, n, k), 0.5, a, (k, 1), &b, n, &mut dense, n);
                let mut got = vec![1.0f32; m * n];
                let ops = (a.as_slice(), (k, 1), b.as_slice(), n);
                matmul_acc_structured::<64>((m, n, k), 0.5, ops, &mut got, n, structure);
                for i in 0..m {
                    // LowerC promises the diagonal and left of it; LowerA every entry.
                    let cols = if structure == Structure::LowerC {
                        (i + 1).min(n)
                    } else {
                        n
                    };
                    for j in 0..cols {
                        let (g, d) = (got[i * n + j], dense[i * n + j]);
                        assert!(
                            (g - d).abs() < 1e-3,
                            "{structure:?} ({m},{n},{k}) [{i},{j}]"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_acc_matches_naive_with_strides_and_edges() {
        for (m, n, k) in [
            (1, 1, 1),
            (4, 32, 3),
            (9, 70, 5),
            (64, 128, 17),
            (3, 33, 0),
            (8, 130, 9),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.25).collect();
            // a read transposed: element (i, p) at a[p·m + i].
            let mut c = vec![1.0f32; m * n];
            matmul_acc::<32>((m, n, k), -0.5, &a, (1, m), &b, n, &mut c, n);
            let mut c64 = vec![1.0f32; m * n];
            matmul_acc::<64>((m, n, k), -0.5, &a, (1, m), &b, n, &mut c64, n);
            assert!(c.iter().zip(&c64).all(|(x, y)| (x - y).abs() < 1e-3));
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
