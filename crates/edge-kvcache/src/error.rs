use crate::SeqId;

/// Errors raised by `edge-kvcache`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvCacheError {
    /// The byte budget cannot hold what was asked, even after evicting every cached
    /// prefix that no live sequence uses.
    #[error(
        "the KV cache budget of {budget} bytes cannot hold {needed} more bytes \
         ({pinned} bytes are held by live sequences)"
    )]
    OverBudget {
        /// Bytes the operation needs.
        needed: usize,
        /// The configured budget.
        budget: usize,
        /// Bytes that cannot be evicted: pages and state slots of live sequences,
        /// and reservations of rows not yet written.
        pinned: usize,
    },
    /// A new sequence past [`crate::CacheConfig::max_sequences`].
    #[error("the cache holds at most {max} live sequences (CacheConfig::max_sequences)")]
    TooManySequences {
        /// The limit.
        max: usize,
    },
    /// A sequence id that is not live (never created, or already released).
    #[error("sequence {0:?} is not in the cache")]
    UnknownSequence(SeqId),
    /// Rows asked of a sequence that its pages or length do not cover.
    #[error("sequence {seq:?}: {reason}")]
    Rows {
        /// The sequence.
        seq: SeqId,
        /// What is wrong.
        reason: String,
    },
    /// A cache configuration that cannot work (zero block size, budget too small for
    /// one block, …).
    #[error("invalid cache configuration: {0}")]
    Config(String),
    /// A snapshot or hit handle that does not belong to this cache (or was evicted).
    #[error("prefix entry {0} is not in the index")]
    UnknownEntry(u64),
    /// The device memory failed an allocation or a copy. The operation changed none
    /// of the cache's bookkeeping (a failed state restore leaves that slot's state
    /// unspecified: restore again or release the sequence).
    #[error("cache memory: {0}")]
    Memory(String),
    /// A page, row or state slot the memory does not hold (one the cache never handed
    /// out, or gave back), a slot asked for twice, or a row of the wrong width. Nothing
    /// was written.
    #[error("cache memory access: {0}")]
    Access(String),
    /// An error from the foundation crate.
    #[error(transparent)]
    Core(#[from] edge_core::CoreError),
}

/// Result alias for `edge-kvcache`.
pub type Result<T> = std::result::Result<T, KvCacheError>;
