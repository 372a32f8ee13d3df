//! CUDA kernels for the NVFP4, bf16 and FP8 formats (behind the `cuda` feature).
//!
//! The kernels live in the workspace's `kernels/` folder as CUDA C++ and are compiled at
//! run time by NVRTC through [`edge_core::cuda::KernelCache`] (once per architecture,
//! cached on disk); see [`sources`]. They target sm_80 and newer, Hopper included: every
//! format conversion is software (bit-exact with [`crate::formats`]), and the NVFP4
//! products dequantize in registers, so no FP4 tensor core is needed.
//!
//! - [`CudaNvfp4Tensor`]: an NVFP4 matrix resident on the GPU (checkpoint layout).
//! - [`nvfp4_quantize`] (given global scale) / [`nvfp4_quantize_auto`] (scale from the
//!   data) / [`nvfp4_dequantize`]: byte-identical to
//!   [`Nvfp4Tensor::quantize_with_global_scale`](crate::Nvfp4Tensor::quantize_with_global_scale),
//!   [`Nvfp4Tensor::quantize`](crate::Nvfp4Tensor::quantize) and
//!   [`Nvfp4Tensor::dequantize`](crate::Nvfp4Tensor::dequantize).
//! - [`nvfp4_linear`] (f32 activations) and [`nvfp4_linear_bf16`]: `y = x · Wᵀ` for a few
//!   tokens (GEMV for up to 4 per tile, a small-batch GEMM for tiles of 8 or 16).
//! - [`nvfp4_linear_tc`] / [`nvfp4_linear_tc_bf16`]: the same product on bf16 tensor
//!   cores (`mma.sync` after in-register dequantization, sm_80+), for 1 to 64 tokens per
//!   tile; bf16-activation numerics.
//! - [`CudaBf16Matrix`] and [`bf16_linear_tc`]: bf16-weight products on the same tensor-core
//!   tiling (unquantized layers, the vocabulary projection).
//! - [`fp8_quantize`] / [`fp8_dequantize`] / [`absmax`]: per-tensor E4M3, for FP8 weights
//!   and the FP8 KV cache.
//!
//! Every wrapper checks shapes and scales and returns a [`QuantError`] before anything is
//! launched; CUDA failures arrive as [`QuantError::Core`] wrapping a CUDA
//! [`edge_core::CoreError`] (`Driver`, with cudarc's error as its source, or `Cuda`).

mod bf16;
mod fp8;
mod nvfp4;
mod nvfp4_tc;
/// The kernel sources (the registry, [`crate::kernel_sources`]).
pub use crate::kernel_sources as sources;

pub use bf16::{CudaBf16Matrix, bf16_linear_tc, bf16_linear_tc_bf16_into, bf16_linear_tc_into};
pub use edge_core::cuda::{CudaDevice, DeviceSlice};
pub use fp8::{CudaFp8Tensor, absmax, fp8_dequantize, fp8_quantize, fp8_quantize_bf16};
pub use nvfp4::{
    CudaNvfp4Tensor, nvfp4_dequantize, nvfp4_dequantize_into, nvfp4_linear, nvfp4_linear_bf16,
    nvfp4_linear_bf16_into, nvfp4_linear_into, nvfp4_quantize, nvfp4_quantize_auto,
};
pub use nvfp4_tc::{
    nvfp4_linear_tc, nvfp4_linear_tc_bf16, nvfp4_linear_tc_bf16_into, nvfp4_linear_tc_into,
};

use crate::error::{QuantError, Result};

/// Threads per block of the element-wise kernels.
const ELEMENTWISE_THREADS: u32 = 256;

unsafe extern "C" {
    /// The table build.rs generates (kernels/host_emulation/build_support.rs).
    fn edge_quant_host_kernels(n: *mut u64) -> *const edge_core::cuda::RawHostKernel;
}

/// This crate's kernels compiled for the host, for the emulated CUDA device
/// ([`edge_core::cuda::CudaDevice::emulated`]).
pub const HOST_KERNELS: edge_core::cuda::HostKernelTable = edge_quant_host_kernels;

/// The emulated CUDA device with this crate's kernels: every wrapper of this module
/// runs on it, on the CPU, with no GPU, driver or NVRTC.
pub fn emulated_device() -> std::sync::Arc<edge_core::cuda::CudaDevice> {
    edge_core::cuda::CudaDevice::emulated(&[HOST_KERNELS])
}

/// Rejects zero-sized operands: CUDA cannot allocate or launch on them.
fn check_nonempty(op: &'static str, dims: &[(&str, usize)]) -> Result<()> {
    match dims.iter().find(|(_, v)| *v == 0) {
        Some((name, _)) => Err(QuantError::ShapeMismatch {
            op,
            detail: format!("{name} is 0; empty operands are not launched"),
        }),
        None => Ok(()),
    }
}

/// Converts a dimension to the `u32` the kernels take.
fn dim_u32(op: &'static str, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| QuantError::ShapeMismatch {
        op,
        detail: format!("{what} = {v} exceeds the kernels' u32 range"),
    })
}

/// A scale that must be finite and strictly positive (it is divided by).
fn check_positive_scale(what: &'static str, value: f32) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(QuantError::InvalidScale { what, value })
    }
}

/// Grid size for `items` work items at `per_block` items per block, capped at `cap`
/// blocks (kernels that take a cap loop grid-stride).
fn blocks_for(items: usize, per_block: u32, cap: usize) -> u32 {
    // `cap` is at most 2^31 − 1, so the result fits a u32.
    items.div_ceil(per_block as usize).clamp(1, cap) as u32
}
