/// Errors raised by `edge-kvcache`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvCacheError {
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-kvcache`.
pub type Result<T> = std::result::Result<T, KvCacheError>;
