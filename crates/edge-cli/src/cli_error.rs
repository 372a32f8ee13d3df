/// Everything a command can fail with, each with a message for the user.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags or flag values.
    #[error("{0}")]
    Usage(String),
    /// From the model crate.
    #[error(transparent)]
    Model(#[from] edge_model::ModelError),
    /// From the runtime crate.
    #[error(transparent)]
    Runtime(#[from] edge_runtime::RuntimeError),
    /// From the speculative decoder.
    #[error(transparent)]
    Spec(#[from] edge_spec::SpecError),
    /// From the cache.
    #[error(transparent)]
    Cache(#[from] edge_kvcache::KvCacheError),
    /// From the quantization crate.
    #[error(transparent)]
    Quant(#[from] edge_quant::QuantError),
    /// A recorded agentic conversation file (`bench agentic`).
    #[error(transparent)]
    Trajectories(#[from] edge_benches::agentic::TrajectoryError),
    /// From `bench bfcl`.
    #[error(transparent)]
    Bfcl(#[from] crate::commands::bfcl::BfclError),
    /// From the foundation crate (devices, NVRTC).
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
    /// A command that needs CUDA, in a binary built without the `cuda` feature.
    #[cfg_attr(feature = "cuda", allow(dead_code))]
    #[error(
        "`{0}` needs CUDA support, but this edge-llm was built without it \
         (rebuild with `cargo build --release -p edge-cli --features cuda`)"
    )]
    NoCuda(&'static str),
    /// Some kernels did not compile in `kernels check`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    #[error("{failed} of {total} kernel compilations failed")]
    KernelCheck {
        /// How many (kernel, architecture) pairs failed.
        failed: usize,
        /// How many were tried.
        total: usize,
    },
    /// From a chat backend (`bench agentic`: an endpoint or the in-process engine).
    #[error(transparent)]
    Client(#[from] crate::commands::agentic::client::ClientError),
    /// Lines of a `generate --requests` file that could not run (the others ran).
    #[error("{path}: {} of {total} requests failed (lines {})", .failed.len(), lines_list(.failed))]
    RequestsFailed {
        /// The requests file.
        path: std::path::PathBuf,
        /// The failed lines' numbers (from 1).
        failed: Vec<usize>,
        /// How many requests the file holds.
        total: usize,
    },
    /// `bench decode --turn-tokens`: the follow-up turn did not find its earlier prompt
    /// in the prefix cache, so its prefill figure would not be a turn at that depth.
    #[error(
        "the follow-up turn found {cached} of the {depth} prompt tokens in the prefix \
         cache; a larger --kv-budget keeps them"
    )]
    TurnNotCached {
        /// Prompt tokens the turn found cached.
        cached: usize,
        /// The depth it should have found.
        depth: usize,
    },
    /// Writing an output file failed.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}

/// `3, 7, 12`.
fn lines_list(lines: &[usize]) -> String {
    let list: Vec<String> = lines.iter().map(usize::to_string).collect();
    list.join(", ")
}
