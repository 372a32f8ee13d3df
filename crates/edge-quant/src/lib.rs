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
