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
    /// From `bench bfcl`.
    #[error(transparent)]
    Bfcl(#[from] crate::commands::bfcl::BfclError),
    /// Writing an output file failed.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}
