//! Where cache memory lives: one implementation per device behind [`CacheMemory`].
//! The bookkeeping (pages, reference counts, the prefix index, the budget) is in
//! [`crate::PagedCache`] and is the same for every device; only the storage and the
//! copies that snapshot, restore and copy-on-write need differ.

mod host;

pub use host::{HostKv, HostMemory, HostRecurrent, HostState, KvRun, decode_run};

use crate::{BlockId, CacheSpec, Result, SlotId};

/// Storage of KV pages and recurrent-state slots on one device.
///
/// Page and slot ids are dense indices chosen by the cache; storage for an id exists
/// between [`CacheMemory::materialize_page`] (or `_slot`) and the matching `drop_*`.
///
/// Allocations and copies are fallible ([`crate::KvCacheError::Memory`]): device
/// memory runs out, and device copies can fail. The host's never do.
///
/// The trait has no constructor: a device memory needs its device (and may size its
/// pools from the cache budget), so whoever owns the device builds it, and
/// [`crate::PagedCache::with_memory`] takes it. [`HostMemory::new`] builds host memory.
pub trait CacheMemory: Send + Sized + std::fmt::Debug {
    /// One attention layer's pages (keys and values).
    type Kv: Send + Sync + std::fmt::Debug;
    /// One recurrent layer's slots (conv window and state).
    type Recurrent: Send + std::fmt::Debug;
    /// A saved copy of one slot's state in every recurrent layer (a snapshot).
    type State: Send + std::fmt::Debug;

    /// The spec it was made for.
    fn spec(&self) -> &CacheSpec;

    /// Gives page `page` storage in every attention layer (contents unspecified).
    fn materialize_page(&mut self, page: BlockId) -> Result<()>;

    /// Releases page `page`'s storage (never fails: a device that cannot free keeps
    /// the storage to itself).
    fn drop_page(&mut self, page: BlockId);

    /// Gives slot `slot` storage in every recurrent layer, zeroed.
    fn materialize_slot(&mut self, slot: SlotId) -> Result<()>;

    /// Releases slot `slot`'s storage.
    fn drop_slot(&mut self, slot: SlotId);

    /// Copies rows `0..rows` of page `from` to page `to` in every attention layer
    /// (copy-on-write of a shared, partly filled page).
    fn copy_rows(&mut self, from: BlockId, to: BlockId, rows: usize) -> Result<()>;

    /// Zeroes a slot's conv windows and states (a fresh sequence).
    fn clear_state(&mut self, slot: SlotId) -> Result<()>;

    /// A copy of a slot's state.
    fn save_state(&self, slot: SlotId) -> Result<Self::State>;

    /// Overwrites a slot's state with a saved copy.
    fn load_state(&mut self, slot: SlotId, state: &Self::State) -> Result<()>;

    /// Attention layer `layer`'s pages.
    fn kv(&self, layer: usize) -> &Self::Kv;

    /// Attention layer `layer`'s pages, writable.
    fn kv_mut(&mut self, layer: usize) -> &mut Self::Kv;

    /// Recurrent layer `layer`'s slots, writable.
    fn recurrent_mut(&mut self, layer: usize) -> &mut Self::Recurrent;
}
