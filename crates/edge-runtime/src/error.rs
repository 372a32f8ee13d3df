/// Errors raised by `edge-runtime`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A request parameter out of range or malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-runtime`.
pub type Result<T> = std::result::Result<T, RuntimeError>;
