/// Errors raised by `edge-model`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-model`.
pub type Result<T> = std::result::Result<T, ModelError>;
