//! `edge-kvcache`: the per-sequence state of a hybrid (attention + Gated DeltaNet)
//! model, paged and shareable.
//!
//! - [`CacheSpec`] describes what a model caches: each attention layer's KV width and
//!   FP8 scales, each recurrent layer's conv window and state, the page size and the
//!   KV element type ([`KvDType`]: f32, bf16 or FP8 E4M3, stored at that width).
//! - [`CacheMemory`] is where it lives, one implementation per device
//!   ([`HostMemory`] for the CPU).
//! - [`PagedCache`] keeps the books: pages shared by reference count with
//!   copy-on-write, one recurrent-state slot per live sequence, snapshots of state and
//!   pages in a radix-tree prefix index, and one byte budget with LRU eviction.
//! - [`SequenceCache`] is the interface a model's forward pass runs over: each
//!   sequence's page table and state slot, and writable rows.

mod cache;
mod error;
mod ids;
pub mod memory;
mod pool;
mod prefix;
mod spec;

pub use cache::{
    CacheConfig, CacheStats, CacheUsage, PagedCache, PrefixCandidate, PrefixHit, SavedState,
    SnapshotData,
};
pub use error::{KvCacheError, Result};
pub use ids::{BlockId, SeqId, SlotId};
pub use memory::{CacheMemory, HostMemory};
pub use spec::{AttentionLayerSpec, CacheSpec, KvDType, PoolCapacity, RecurrentLayerSpec};

use std::ops::Range;

/// One sequence as a forward pass sees it.
#[derive(Clone, Copy, Debug)]
pub struct SequenceView<'a> {
    /// Its pages in row order: row `r` is row `r % block_size` of `pages[r / block_size]`.
    pub pages: &'a [BlockId],
    /// Committed rows: KV rows `0..len` are valid, and the recurrent state has absorbed
    /// exactly these tokens.
    pub len: usize,
    /// Its recurrent-state slot.
    pub slot: SlotId,
}

/// The cache interface a model's forward pass runs over. The model does not own the
/// cache: it asks it for each sequence's pages and state slot, for writable rows,
/// and commits the rows it appended.
pub trait SequenceCache {
    /// The device memory behind it.
    type Memory: CacheMemory;

    /// What is cached per layer.
    fn spec(&self) -> &CacheSpec;

    /// A live sequence's pages, length and slot.
    fn sequence(&self, seq: SeqId) -> Result<SequenceView<'_>>;

    /// Makes rows `rows` of `seq` writable: pages are added past its end, and shared
    /// pages the rows fall in are copied first (copy-on-write). `rows.start` may be
    /// at most the rows its pages hold. On an error (the budget, or the memory) the
    /// pages prepared before it stay with the sequence; its rows and length do not
    /// change.
    fn prepare_rows(&mut self, seq: SeqId, rows: Range<usize>) -> Result<()>;

    /// Sets the committed length of `seq` (at most the rows its pages hold).
    fn set_len(&mut self, seq: SeqId, len: usize) -> Result<()>;

    /// The memory, to read and write pages and slots.
    fn memory_mut(&mut self) -> &mut Self::Memory;
}
