/// Errors raised by `edge-spec`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A request the speculator cannot serve.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// From the model.
    #[error(transparent)]
    Model(#[from] edge_model::ModelError),
    /// From the cache.
    #[error(transparent)]
    Cache(#[from] edge_kvcache::KvCacheError),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-spec`.
pub type Result<T> = std::result::Result<T, SpecError>;
