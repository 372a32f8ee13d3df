//! The formats kernels' registry: every CUDA C++ source of this crate (`kernels/nvfp4/`,
//! `kernels/bf16/`, `kernels/fp8/`), as [`KernelSource`]s.
//!
//! `edge_model::kernel_sources::all_kernel_sources` (these, then the model's) is what
//! `edge-llm kernels check` compiles for each architecture; a new kernel here adds its
//! source to [`ALL`] (the test `every_cu_file_is_registered` fails for a `.cu` file in
//! this crate's folders that no registered source contains). Plain text, so this module
//! and its test exist without the `cuda` feature; `edge_quant::cuda::sources` is the
//! same module.
//!
//! Each source is the shared header
//! `kernels/common/formats.cuh` concatenated in front of one `.cu` file at compile time
//! of this crate. The text is therefore part of the binary, and its hash (with the
//! architecture) keys the on-disk PTX cache: editing a kernel never loads stale PTX.

use edge_core::KernelSource;

/// Builds a [`KernelSource`] whose code is `formats.cuh` followed by `kernels/$file`.
macro_rules! kernel_source {
    ($name:literal, $file:literal) => {
        KernelSource {
            name: $name,
            code: concat!(
                include_str!("../../../kernels/common/formats.cuh"),
                "\n",
                include_str!(concat!("../../../kernels/", $file)),
            ),
        }
    };
}

/// Builds a [`KernelSource`] for a tensor-core product: `formats.cuh`, then
/// `common/mma.cuh` (the mma tile, activation loads and reduction both products share),
/// then `kernels/$file`.
macro_rules! mma_kernel_source {
    ($name:literal, $file:literal) => {
        KernelSource {
            name: $name,
            code: concat!(
                include_str!("../../../kernels/common/formats.cuh"),
                "\n",
                include_str!("../../../kernels/common/mma.cuh"),
                "\n",
                include_str!(concat!("../../../kernels/", $file)),
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

/// NVFP4 × f32/bf16 products on bf16 tensor cores, sm_80+ (`kernels/nvfp4/mma.cu`).
pub const NVFP4_MMA: KernelSource = mma_kernel_source!("edge_quant_nvfp4_mma", "nvfp4/mma.cu");

/// bf16 × f32/bf16 products on tensor cores, sm_80+ (`kernels/bf16/mma.cu`).
pub const BF16_MMA: KernelSource = mma_kernel_source!("edge_quant_bf16_mma", "bf16/mma.cu");

/// FP8 E4M3 per-tensor quantize/dequantize and the abs-max reduction
/// (`kernels/fp8/quantize.cu`).
pub const FP8_QUANTIZE: KernelSource = kernel_source!("edge_quant_fp8_quantize", "fp8/quantize.cu");

/// Every kernel source of the workspace (for compile checks and cache warm-up).
pub const ALL: &[KernelSource] = &[
    NVFP4_QUANTIZE,
    NVFP4_DEQUANTIZE,
    NVFP4_GEMV,
    NVFP4_MMA,
    BF16_MMA,
    FP8_QUANTIZE,
];

/// The registry: every kernel source of the workspace with its name, in a stable order.
pub fn all_kernel_sources() -> &'static [KernelSource] {
    ALL
}

include!("kernel_entry_points.rs");

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn cu_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                cu_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "cu") {
                out.push(path);
            }
        }
    }

    /// This crate's kernel folders (`kernels/model/` belongs to edge-model, whose own
    /// test checks the whole `kernels/` tree against the workspace registry).
    const FOLDERS: &[&str] = &["nvfp4", "bf16", "fp8"];

    #[test]
    fn every_cu_file_is_registered() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
        let mut files = Vec::new();
        for folder in FOLDERS {
            cu_files(&root.join(folder), &mut files);
        }
        assert!(
            files.len() >= ALL.len(),
            "kernels/ holds {} .cu files",
            files.len()
        );
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(
                all_kernel_sources().iter().any(|s| s.code.contains(&text)),
                "{} is not in edge_quant::kernel_sources::ALL (add a kernel_source! entry)",
                file.display()
            );
        }
    }

    #[test]
    fn names_are_unique_and_entry_points_listed() {
        let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for source in ALL {
            let entries = ENTRY_POINTS.iter().find(|(n, _)| *n == source.name);
            let (_, functions) = entries.expect("every source lists its entry points");
            for f in *functions {
                // Some entry points are macro-generated, so only the name is matched.
                assert!(source.code.contains(f), "{f} not in {}", source.name);
            }
        }
    }
}
