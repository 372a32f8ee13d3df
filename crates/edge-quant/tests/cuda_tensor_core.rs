//! The tensor-core products (`nvfp4_linear_tc*`, kernels/nvfp4/mma.cu; `bf16_linear_tc*`,
//! kernels/bf16/mma.cu against the CPU bf16 linear) on a GPU:
//! parity against f64 products of the dequantized weights and the bf16-rounded
//! activations (their speed at the 27B MLP shapes: the `cuda_kernels` bench of
//! edge-benches). The GPU tests are ignored; run them with
//! `cargo test -p edge-quant --features cuda --release --test cuda_tensor_core -- --ignored --nocapture --test-threads=1`
//! or through `tools/device/cuda_checks.sh`.
#![cfg(feature = "cuda")]

mod cuda_support;

use cuda_support::{device, normal, to_bf16_bits, weight_data};
use edge_core::Device;
use edge_core::rng::SeededRng;
use edge_quant::cuda::{self as qc, CudaNvfp4Tensor};
use edge_quant::{Nvfp4Tensor, QuantError};

/// Bound on `|y − y_ref|` relative to `Σ_k |x̂_k·ŵ_k|`: the products are exact and the
/// tensor cores sum them in (at least) f32, then the CTA adds its warps' partials and
/// multiplies by the global scale; with the largest K here (17,408) the f32 rounding
/// stays well below this.
const TC_REL_TOLERANCE: f64 = 1e-4;

/// Checks `y` against f64 products of `xs` (already bf16-rounded) and the dequantized
/// rows; returns the largest relative error.
fn check(w: &Nvfp4Tensor, xs: &[f32], tokens: usize, y: &[f32], what: &str) -> f64 {
    let (rows, cols) = (w.rows(), w.cols());
    let mut row = vec![0.0f32; cols];
    let mut worst = 0.0f64;
    for r in 0..rows {
        w.dequantize_row(r, &mut row);
        for t in 0..tokens {
            let xr = &xs[t * cols..(t + 1) * cols];
            let (mut want, mut mag) = (0.0f64, 0.0f64);
            for (&a, &b) in xr.iter().zip(&row) {
                let p = f64::from(a) * f64::from(b);
                want += p;
                mag += p.abs();
            }
            let got = f64::from(y[t * rows + r]);
            let err = (got - want).abs();
            assert!(
                err <= TC_REL_TOLERANCE * mag + 1e-30,
                "{what}: y[{t}, {r}] = {got:e}, reference {want:e}, |err| {err:e} > tol · {mag:e}"
            );
            if mag > 0.0 {
                worst = worst.max(err / mag);
            }
        }
    }
    worst
}

fn nvfp4_tensor_core_matches_reference(on: Device) {
    let dev = device(on);
    // K % 32 == 0 and == 16 (narrow loads), K below one 128-element chunk, a tail chunk,
    // rows not a multiple of the CTA's 32; token counts across all four tiles.
    let shapes = [(257, 1024), (96, 528), (40, 16), (33, 2064), (64, 17408)];
    let mut worst = 0.0f64;
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let w =
            Nvfp4Tensor::quantize(rows, cols, &weight_data(rows, cols, 300 + i as u64)).unwrap();
        let gw = CudaNvfp4Tensor::upload(&dev, &w).unwrap();
        for tokens in [1, 3, 8, 9, 16, 17, 32, 33, 64, 70] {
            let mut rng = SeededRng::from_seed((rows * 7919 + tokens) as u64);
            let x: Vec<f32> = (0..tokens * cols).map(|_| normal(&mut rng)).collect();
            let (bits, wide) = to_bf16_bits(&x);
            let yf = qc::nvfp4_linear_tc(&dev, &gw, &dev.upload(&x).unwrap(), tokens).unwrap();
            let yb =
                qc::nvfp4_linear_tc_bf16(&dev, &gw, &dev.upload(&bits).unwrap(), tokens).unwrap();
            let (yf, yb) = (dev.download(&yf).unwrap(), dev.download(&yb).unwrap());
            let what = format!("{rows}x{cols} tokens={tokens}");
            worst = worst.max(check(&w, &wide, tokens, &yb, &what));
            // f32 input is rounded to bf16 in the kernel: the same arithmetic follows.
            let same = yf.iter().zip(&yb).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{what}: f32 and bf16 inputs differ");
        }
    }
    println!(
        "NVFP4 tensor cores: worst |err| / Σ|x̂ŵ| = {worst:.3e} (tolerance {TC_REL_TOLERANCE:e})"
    );
}

fn bf16_tensor_core_matches_cpu_linear(on: Device) {
    use edge_quant::linear::{ActivationQuant, Linear, LinearWeight};
    let dev = device(on);
    // The demo model's and the 27B's shapes, a tail chunk, rows not a multiple of 32.
    let shapes = [(257, 1024), (33, 2064), (40, 16), (768, 256), (64, 5120)];
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let (wbits, wide) = to_bf16_bits(&weight_data(rows, cols, 500 + i as u64));
        let bytes: Vec<u8> = wbits.iter().flat_map(|b| b.to_le_bytes()).collect();
        let cpu = Linear::new(rows, cols, LinearWeight::Bf16(bytes.into()))
            .unwrap()
            .with_activation_quant(ActivationQuant::Bf16)
            .unwrap();
        let gw = qc::CudaBf16Matrix::upload(&dev, &wbits, rows, cols).unwrap();
        for tokens in [1, 5, 16, 33, 70] {
            let mut rng = SeededRng::from_seed((rows * 31 + tokens) as u64);
            let x: Vec<f32> = (0..tokens * cols).map(|_| normal(&mut rng)).collect();
            let (bits, xb) = to_bf16_bits(&x);
            let mut want = vec![0.0f32; tokens * rows];
            cpu.forward(&x, tokens, &mut want).unwrap();
            let yf = qc::bf16_linear_tc(&dev, &gw, &dev.upload(&x).unwrap(), tokens).unwrap();
            let mut yb = dev.zeros::<f32>(tokens * rows).unwrap();
            qc::bf16_linear_tc_bf16_into(&dev, &gw, &dev.upload(&bits).unwrap(), tokens, &mut yb)
                .unwrap();
            let (yf, yb) = (dev.download(&yf).unwrap(), dev.download(&yb).unwrap());
            let what = format!("bf16 {rows}x{cols} tokens={tokens}");
            assert!(
                yf.iter().zip(&yb).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{what}: f32 and bf16 inputs differ"
            );
            // Against the CPU's bf16 linear: both sum exact products in f32, in another
            // order, so the bound is relative to Σ|x̂ŵ|.
            for t in 0..tokens {
                for r in 0..rows {
                    let mag: f64 = (0..cols)
                        .map(|k| {
                            (f64::from(xb[t * cols + k]) * f64::from(wide[r * cols + k])).abs()
                        })
                        .sum();
                    let err = f64::from((yb[t * rows + r] - want[t * rows + r]).abs());
                    assert!(
                        err <= TC_REL_TOLERANCE * mag + 1e-30,
                        "{what}: y[{t}, {r}] {} vs cpu {}",
                        yb[t * rows + r],
                        want[t * rows + r]
                    );
                }
            }
        }
    }
    let bad = qc::CudaBf16Matrix::upload(&dev, &[0u16; 24], 2, 12);
    assert!(
        matches!(bad, Err(QuantError::NotMultiple { .. })),
        "columns not a multiple of 16"
    );
}

edge_core::device_test!(nvfp4_tensor_core_matches_reference, cuda);
edge_core::device_test!(bf16_tensor_core_matches_cpu_linear, cuda);
