//! The model's CUDA C++ kernels (`kernels/model/`) as [`KernelSource`]s, and the
//! workspace's whole kernel registry ([`all_kernel_sources`]: edge-quant's formats
//! kernels followed by these), which `edge-llm kernels check` compiles for each
//! architecture. Plain text, so this module exists without the `cuda` feature.

use edge_core::KernelSource;

/// A [`KernelSource`] whose code is `kernels/common/formats.cuh` followed by
/// `kernels/model/$file` (the same layout as edge-quant's sources).
macro_rules! model_kernel {
    ($name:literal, $file:literal) => {
        KernelSource {
            name: $name,
            code: concat!(
                include_str!("../../../kernels/common/formats.cuh"),
                "\n",
                include_str!(concat!("../../../kernels/model/", $file)),
            ),
        }
    };
}

/// Element-wise ops, embedding gather and the RMSNorms (`kernels/model/elementwise.cu`).
pub const ELEMENTWISE: KernelSource = model_kernel!("edge_model_elementwise", "elementwise.cu");

/// On-device greedy choice and top-k candidates (`kernels/model/sampling.cu`).
pub const SAMPLING: KernelSource = model_kernel!("edge_model_sampling", "sampling.cu");

/// The Gated DeltaNet decode step: conv and recurrence (`kernels/model/gdn.cu`).
pub const GDN: KernelSource = model_kernel!("edge_model_gdn", "gdn.cu");

/// Attention of decode, prompt and tree rows over the paged KV cache
/// (`kernels/model/attention.cu`).
pub const ATTENTION: KernelSource = model_kernel!("edge_model_attention", "attention.cu");

/// Tensor-core attention of prompt and tree rows in tiles over the paged KV cache
/// (`kernels/model/attention_tiles.cu`, after `kernels/common/mma.cuh`).
pub const ATTENTION_TILES: KernelSource = KernelSource {
    name: "edge_model_attention_tiles",
    code: concat!(
        include_str!("../../../kernels/common/formats.cuh"),
        "\n",
        include_str!("../../../kernels/common/mma.cuh"),
        "\n",
        include_str!("../../../kernels/model/attention_tiles.cu"),
    ),
};

/// The attention's inputs: q/gate split, q/k norms, partial RoPE (`kernels/model/rope.cu`).
pub const ROPE: KernelSource = model_kernel!("edge_model_rope", "rope.cu");

/// Stores into and row copies within the paged KV cache (`kernels/model/kv_store.cu`).
pub const KV_STORE: KernelSource = model_kernel!("edge_model_kv_store", "kv_store.cu");

/// The model's kernel sources.
pub const MODEL: &[KernelSource] = &[
    ELEMENTWISE,
    SAMPLING,
    GDN,
    ATTENTION,
    ATTENTION_TILES,
    ROPE,
    KV_STORE,
];

include!("kernel_entry_points.rs");

/// Every kernel source of the workspace, edge-quant's first, in a stable order.
pub fn all_kernel_sources() -> Vec<KernelSource> {
    edge_quant::kernel_sources::all_kernel_sources()
        .iter()
        .chain(MODEL)
        .copied()
        .collect()
}

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

    #[test]
    fn every_cu_file_is_registered() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
        let mut files = Vec::new();
        cu_files(&root, &mut files);
        let all = all_kernel_sources();
        assert!(
            files.len() >= all.len(),
            "kernels/ holds {} .cu files",
            files.len()
        );
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            assert!(
                all.iter().any(|s| s.code.contains(&text)),
                "{} is in no registry (edge_quant::kernel_sources::ALL or edge_model::kernel_sources::MODEL)",
                file.display()
            );
        }
    }

    #[test]
    fn names_are_unique_and_entry_points_listed() {
        let all = all_kernel_sources();
        let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "kernel source names are unique");
        for source in MODEL {
            let (_, functions) = ENTRY_POINTS
                .iter()
                .find(|(n, _)| *n == source.name)
                .expect("every model source lists its entry points");
            for f in *functions {
                assert!(source.code.contains(f), "{f} not in {}", source.name);
            }
        }
    }
}
