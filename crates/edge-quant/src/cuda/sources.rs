//! The CUDA C++ sources of edge-quant's kernels, as [`KernelSource`]s.
//!
//! NVRTC gets no include paths here, so each source is the shared header
//! `kernels/common/formats.cuh` concatenated in front of one `.cu` file at compile time
//! of this crate. The text is therefore part of the binary, and its hash (with the
//! architecture) keys the on-disk PTX cache: editing a kernel never loads stale PTX.

use edge_core::cuda::KernelSource;

/// Builds a [`KernelSource`] whose code is `formats.cuh` followed by `kernels/$file`.
macro_rules! kernel_source {
    ($name:literal, $file:literal) => {
        KernelSource {
            name: $name,
            code: concat!(
                include_str!("../../../../kernels/common/formats.cuh"),
                "\n",
                include_str!(concat!("../../../../kernels/", $file)),
            ),
        }
    };
}

/// NVFP4 quantization with a given global scale (`kernels/nvfp4/quantize.cu`).
pub const NVFP4_QUANTIZE: KernelSource =
    kernel_source!("edge_quant_nvfp4_quantize", "nvfp4/quantize.cu");

/// NVFP4 dequantization to f32 (`kernels/nvfp4/dequantize.cu`).
pub const NVFP4_DEQUANTIZE: KernelSource =
    kernel_source!("edge_quant_nvfp4_dequantize", "nvfp4/dequantize.cu");

/// NVFP4 × f32/bf16 GEMV and small-batch GEMM (`kernels/nvfp4/gemv.cu`).
pub const NVFP4_GEMV: KernelSource = kernel_source!("edge_quant_nvfp4_gemv", "nvfp4/gemv.cu");

/// FP8 E4M3 per-tensor quantize/dequantize and the abs-max reduction
/// (`kernels/fp8/quantize.cu`).
pub const FP8_QUANTIZE: KernelSource = kernel_source!("edge_quant_fp8_quantize", "fp8/quantize.cu");

/// Every kernel source of this crate (for compile checks and cache warm-up).
pub const ALL: &[KernelSource] = &[NVFP4_QUANTIZE, NVFP4_DEQUANTIZE, NVFP4_GEMV, FP8_QUANTIZE];

/// The `extern "C"` entry points each source defines, by source name (used by tests to
/// check that every function the wrappers launch is present in the PTX).
pub const ENTRY_POINTS: &[(&str, &[&str])] = &[
    ("edge_quant_nvfp4_quantize", &["eq_nvfp4_quantize_f32"]),
    ("edge_quant_nvfp4_dequantize", &["eq_nvfp4_dequantize_f32"]),
    (
        "edge_quant_nvfp4_gemv",
        &[
            "eq_nvfp4_gemv_f32_t1",
            "eq_nvfp4_gemv_f32_t2",
            "eq_nvfp4_gemv_f32_t4",
            "eq_nvfp4_gemm_f32_t8",
            "eq_nvfp4_gemm_f32_t16",
            "eq_nvfp4_gemv_bf16_t1",
            "eq_nvfp4_gemv_bf16_t2",
            "eq_nvfp4_gemv_bf16_t4",
            "eq_nvfp4_gemm_bf16_t8",
            "eq_nvfp4_gemm_bf16_t16",
        ],
    ),
    (
        "edge_quant_fp8_quantize",
        &[
            "eq_fp8_quantize_f32",
            "eq_fp8_quantize_bf16",
            "eq_fp8_dequantize_f32",
            "eq_absmax_f32",
        ],
    ),
];
