/// Errors raised by `edge-spec`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// A speculation shape that cannot run (no draft step, no child, a tree outside
    /// 2..=`MAX_TREE_ROWS` nodes or too many draft rows): a configuration error.
    #[error("speculation config: {reason}")]
    InvalidConfig {
        /// What is wrong with it.
        reason: String,
    },
    /// Speculation on a model without an MTP head to draft with.
    #[error("the model has no MTP head to draft with")]
    NoMtpHead,
    /// A sampling parameter out of its range (the request's input).
    #[error("{param} must be {expected}, got {value}")]
    InvalidSampling {
        /// The parameter (`"temperature"`, `"top_p"`, ...).
        param: &'static str,
        /// The value given.
        value: f32,
        /// Its range, in words.
        expected: &'static str,
    },
    /// A constraint (a tool-call grammar) that allows no token of the vocabulary where
    /// the output must go on: the request's tools cannot be followed.
    #[error("the constraint allows no token of the target's row")]
    ConstraintDeadEnd,
    /// A draft tree, or the logits given for it, of the wrong shape (internal: the
    /// drafter or the caller broke an invariant).
    #[error("draft tree: {reason}")]
    MalformedTree {
        /// What is wrong.
        reason: String,
    },
    /// Logits with nothing to sample from (empty, every value NaN, or a distribution
    /// with no mass left): a numerical or internal failure, not the request's.
    #[error("nothing to sample: {reason}")]
    NothingToSample {
        /// Which case.
        reason: &'static str,
    },
    /// Candidate ids and logits of different lengths (internal).
    #[error("{ids} candidate ids for {logits} logits")]
    CandidateMismatch {
        /// Ids given.
        ids: usize,
        /// Logits given.
        logits: usize,
    },
    /// Sampling from a row's top tokens where the distribution needs the whole row
    /// (no `top_k`, or penalties): the caller should have asked for full rows
    /// (internal).
    #[error("the top tokens do not determine the sampling distribution; it needs the full row")]
    NeedsFullRow,
    /// A speculation step before its sequence was started (internal).
    #[error("speculation step before start")]
    NotStarted,
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
