//! Shared helpers for the workspace's criterion benchmarks (see `benches/benches/`):
//! random data (drawn by `edge_core::rng::SeededRng`), the decode shapes, and weight sets
//! large enough that a benchmark streams them from DRAM instead of the last-level cache.

pub mod agentic;

use edge_core::Bytes;
use edge_core::rng::SeededRng;
use edge_quant::linear::{ActivationQuant, Linear, LinearWeight};
use edge_quant::{Fp8Tensor, Nvfp4Tensor};
use std::sync::Arc;

/// Decode shapes of the Qwen3.5/3.6 27B-class MLP and attention projections, as
/// `(out_features, in_features)`: 5120→17408 (gate/up), 17408→5120 (down),
/// 5120→10240 (fused q/gate).
pub const DECODE_SHAPES: [(usize, usize); 3] = [(17408, 5120), (5120, 17408), (10240, 5120)];

/// Bytes of weights a linear benchmark cycles through: far above the 480 MiB L3 this
/// VM reports, so every forward pass streams its weights from DRAM.
pub const WORKING_SET_BYTES: usize = 1 << 30;

/// Memory read loops (moved to `edge_core::read_bandwidth`, which the CLI's
/// `bench decode` uses too; re-exported under the name the benchmarks use).
pub use edge_core::read_bandwidth as read;

/// `n` values uniform in [-1, 1), drawn by the project's generator from `seed`.
pub fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = SeededRng::from_seed(seed);
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// The weight formats (and activation modes) the linear benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchFormat {
    /// f32 weights.
    F32,
    /// bf16 weights.
    Bf16,
    /// FP8 E4M3 weights with a per-tensor scale.
    Fp8,
    /// NVFP4 weights, f32 activations (W4A16).
    Nvfp4,
    /// NVFP4 weights and run-time NVFP4 activations (W4A4 emulation).
    Nvfp4W4a4,
    /// NVFP4 weights and run-time int8 activations (W4A8).
    Nvfp4W4a8,
}

impl BenchFormat {
    /// Every format, in report order.
    pub const ALL: [BenchFormat; 6] = [
        BenchFormat::Nvfp4,
        BenchFormat::Nvfp4W4a4,
        BenchFormat::Nvfp4W4a8,
        BenchFormat::Bf16,
        BenchFormat::Fp8,
        BenchFormat::F32,
    ];

    /// The benchmark id of the format.
    pub fn name(self) -> &'static str {
        match self {
            BenchFormat::F32 => "f32",
            BenchFormat::Bf16 => "bf16",
            BenchFormat::Fp8 => "fp8",
            BenchFormat::Nvfp4 => "nvfp4-w4a16",
            BenchFormat::Nvfp4W4a4 => "nvfp4-w4a4",
            BenchFormat::Nvfp4W4a8 => "nvfp4-w4a8",
        }
    }

    /// Weight bytes of one `[out, in]` layer in this format.
    pub fn layer_bytes(self, out: usize, inp: usize) -> usize {
        let n = out * inp;
        match self {
            BenchFormat::F32 => 4 * n,
            BenchFormat::Bf16 => 2 * n,
            BenchFormat::Fp8 => n,
            BenchFormat::Nvfp4 | BenchFormat::Nvfp4W4a4 | BenchFormat::Nvfp4W4a8 => n / 2 + n / 16,
        }
    }
}

/// E4M3 bytes with the two NaN codes replaced by their neighbours.
fn no_nan(mut b: Vec<u8>) -> Vec<u8> {
    for v in &mut b {
        if *v & 0x7f == 0x7f {
            *v ^= 1;
        }
    }
    b
}

/// Distinct random `[out, in]` layers of `format` whose weights add up to at least
/// `min_total` bytes (at least two layers). Quantized layers share one backing store,
/// as layers of a memory-mapped checkpoint do.
pub fn make_layers(
    format: BenchFormat,
    out: usize,
    inp: usize,
    min_total: usize,
    seed: u64,
) -> Vec<Linear> {
    let per = format.layer_bytes(out, inp);
    let count = min_total.div_ceil(per).max(2);
    let mut rng = SeededRng::from_seed(seed);
    let n = out * inp;
    if format == BenchFormat::F32 {
        return (0..count)
            .map(|_| {
                let w = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
                Linear::new(out, inp, LinearWeight::F32(w)).unwrap()
            })
            .collect();
    }
    let mut store = rng.bytes(per * count);
    if format == BenchFormat::Bf16 {
        // Finite bf16 values in [-2, 2): exponent field forced into 0x70..=0x7f.
        for p in store.chunks_exact_mut(2) {
            p[1] = (p[1] & 0x80) | 0x38 | (p[1] & 0x07);
        }
    } else if format == BenchFormat::Fp8 {
        store = no_nan(store);
    }
    let store = Arc::new(store);
    let slice = |r: std::ops::Range<usize>| Bytes::from_shared(store.clone(), r).unwrap();
    (0..count)
        .map(|i| {
            let base = i * per;
            let weight = match format {
                BenchFormat::Bf16 => LinearWeight::Bf16(slice(base..base + per)),
                BenchFormat::Fp8 => LinearWeight::Fp8(
                    Fp8Tensor::from_parts(out, inp, slice(base..base + n), 0.01).unwrap(),
                ),
                _ => {
                    let codes = slice(base..base + n / 2);
                    // Block scales 0x30..0x3f (0.25..0.9375): finite, positive.
                    let scales = (0..n / 16)
                        .map(|_| 0x30 | rng.below(16) as u8)
                        .collect::<Vec<u8>>();
                    LinearWeight::Nvfp4(
                        Nvfp4Tensor::from_parts(out, inp, codes, scales, 1e-3).unwrap(),
                    )
                }
            };
            let lin = Linear::new(out, inp, weight).unwrap();
            let act = match format {
                // Activations are uniform in [-1, 1): calibrated amax 1.
                BenchFormat::Nvfp4W4a4 => ActivationQuant::Nvfp4 {
                    input_scale: 1.0 / 2688.0,
                },
                BenchFormat::Nvfp4W4a8 => ActivationQuant::Int8,
                _ => return lin,
            };
            lin.with_activation_quant(act).unwrap()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_have_the_requested_size() {
        for f in BenchFormat::ALL {
            let layers = make_layers(f, 8, 32, 1000, 1);
            assert!(layers.len() * f.layer_bytes(8, 32) >= 1000);
            assert_eq!(layers[0].weight_bytes(), f.layer_bytes(8, 32), "{f:?}");
            let mut y = vec![0.0; 8];
            layers[1].forward(&values(2, 32), 1, &mut y).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{f:?}");
        }
    }
}
