/// Errors raised by `edge-runtime`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-runtime`.
pub type Result<T> = std::result::Result<T, RuntimeError>;
