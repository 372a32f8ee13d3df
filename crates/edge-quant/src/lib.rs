//! `edge-quant`: the number formats edge-llm runs on, bit-exact with NVIDIA ModelOpt.
//!
//! - [`formats`]: the E2M1, E4M3 and E5M2 element formats (round-to-nearest-even,
//!   saturation and NaN rules as ModelOpt and PyTorch apply them).
//! - [`nvfp4`]: NVFP4 tensors (packed E2M1 codes, E4M3 block scales per 16 elements,
//!   an f32 global scale).
//! - [`fp8`]: FP8 E4M3 tensors with a per-tensor scale.
//! - [`int8`]: dynamic per-block int8 activations (the W4A8 CPU mode).
//! - [`kernel_sources`]: the registry of every CUDA kernel source (compiled only with
//!   the `cuda` feature).
//!
//! Every operation has a CPU reference implementation that is the oracle for the fast
//! CPU and CUDA paths.
//!
//! # Example
//!
//! Quantize a weight matrix to NVFP4 and run it as a linear layer, with nothing but
//! this crate (the example is a doc test, so it runs with `cargo test`):
//!
//! ```
//! use edge_quant::Nvfp4Tensor;
//! use edge_quant::linear::{Linear, LinearWeight};
//!
//! # fn main() -> edge_quant::Result<()> {
//! let (rows, cols) = (32, 64);
//! let weights: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
//! let nvfp4 = Nvfp4Tensor::quantize(rows, cols, &weights)?;
//! // 4 bits per value plus one E4M3 scale per 16 values.
//! assert_eq!(nvfp4.storage_bytes(), rows * cols / 2 + rows * cols / 16);
//! let restored = nvfp4.dequantize();
//! let worst = (weights.iter().zip(&restored)).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
//! assert!(worst < 0.2, "NVFP4 keeps 2 significant bits per block-scaled value: {worst}");
//!
//! let layer = Linear::new(rows, cols, LinearWeight::Nvfp4(nvfp4))?;
//! let tokens = 2;
//! let x = vec![0.5f32; tokens * cols];
//! let mut y = vec![0.0f32; tokens * rows];
//! layer.forward(&x, tokens, &mut y)?;
//! let row0: f32 = restored[..cols].iter().map(|w| 0.5 * w).sum();
//! assert!((y[0] - row0).abs() < 1e-3 * (1.0 + row0.abs()));
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod formats;
pub mod fp8;
pub mod int8;
pub mod kernel_sources;
pub mod linear;
pub mod nvfp4;

pub use error::{QuantError, Result};
pub use fp8::Fp8Tensor;
pub use nvfp4::Nvfp4Tensor;
