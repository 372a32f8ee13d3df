//! RMSNorm variants (spec §3): zero-centred, gated, and the GDN L2 norm.

use super::simd::{dispatch, exp};
use crate::backend::Gate;

/// Zero-centred RMSNorm over each `w.len()`-wide row of `x`, in place:
/// `x · rsqrt(mean(x²) + eps) · (1 + w)`.
pub fn rms_norm_zero_centred(x: &mut [f32], w: &[f32], eps: f32) {
    let norm = |row: &mut [f32]| {
        let inv = inv_rms(row, eps);
        for (v, &wi) in row.iter_mut().zip(w) {
            *v *= inv * (1.0 + wi);
        }
    };
    if x.len() >= 2 * PAR_CHUNK {
        use rayon::prelude::*;
        x.par_chunks_exact_mut(w.len()).for_each(norm);
    } else {
        x.chunks_exact_mut(w.len()).for_each(norm);
    }
}

/// Elements per rayon task of the element-wise loops here; inputs of at least two
/// tasks' worth (a prompt's rows, not a decode step's one) are split over rayon.
const PAR_CHUNK: usize = 1 << 14;

/// `f(x_chunk, y_chunk)` over matching chunks of `x` and `y`: in parallel for
/// prompt-sized inputs, in one call otherwise.
fn zip_chunks(x: &mut [f32], y: &[f32], f: impl Fn(&mut [f32], &[f32]) + Sync) {
    if x.len() >= 2 * PAR_CHUNK {
        use rayon::prelude::*;
        x.par_chunks_mut(PAR_CHUNK)
            .zip(y.par_chunks(PAR_CHUNK))
            .for_each(|(x, y)| f(x, y));
    } else {
        f(x, y);
    }
}

/// `x += y` element-wise (the residual adds), in parallel for prompt-sized inputs.
pub fn add_in_place(x: &mut [f32], y: &[f32]) {
    zip_chunks(x, y, |x, y| x.iter_mut().zip(y).for_each(|(a, b)| *a += b));
}

/// Zero-centred RMSNorm writing into `out` (same shape as `x`).
pub fn rms_norm_zero_centred_into(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    out.copy_from_slice(x);
    rms_norm_zero_centred(out, w, eps);
}

/// The GDN output norm: `(o · rsqrt(mean(o²) + eps) · w) ⊙ silu(z)` per `w.len()`-wide
/// head, with the **plain** weight (no +1). Writes into `o`.
pub fn gated_rms_norm(o: &mut [f32], z: &[f32], w: &[f32], eps: f32) {
    // Compiled for the best SIMD level: the SiLU's exponential dominates.
    dispatch!(gated_portable, (o: &mut [f32], z: &[f32], w: &[f32], eps: f32) {
        for (row, zrow) in o.chunks_exact_mut(w.len()).zip(z.chunks_exact(w.len())) {
            let inv = inv_rms(row, eps);
            for ((v, &wi), &zi) in row.iter_mut().zip(w).zip(zrow) {
                *v = *v * inv * wi * silu(zi);
            }
        }
    })
}

/// L2 normalisation with the GDN kernel's fixed epsilon inside the square root of the
/// sum: `x · rsqrt(Σx² + 1e-6)`.
pub fn l2_norm(x: &mut [f32]) {
    let sum: f32 = x.iter().map(|v| v * v).sum();
    let inv = 1.0 / (sum + 1e-6).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

#[inline(always)]
fn inv_rms(row: &[f32], eps: f32) -> f32 {
    let mean = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
    1.0 / (mean + eps).sqrt()
}

/// `x[i] ← f(g[i]) · x[i]` with `f` the [`Gate`]'s function, compiled for the best
/// SIMD level (the plain loops run at the base target's SSE2), in parallel over rayon
/// for prompt-sized inputs.
pub fn gate_in_place(gate: Gate, g: &[f32], x: &mut [f32]) {
    zip_chunks(x, g, |x, g| gate_chunk(gate, g, x));
}

fn gate_chunk(gate: Gate, g: &[f32], x: &mut [f32]) {
    dispatch!(gate_portable, (gate: Gate, g: &[f32], x: &mut [f32]) {
        match gate {
            Gate::Silu => x.iter_mut().zip(g).for_each(|(x, &g)| *x *= silu(g)),
            Gate::Sigmoid => x.iter_mut().zip(g).for_each(|(x, &g)| *x *= sigmoid(g)),
        }
    })
}

/// `x · sigmoid(x)`.
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// The logistic function.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// PyTorch's default softplus (β = 1, threshold 20).
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { exp(x).ln_1p() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_centred_uses_one_plus_w() {
        let mut x = vec![3.0, 4.0];
        rms_norm_zero_centred(&mut x, &[0.0, 1.0], 0.0);
        let r = (12.5f32).sqrt();
        assert!((x[0] - 3.0 / r).abs() < 1e-6 && (x[1] - 8.0 / r).abs() < 1e-6);
    }

    #[test]
    fn gated_norm_uses_plain_w_and_silu() {
        let mut o = vec![1.0, -1.0];
        gated_rms_norm(&mut o, &[0.0, 2.0], &[2.0, 1.0], 0.0);
        assert_eq!(o[0], 0.0); // silu(0) = 0
        assert!((o[1] - -silu(2.0)).abs() < 1e-6);
    }

    #[test]
    fn gates_match_the_scalar_functions_in_every_split() {
        for n in [7, 3 * PAR_CHUNK + 5] {
            let g: Vec<f32> = (0..n).map(|i| (i % 97) as f32 / 9.0 - 5.0).collect();
            let x0: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
            for (gate, f) in [
                (Gate::Silu, silu as fn(f32) -> f32),
                (Gate::Sigmoid, sigmoid),
            ] {
                let mut x = x0.clone();
                gate_in_place(gate, &g, &mut x);
                for i in 0..n {
                    let want = f(g[i]) * x0[i];
                    assert!(
                        (x[i] - want).abs() <= 1e-6 * (1.0 + want.abs()),
                        "{gate:?} {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn l2_and_softplus() {
        let mut v = vec![3.0, 4.0];
        l2_norm(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6);
        assert_eq!(softplus(30.0), 30.0);
        assert!((softplus(0.0) - 2f32.ln()).abs() < 1e-7);
    }
}
