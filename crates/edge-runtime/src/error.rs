/// Errors raised by `edge-runtime`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A request parameter out of range or malformed.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The engine's request queue is full; try again later.
    #[error("the engine's queue of {capacity} requests is full")]
    QueueFull {
        /// Requests the queue holds.
        capacity: usize,
    },
    /// A request whose prompt and `max_new_tokens` need more rows than the cache
    /// budget holds for one sequence alone: it could never run (unlike one that only
    /// waits for room beside others).
    #[error(
        "the request needs {rows} cache rows (prompt, max_new_tokens and speculation's \
         lookahead), but the KV cache budget holds at most {max_rows} for one request"
    )]
    ExceedsCache {
        /// Rows the request would need.
        rows: usize,
        /// Rows the budget holds for one sequence ([`edge_kvcache::PagedCache::max_rows`]).
        max_rows: usize,
    },
    /// The engine has shut down.
    #[error("the engine has shut down")]
    ShutDown,
    /// The chat template could not be compiled or rendered.
    #[error("chat template: {0}")]
    Template(String),
    /// The tokenizer could not be loaded or failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// An error from the cache (e.g. a request its budget cannot hold).
    #[error(transparent)]
    Cache(#[from] edge_kvcache::KvCacheError),
    /// An error from speculative decoding.
    #[error(transparent)]
    Spec(#[from] edge_spec::SpecError),
    /// An error from the model.
    #[error(transparent)]
    Model(#[from] edge_model::ModelError),
    /// A file compiled into the binary with the demo model is broken (a build
    /// defect, not a user error).
    #[error("embedded demo model: {0}")]
    Demo(String),
    /// The HTTP server could not start or failed.
    #[error("server: {0}")]
    Server(String),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
    /// A forward pass of a running step failed (a device or cache failure, not the
    /// request's input, which admission has checked): the requests of that step end
    /// with it. Shared, since one failure ends every request in the step.
    #[error("a forward pass failed: {0}")]
    Forward(#[source] std::sync::Arc<edge_model::ModelError>),
    /// An invariant of the engine did not hold (a bug, not a bad request).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Result alias for `edge-runtime`.
pub type Result<T> = std::result::Result<T, RuntimeError>;
