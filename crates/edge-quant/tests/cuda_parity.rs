//! CUDA kernels against the CPU oracles. Every test is ignored (it needs a GPU, or for
//! the first one only NVRTC); run them with
//! `cargo test -p edge-quant --features cuda --release -- --ignored --test-threads=1`,
//! or from prebuilt binaries with `tools/device/cuda_checks.sh` (see docs/CUDA.md).
//!
//! What must hold:
//! - quantize (NVFP4 with a given or derived global scale, FP8 per tensor): bytes
//!   identical to `Nvfp4Tensor::quantize{,_with_global_scale}`, `Fp8Tensor::quantize*`
//!   and `fp8::kv::quantize_kv`, plus the ModelOpt vectors in `data/nvfp4-vectors.json`;
//! - dequantize: f32 bits identical to the CPU (NaN compared as NaN);
//! - linear products: `|y_gpu − y_ref| ≤ LINEAR_REL_TOLERANCE · Σ_k |x̂_k·ŵ_k|` per output
//!   against `Linear::forward_reference` (f64 dot products of the dequantized rows).
//!
//! Environment: `EDGE_QUANT_PTX_CACHE` names the PTX cache folder (default: a folder in
//! the temp dir); `EDGE_QUANT_TEST_DATA` the folder holding `nvfp4-vectors.json`.
#![cfg(feature = "cuda")]

mod cuda_support;

use cuda_support::{device, gpu, normal, to_bf16_bits, weight_data};
use edge_core::Device;
use edge_core::cuda::{ComputeCapability, CudaDevice, KernelCache};
use edge_core::rng::SeededRng;
use edge_quant::cuda::{self as qc, CudaFp8Tensor, CudaNvfp4Tensor, sources};
use edge_quant::fp8::kv::{dequantize_kv, quantize_kv};
use edge_quant::linear::{Linear, LinearWeight};
use edge_quant::nvfp4::quantize::global_scale_for;
use edge_quant::{Fp8Tensor, Nvfp4Tensor, QuantError};
use std::path::PathBuf;

/// Bound on `|y_gpu − y_ref|` relative to `Σ_k |x̂_k·ŵ_k|` (x̂: the activations as the GPU
/// reads them, bf16-rounded for bf16 input; ŵ: the dequantized weight). Derivation: the
/// GEMM tile adds each product into one f32 accumulator per lane (K/32 roundings), then a
/// 5-level butterfly and the global-scale product; the GEMV rounds 16 + K/512 + 7 times.
/// With the reference's own f32 weight and output roundings the worst case is about
/// `(K/32 + 10) · 2^−24`, below 1e-4 for K ≤ 53,000 (K = 17,408 here at most).
const LINEAR_REL_TOLERANCE: f64 = 1e-4;

fn assert_bytes_eq(what: &str, cpu: &[u8], gpu: &[u8]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths");
    if let Some(i) = cpu.iter().zip(gpu).position(|(a, b)| a != b) {
        panic!(
            "{what}: byte {i} differs: cpu {:#04x}, gpu {:#04x}",
            cpu[i], gpu[i]
        );
    }
}

fn assert_bits_eq(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths");
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    if let Some(i) = cpu.iter().zip(gpu).position(|(&a, &b)| !same(a, b)) {
        panic!(
            "{what}: element {i} differs: cpu {:e}, gpu {:e}",
            cpu[i], gpu[i]
        );
    }
}

/// Quantizes on both sides with a given global scale and compares every byte.
fn check_nvfp4_quantize(dev: &CudaDevice, rows: usize, cols: usize, x: &[f32], g: f32) {
    let cpu = Nvfp4Tensor::quantize_with_global_scale(rows, cols, x, g).unwrap();
    let xd = dev.upload(x).unwrap();
    let gpu = qc::nvfp4_quantize(dev, rows, cols, &xd, g)
        .unwrap()
        .download(dev)
        .unwrap();
    let what = format!("NVFP4 {rows}x{cols} g={g:e}");
    assert_bytes_eq(&format!("{what} codes"), cpu.codes(), gpu.codes());
    assert_bytes_eq(&format!("{what} scales"), cpu.scales(), gpu.scales());
}

#[test]
#[ignore = "needs NVRTC only: CUDA_HOME=<CUDA install or nvidia/cu13 wheel folder> cargo test -p edge-quant --features cuda --test cuda_parity -- --ignored nvrtc"]
fn nvrtc_compiles_every_kernel_for_sm80_sm89_sm90() {
    let archs = [(8, 0), (8, 9), (9, 0)].map(|(major, minor)| ComputeCapability { major, minor });
    // Optionally also fill a PTX cache folder, so a GPU machine without NVRTC can load it.
    let warm = std::env::var_os("EDGE_QUANT_PTX_CACHE").map(KernelCache::in_dir);
    for src in sources::ALL {
        let entries = sources::ENTRY_POINTS
            .iter()
            .find(|(name, _)| *name == src.name)
            .map(|(_, e)| *e)
            .expect("entry point list");
        for arch in archs {
            let ptx = KernelCache::disabled()
                .ptx(src, arch)
                .unwrap_or_else(|e| panic!("{} for {}: {e}", src.name, arch.compute_name()));
            for entry in entries {
                assert!(ptx.contains(&format!(".entry {entry}(")), "{entry} missing");
            }
            // Local arrays must live in registers: no PTX-level local memory.
            assert!(!ptx.contains(".local"), "{} uses local memory", src.name);
            if let Some(cache) = &warm {
                cache.ptx(src, arch).unwrap();
            }
            println!(
                "{} {}: OK, {} entry points, {} bytes of PTX",
                src.name,
                arch.compute_name(),
                entries.len(),
                ptx.len()
            );
        }
    }
}

fn nvfp4_quantize_matches_cpu_bytes(on: Device) {
    let dev = device(on);
    for (seed, &(rows, cols)) in [(64, 512), (3, 48), (7, 16), (130, 1040)]
        .iter()
        .enumerate()
    {
        let x = weight_data(rows, cols, seed as u64);
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let g = global_scale_for(amax);
        // Own scale; saturating blocks at 448 and codes at ±6; clamping at 2^-9.
        for g in [g, g / 8.0, g * 300.0] {
            check_nvfp4_quantize(&dev, rows, cols, &x, g);
        }
        // Derived global scale: nvfp4_quantize_auto against Nvfp4Tensor::quantize.
        let cpu = Nvfp4Tensor::quantize(rows, cols, &x).unwrap();
        let gpu = qc::nvfp4_quantize_auto(&dev, rows, cols, &dev.upload(&x).unwrap())
            .unwrap()
            .download(&dev)
            .unwrap();
        assert_eq!(cpu, gpu, "auto {rows}x{cols}");
    }
    // All zeros, and all f32 denormals (fails if the GPU flushed denormals to zero).
    for x in [
        vec![0.0f32; 64],
        (1..=64).map(|i| f32::from_bits(i * 977)).collect(),
    ] {
        let cpu = Nvfp4Tensor::quantize(2, 32, &x).unwrap();
        let gpu = qc::nvfp4_quantize_auto(&dev, 2, 32, &dev.upload(&x).unwrap()).unwrap();
        assert_eq!(
            cpu,
            gpu.download(&dev).unwrap(),
            "special tensor {:e}",
            x[5]
        );
    }
    // ModelOpt's own exports, byte for byte.
    let dir = std::env::var_os("EDGE_QUANT_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")));
    let text = std::fs::read_to_string(dir.join("nvfp4-vectors.json"))
        .expect("nvfp4-vectors.json (set EDGE_QUANT_TEST_DATA)");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let hex = |v: &serde_json::Value| {
        f32::from_bits(
            u32::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap(),
        )
    };
    let bytes = |v: &serde_json::Value| -> Vec<u8> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap() as u8)
            .collect()
    };
    let cases = json["nvfp4_weight_cases"].as_array().unwrap();
    for case in cases {
        let (rows, cols) = (
            case["shape"][0].as_u64().unwrap() as usize,
            case["shape"][1].as_u64().unwrap() as usize,
        );
        let x: Vec<f32> = case["input_f32_hex"]
            .as_array()
            .unwrap()
            .iter()
            .map(hex)
            .collect();
        let g = hex(&case["weight_scale_2_hex"]);
        let gpu = qc::nvfp4_quantize(&dev, rows, cols, &dev.upload(&x).unwrap(), g)
            .unwrap()
            .download(&dev)
            .unwrap();
        let name = case["name"].as_str().unwrap();
        assert_bytes_eq(name, &bytes(&case["weight_uint8"]), gpu.codes());
        assert_bytes_eq(name, &bytes(&case["weight_scale_e4m3_u8"]), gpu.scales());
    }
    println!(
        "NVFP4 quantize: all bytes equal (incl. {} ModelOpt cases)",
        cases.len()
    );
}

fn nvfp4_quantize_errors_match_cpu(on: Device) {
    let dev = device(on);
    let mut x = weight_data(4, 64, 9);
    x[100] = f32::INFINITY;
    x[37] = f32::NAN;
    let xd = dev.upload(&x).unwrap();
    match qc::nvfp4_quantize(&dev, 4, 64, &xd, 0.01) {
        Err(QuantError::NonFinite { index, value, .. }) => assert!(index == 37 && value.is_nan()),
        other => panic!("expected NonFinite at 37, got {other:?}"),
    }
    match qc::nvfp4_quantize_auto(&dev, 4, 64, &xd) {
        Err(QuantError::NonFinite { index, .. }) => assert_eq!(index, 37),
        other => panic!("expected NonFinite at 37, got {other:?}"),
    }
    // Checked before any launch.
    let ok = dev.upload(&weight_data(4, 64, 1)).unwrap();
    let not_multiple = qc::nvfp4_quantize(&dev, 8, 32 - 8, &ok, 0.01);
    assert!(matches!(not_multiple, Err(QuantError::NotMultiple { .. })));
    let wrong_len = qc::nvfp4_quantize(&dev, 3, 64, &ok, 0.01);
    assert!(matches!(wrong_len, Err(QuantError::LengthMismatch { .. })));
    for g in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let r = qc::nvfp4_quantize(&dev, 4, 64, &ok, g);
        assert!(matches!(r, Err(QuantError::InvalidScale { .. })), "g = {g}");
    }
}

fn nvfp4_dequantize_matches_cpu_bits(on: Device) {
    let dev = device(on);
    let (rows, cols) = (256, 64); // 1024 blocks: every scale byte 4 times, NaN included
    let mut rng = SeededRng::from_seed(3);
    let codes = rng.bytes(rows * cols / 2);
    let scales: Vec<u8> = (0..rows * cols / 16).map(|i| i as u8).collect();
    // Ordinary, denormal-producing (no flush to zero) and zero global scales.
    for g in [0.37f32, 1.5e-39, 0.0] {
        let t = Nvfp4Tensor::from_parts(rows, cols, codes.clone(), scales.clone(), g).unwrap();
        let gt = CudaNvfp4Tensor::upload(&dev, &t).unwrap();
        let gpu = dev
            .download(&qc::nvfp4_dequantize(&dev, &gt).unwrap())
            .unwrap();
        assert_bits_eq(&format!("NVFP4 dequantize g={g:e}"), &t.dequantize(), &gpu);
    }
}

/// Checks GPU outputs against `Linear::forward_reference`; returns the largest
/// `|error| / Σ|x̂ŵ|` seen.
fn check_linear(
    layer: &Linear,
    wd: &[f32],
    x: &[f32],
    tokens: usize,
    y: &[f32],
    what: &str,
) -> f64 {
    let (rows, cols) = (layer.out_features(), layer.in_features());
    let mut reference = vec![0.0f32; tokens * rows];
    layer.forward_reference(x, tokens, &mut reference).unwrap();
    let mut worst = 0.0f64;
    for t in 0..tokens {
        for r in 0..rows {
            let xr = &x[t * cols..(t + 1) * cols];
            let wr = &wd[r * cols..(r + 1) * cols];
            let mag: f64 = xr
                .iter()
                .zip(wr)
                .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                .sum();
            let (got, want) = (
                f64::from(y[t * rows + r]),
                f64::from(reference[t * rows + r]),
            );
            let err = (got - want).abs();
            assert!(
                err <= LINEAR_REL_TOLERANCE * mag + 1e-30,
                "{what}: y[{t}, {r}] = {got:e}, reference {want:e}, |err| {err:e} > tol · {mag:e}"
            );
            if mag > 0.0 {
                worst = worst.max(err / mag);
            }
        }
    }
    worst
}

fn nvfp4_linear_matches_reference(on: Device) {
    let dev = device(on);
    // K % 32 == 0 and == 16 (GEMV 16-element path, GEMM tail chunk), rows not a multiple
    // of the CTA's 32, K below one chunk.
    let shapes = [(257, 1024), (96, 528), (40, 16), (33, 2064)];
    let mut worst = 0.0f64;
    for (i, &(rows, cols)) in shapes.iter().enumerate() {
        let w =
            Nvfp4Tensor::quantize(rows, cols, &weight_data(rows, cols, 100 + i as u64)).unwrap();
        let gw = CudaNvfp4Tensor::upload(&dev, &w).unwrap();
        let wd = w.dequantize();
        let layer = Linear::new(rows, cols, LinearWeight::Nvfp4(w)).unwrap();
        for tokens in [1, 2, 3, 4, 5, 8, 9, 16, 17, 33] {
            let mut rng = SeededRng::from_seed((rows * 1000 + tokens) as u64);
            let x: Vec<f32> = (0..tokens * cols).map(|_| normal(&mut rng)).collect();
            let y = qc::nvfp4_linear(&dev, &gw, &dev.upload(&x).unwrap(), tokens).unwrap();
            let what = format!("f32 {rows}x{cols} tokens={tokens}");
            worst = worst.max(check_linear(
                &layer,
                &wd,
                &x,
                tokens,
                &dev.download(&y).unwrap(),
                &what,
            ));

            let (bits, wide) = to_bf16_bits(&x);
            let y = qc::nvfp4_linear_bf16(&dev, &gw, &dev.upload(&bits).unwrap(), tokens).unwrap();
            let what = format!("bf16 {rows}x{cols} tokens={tokens}");
            worst = worst.max(check_linear(
                &layer,
                &wd,
                &wide,
                tokens,
                &dev.download(&y).unwrap(),
                &what,
            ));
        }
    }
    println!(
        "NVFP4 linear: worst |err| / Σ|x̂ŵ| = {worst:.3e} (tolerance {LINEAR_REL_TOLERANCE:e})"
    );

    // Shape errors come back before any launch.
    let w = Nvfp4Tensor::quantize(8, 32, &weight_data(8, 32, 5)).unwrap();
    let gw = CudaNvfp4Tensor::upload(&dev, &w).unwrap();
    let x = dev.upload(&vec![1.0f32; 64]).unwrap();
    assert!(matches!(
        qc::nvfp4_linear(&dev, &gw, &x, 3),
        Err(QuantError::LengthMismatch { .. })
    ));
    assert!(matches!(
        qc::nvfp4_linear(&dev, &gw, &x, 0),
        Err(QuantError::ShapeMismatch { .. })
    ));
    let mut y = dev.zeros::<f32>(15).unwrap();
    let r = qc::nvfp4_linear_into(&dev, &gw, &x, 2, &mut y);
    assert!(matches!(r, Err(QuantError::LengthMismatch { .. })));
}

fn fp8_matches_cpu(on: Device) {
    let dev = device(on);
    let scale = 0.0123f32;
    let mut x = weight_data(16, 64, 21);
    let specials = [
        0.0,
        -0.0,
        1e-40,
        -3e-6,
        5.6,
        -5.6,
        1e6,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    x[..specials.len()].copy_from_slice(&specials);
    // Midpoints between adjacent E4M3 codes (ties to even), times the scale.
    for b in 0..0x7eu8 {
        let (lo, hi) = (
            edge_quant::formats::e4m3::decode(b),
            edge_quant::formats::e4m3::decode(b + 1),
        );
        x[16 + b as usize] = (lo + hi) / 2.0 * scale;
    }
    let xd = dev.upload(&x).unwrap();
    let mut cpu = vec![0u8; x.len()];
    quantize_kv(&x, scale, &mut cpu).unwrap();
    assert_bytes_eq(
        "fp8_quantize",
        &cpu,
        &dev.download(&qc::fp8_quantize(&dev, &xd, scale).unwrap())
            .unwrap(),
    );

    let (bits, wide) = to_bf16_bits(&x);
    quantize_kv(&wide, scale, &mut cpu).unwrap();
    let gpu = qc::fp8_quantize_bf16(&dev, &dev.upload(&bits).unwrap(), scale).unwrap();
    assert_bytes_eq("fp8_quantize_bf16", &cpu, &dev.download(&gpu).unwrap());

    let all: Vec<u8> = (0..1024).map(|i| i as u8).collect();
    let mut cpu = vec![0.0f32; all.len()];
    dequantize_kv(&all, scale, &mut cpu).unwrap();
    let gpu = qc::fp8_dequantize(&dev, &dev.upload(&all).unwrap(), scale).unwrap();
    assert_bits_eq("fp8_dequantize", &cpu, &dev.download(&gpu).unwrap());

    // Tensors (finite data): derived and given scales, and the way back.
    let finite: Vec<f32> = x
        .iter()
        .map(|v| if v.is_finite() { *v } else { 1.0 })
        .collect();
    let fd = dev.upload(&finite).unwrap();
    let cpu = Fp8Tensor::quantize(16, 64, &finite).unwrap();
    let gpu = CudaFp8Tensor::quantize(&dev, 16, 64, &fd).unwrap();
    assert_eq!(cpu, gpu.download(&dev).unwrap(), "Fp8Tensor::quantize");
    assert_bits_eq(
        "Fp8Tensor::dequantize",
        &cpu.dequantize(),
        &dev.download(&gpu.dequantize(&dev).unwrap()).unwrap(),
    );
    let cpu = Fp8Tensor::quantize_with_scale(16, 64, &finite, 3e-4).unwrap();
    let gpu = CudaFp8Tensor::quantize_with_scale(&dev, 16, 64, &fd, 3e-4).unwrap();
    assert_eq!(
        cpu,
        gpu.download(&dev).unwrap(),
        "Fp8Tensor::quantize_with_scale"
    );
    let up = CudaFp8Tensor::upload(&dev, &cpu).unwrap();
    assert_eq!(cpu, up.download(&dev).unwrap(), "upload round trip");

    let amax = finite.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert_eq!(qc::absmax(&dev, &fd).unwrap().to_bits(), amax.to_bits());
    assert!(
        qc::absmax(&dev, &xd).unwrap().is_nan(),
        "NaN input gives NaN amax"
    );
    match CudaFp8Tensor::quantize(&dev, 16, 64, &xd) {
        Err(QuantError::NonFinite { index, .. }) => assert_eq!(index, 7),
        other => panic!("expected NonFinite at 7, got {other:?}"),
    }
    for s in [0.0, -1.0, f32::NAN] {
        assert!(matches!(
            qc::fp8_quantize(&dev, &xd, s),
            Err(QuantError::InvalidScale { .. })
        ));
    }
}

/// `nvfp4_linear` at the Qwen3.6-27B MLP shapes (gate/up 5120 → 17408, down 17408 →
/// 5120), 1 and 16 tokens, f32 and bf16 activations: 48 rows of each output against
/// f64 (all of them would take the CPU too long). Their speed: the `cuda_kernels` bench
/// of edge-benches.
#[test]
#[ignore = "needs an NVIDIA GPU: cargo test -p edge-quant --features cuda --release -- --ignored"]
fn decode_shapes_match_f64() {
    let dev = gpu();
    for (rows, cols) in [(17408, 5120), (5120, 17408)] {
        let mut rng = SeededRng::from_seed(rows as u64);
        // Random codes; scale bytes in 0x28..0x48 (0.125 .. 4): realistic magnitudes.
        let scales: Vec<u8> = (0..rows * cols / 16)
            .map(|_| 0x28 + rng.below(32) as u8)
            .collect();
        let w =
            Nvfp4Tensor::from_parts(rows, cols, rng.bytes(rows * cols / 2), scales, 1e-3).unwrap();
        let gw = CudaNvfp4Tensor::upload(&dev, &w).unwrap();
        for tokens in [1, 16] {
            let x: Vec<f32> = (0..tokens * cols).map(|_| normal(&mut rng)).collect();
            let (bits, wide) = to_bf16_bits(&x);
            let mut y = dev.zeros::<f32>(tokens * rows).unwrap();
            for act in ["f32", "bf16"] {
                if act == "f32" {
                    let xf = dev.upload(&x).unwrap();
                    qc::nvfp4_linear_into(&dev, &gw, &xf, tokens, &mut y).unwrap();
                } else {
                    let xb = dev.upload(&bits).unwrap();
                    qc::nvfp4_linear_bf16_into(&dev, &gw, &xb, tokens, &mut y).unwrap();
                }
                let got = dev.download(&y).unwrap();
                let xs = if act == "f32" { &x } else { &wide };
                let mut row = vec![0.0f32; cols];
                for r in (0..rows).step_by(rows / 48) {
                    w.dequantize_row(r, &mut row);
                    for t in 0..tokens {
                        let xr = &xs[t * cols..(t + 1) * cols];
                        let want: f64 = xr
                            .iter()
                            .zip(&row)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum();
                        let mag: f64 = xr
                            .iter()
                            .zip(&row)
                            .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                            .sum();
                        let err = (f64::from(got[t * rows + r]) - want).abs();
                        assert!(
                            err <= LINEAR_REL_TOLERANCE * mag,
                            "{cols}->{rows} {act} t={t} r={r}: {err:e} vs {mag:e}"
                        );
                    }
                }
            }
        }
    }
}

edge_core::device_test!(nvfp4_quantize_matches_cpu_bytes, cuda);
edge_core::device_test!(nvfp4_quantize_errors_match_cpu, cuda);
edge_core::device_test!(nvfp4_dequantize_matches_cpu_bits, cuda);
edge_core::device_test!(nvfp4_linear_matches_reference, cuda);
edge_core::device_test!(fp8_matches_cpu, cuda);
