// The `extern "C"` entry points of edge-quant's kernel sources, by source name. Plain data,
// `include!`d by src/kernel_sources.rs and by build.rs (which compiles each entry point
// for the emulated CUDA device).

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
        "edge_quant_nvfp4_mma",
        &[
            "eq_nvfp4_mma_f32_t8",
            "eq_nvfp4_mma_f32_t16",
            "eq_nvfp4_mma_f32_t32",
            "eq_nvfp4_mma_f32_t64",
            "eq_nvfp4_mma_bf16_t8",
            "eq_nvfp4_mma_bf16_t16",
            "eq_nvfp4_mma_bf16_t32",
            "eq_nvfp4_mma_bf16_t64",
        ],
    ),
    (
        "edge_quant_bf16_mma",
        &[
            "eq_bf16_mma_f32_t8",
            "eq_bf16_mma_f32_t16",
            "eq_bf16_mma_f32_t32",
            "eq_bf16_mma_f32_t64",
            "eq_bf16_mma_bf16_t8",
            "eq_bf16_mma_bf16_t16",
            "eq_bf16_mma_bf16_t32",
            "eq_bf16_mma_bf16_t64",
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
