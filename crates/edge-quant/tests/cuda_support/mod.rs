//! Shared by the GPU test files: the device, deterministic data and bf16 rounding.
#![allow(dead_code)] // each test file uses its own subset

use edge_core::Device;
use edge_core::cuda::{CudaDevice, KernelCache};
use edge_core::rng::SeededRng;
use half::bf16;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The CUDA device of a device-parameterised test (`edge_core::device_test!`): the
/// emulated one, or GPU 0 ([`gpu`]).
pub fn device(on: Device) -> Arc<CudaDevice> {
    match on {
        Device::CudaEmulated => edge_quant::cuda::emulated_device(),
        Device::Cuda(0) => gpu(),
        other => panic!("a CUDA test body was given {other}"),
    }
}

/// cuda:0 with the PTX cache in `EDGE_QUANT_PTX_CACHE`, else the CLI's kernel cache
/// (`edge-llm kernels warm` fills it), else a temp-dir folder.
pub fn gpu() -> Arc<CudaDevice> {
    static DEVICE: OnceLock<Arc<CudaDevice>> = OnceLock::new();
    DEVICE
        .get_or_init(|| {
            let dir = std::env::var_os("EDGE_QUANT_PTX_CACHE")
                .map(PathBuf::from)
                .or_else(KernelCache::user_default_dir)
                .unwrap_or_else(|| std::env::temp_dir().join("edge-quant-ptx-cache"));
            let dev = CudaDevice::new(0, KernelCache::in_dir(dir)).expect("open cuda:0");
            println!("device: {dev:?}");
            dev
        })
        .clone()
}

/// Roughly normal (Irwin–Hall with 4 terms), unit variance.
pub fn normal(rng: &mut SeededRng) -> f32 {
    let s: f32 = (0..4).map(|_| rng.next_f32()).sum();
    (s - 2.0) * 3f32.sqrt()
}

/// Weight-like data: N(0, 0.05²), sparse outliers ×40, one all-zero block, one block of
/// tiny values and exact E2M1 ties (which exercise every rounding rule).
pub fn weight_data(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = SeededRng::from_seed(seed);
    let mut x: Vec<f32> = (0..rows * cols).map(|_| 0.05 * normal(&mut rng)).collect();
    for i in (0..x.len()).step_by(97) {
        x[i] *= 40.0;
    }
    x[16..32].fill(0.0);
    if x.len() >= 64 {
        for (i, v) in x[32..48].iter_mut().enumerate() {
            *v = (i as f32 - 7.5) * 1e-7;
        }
        let ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0];
        for (i, v) in x[48..64].iter_mut().enumerate() {
            *v = ties[i % 8] * if i < 8 { 1.0 } else { -1.0 };
        }
    }
    x
}

/// The bf16 bits of `x` (nearest even) and their f32 values.
pub fn to_bf16_bits(x: &[f32]) -> (Vec<u16>, Vec<f32>) {
    let bits: Vec<u16> = x.iter().map(|&v| bf16::from_f32(v).to_bits()).collect();
    let wide = bits.iter().map(|&b| bf16::from_bits(b).to_f32()).collect();
    (bits, wide)
}
