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
//!
//! # Example
//!
//! A cache for one attention layer and one recurrent layer, used as a model would,
//! with nothing but this crate (a doc test, so it runs with `cargo test`): a sequence
//! writes its rows and state, a snapshot of it goes into the prefix index, and a second
//! sequence resumes from it, sharing its pages.
//!
//! ```
//! use edge_kvcache::memory::decode_run;
//! use edge_kvcache::{
//!     AttentionLayerSpec, CacheConfig, CacheMemory, CacheSpec, HostMemory, KvDType,
//!     PagedCache, RecurrentLayerSpec, SequenceCache, SnapshotData,
//! };
//!
//! # fn main() -> edge_kvcache::Result<()> {
//! let config = CacheConfig { block_size: 4, kv_dtype: KvDType::Fp8E4M3, ..CacheConfig::default() };
//! let spec = CacheSpec {
//!     block_size: config.block_size,
//!     kv_dtype: config.kv_dtype,
//!     attention: vec![AttentionLayerSpec { kv_heads: 1, head_dim: 2, k_scale: 1.0, v_scale: 1.0 }],
//!     recurrent: vec![RecurrentLayerSpec { conv: 2, state: 4 }],
//! };
//! let mut cache = PagedCache::<HostMemory>::new(spec, config)?;
//!
//! // A prompt of 6 tokens: make its rows writable, write them, commit the length.
//! let prompt = [11, 12, 13, 14, 15, 16];
//! let seq = cache.new_sequence(prompt.len())?;
//! cache.prepare_rows(seq, 0..prompt.len())?;
//! let view = cache.sequence(seq)?;
//! let (pages, slot) = (view.pages.to_vec(), view.slot);
//! for (pos, &token) in prompt.iter().enumerate() {
//!     let row = [token as f32, -(pos as f32)];
//!     cache.memory_mut().kv_mut(0).write_row(pages[pos / 4], pos % 4, &row, &row)?;
//! }
//! cache.memory_mut().recurrent_mut(0).slots_mut(&[slot])?[0].1.fill(0.5);
//! cache.set_len(seq, prompt.len())?;
//!
//! // Keep it as a prefix, then serve a new request that starts with the same tokens.
//! assert!(cache.insert_snapshot(seq, &prompt, SnapshotData::default())?);
//! cache.release(seq)?;
//! let next = cache.new_sequence(8)?;
//! let hit = cache.lookup(&[11, 12, 13, 14, 15, 16, 17, 18], |_| true).expect("a cached prefix");
//! assert_eq!(hit.len, 6);
//! cache.restore(next, hit)?;
//! let view = cache.sequence(next)?;
//! assert_eq!((view.len, view.pages.len()), (6, 2));
//! let mut row = [0.0f32; 2];
//! decode_run(cache.memory().kv(0).keys(view.pages[1], 0, 1..2), 1.0, &mut row);
//! assert_eq!(row, [16.0, -5.0], "row 5 came back from the shared page");
//! # Ok(())
//! # }
//! ```

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
