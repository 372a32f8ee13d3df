//! [`PagedCache`]: pages with reference counts, one recurrent-state slot per live
//! sequence, the prefix index with its snapshots, and one byte budget over all of it.

mod config;
mod snapshots;

pub use config::{CacheConfig, CacheStats, CacheUsage};
pub use snapshots::{PrefixCandidate, PrefixHit, SnapshotData};

use crate::memory::{CacheMemory, HostMemory};
use crate::pool::{PagePool, SlotPool};
use crate::prefix::RadixTree;
use crate::{BlockId, CacheSpec, KvCacheError, Result, SeqId, SequenceCache, SequenceView, SlotId};
use snapshots::Entry;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

/// A saved recurrent state and length of one sequence, to roll it back to (e.g. after
/// a rejected speculative draft).
#[derive(Debug, PartialEq)]
pub struct SavedState<S> {
    len: usize,
    state: S,
}

#[derive(Debug)]
struct Sequence {
    pages: Vec<BlockId>,
    len: usize,
    slot: SlotId,
    /// Blocks this sequence may grow to without ever failing for lack of room.
    reserved_blocks: usize,
}

/// A paged KV cache with recurrent-state slots and a prefix index, over the memory of
/// one device (`M`).
///
/// Pages are shared between sequences and snapshots by reference count. A sequence
/// never writes a shared page: [`SequenceCache::prepare_rows`] copies it first. One
/// byte budget covers materialised pages, live slots and snapshots; snapshots nobody
/// uses are evicted least recently used first, and nothing a live sequence holds or
/// has reserved is ever evicted.
#[derive(Debug)]
pub struct PagedCache<M: CacheMemory> {
    memory: M,
    spec: CacheSpec,
    config: CacheConfig,
    pages: PagePool,
    slots: SlotPool,
    seqs: Vec<Option<Sequence>>,
    tree: RadixTree,
    entries: HashMap<u64, Entry<M::State>>,
    lru: BTreeSet<(u64, u64)>,
    next_entry: u64,
    tick: u64,
    snapshot_bytes: usize,
    stats: CacheStats,
}

impl PagedCache<HostMemory> {
    /// An empty cache in host memory for a model whose layers `spec` describes. The
    /// spec's page size and element type must be `config`'s (a model's
    /// `cache_spec(&config)` gives such a spec); a mismatch is a
    /// [`KvCacheError::Config`] error.
    pub fn new(spec: CacheSpec, config: CacheConfig) -> Result<Self> {
        Self::with_memory(HostMemory::new(&spec)?, config)
    }
}

impl<M: CacheMemory> PagedCache<M> {
    /// An empty cache over `memory` (built by its device for the model's spec), with
    /// `config`'s budget and page layout; a spec whose page size or element type is
    /// not `config`'s, or a budget below one block and one state slot, is a
    /// [`KvCacheError::Config`] error.
    pub fn with_memory(memory: M, config: CacheConfig) -> Result<Self> {
        let spec = memory.spec().clone();
        if (spec.block_size, spec.kv_dtype) != (config.block_size, config.kv_dtype) {
            return Err(KvCacheError::Config(format!(
                "the spec describes {}-token {} pages, the configuration {}-token {} pages",
                spec.block_size, spec.kv_dtype, config.block_size, config.kv_dtype
            )));
        }
        spec.validate()?;
        let floor = spec.block_bytes() + spec.state_bytes();
        if config.budget_bytes < floor {
            return Err(KvCacheError::Config(format!(
                "a budget of {} bytes cannot hold one block and one state slot ({floor} bytes)",
                config.budget_bytes
            )));
        }
        Ok(PagedCache {
            memory,
            spec,
            config,
            pages: PagePool::default(),
            slots: SlotPool::default(),
            seqs: Vec::new(),
            tree: RadixTree::default(),
            entries: HashMap::new(),
            lru: BTreeSet::new(),
            next_entry: 0,
            tick: 0,
            snapshot_bytes: 0,
            stats: CacheStats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The device memory.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Bytes held, by kind.
    pub fn usage(&self) -> CacheUsage {
        let bb = self.spec.block_bytes();
        CacheUsage {
            budget: self.config.budget_bytes,
            pages_in_use: self.pages.in_use() * bb,
            pages_free: self.pages.free_materialized() * bb,
            state_slots: self.slots.live() * self.spec.state_bytes(),
            slots_free: self.slots.free_materialized() * self.spec.state_bytes(),
            snapshots: self.snapshot_bytes,
            pinned: self.pinned(),
            sequences: self.seqs.iter().flatten().count(),
            entries: self.entries.len(),
        }
    }

    fn used(&self) -> usize {
        self.pages.materialized() * self.spec.block_bytes()
            + self.slots.materialized() * self.spec.state_bytes()
            + self.snapshot_bytes
    }

    /// Bytes that eviction can never free: each live sequence's pages (at least its
    /// reservation) and its state slot.
    fn pinned(&self) -> usize {
        let bb = self.spec.block_bytes();
        (self.seqs.iter().flatten())
            .map(|s| s.pages.len().max(s.reserved_blocks) * bb + self.spec.state_bytes())
            .sum()
    }

    fn seq(&self, seq: SeqId) -> Result<&Sequence> {
        (self.seqs.get(seq.index()).and_then(Option::as_ref))
            .ok_or(KvCacheError::UnknownSequence(seq))
    }

    fn seq_mut(&mut self, seq: SeqId) -> Result<&mut Sequence> {
        (self.seqs.get_mut(seq.index()).and_then(Option::as_mut))
            .ok_or(KvCacheError::UnknownSequence(seq))
    }

    fn over_budget(&self, needed: usize) -> KvCacheError {
        KvCacheError::OverBudget {
            needed,
            budget: self.config.budget_bytes,
            pinned: self.pinned(),
        }
    }

    /// Bytes a sequence of `rows` rows needs: its pages (one more for a
    /// copy-on-write) and its state slot.
    pub fn sequence_bytes(&self, rows: usize) -> usize {
        (self.spec.blocks_for(rows) + 1) * self.spec.block_bytes() + self.spec.state_bytes()
    }

    /// Starts an empty sequence, reserving room for `reserve_rows` rows: writes up to
    /// that many rows never fail for lack of room (rows past it may, when the budget is
    /// full of other live sequences).
    ///
    /// Errors with [`KvCacheError::OverBudget`] (changing nothing) when the budget
    /// cannot hold the reservation next to what live sequences pin.
    pub fn new_sequence(&mut self, reserve_rows: usize) -> Result<SeqId> {
        if let Some(max) = self.config.max_sequences
            && self.slots.live() >= max
        {
            return Err(KvCacheError::TooManySequences { max });
        }
        let needed = self.sequence_bytes(reserve_rows);
        if self.pinned() + needed > self.config.budget_bytes {
            return Err(self.over_budget(needed));
        }
        let slot = match self.slots.take_materialized() {
            Some(slot) => {
                if let Err(e) = self.memory.clear_state(slot) {
                    self.slots.give(slot);
                    return Err(e);
                }
                slot
            }
            None => {
                let state = self.spec.state_bytes();
                if !self.make_room(state) {
                    return Err(self.over_budget(state));
                }
                let slot = self.slots.take_bare();
                if let Err(e) = self.memory.materialize_slot(slot) {
                    self.slots.give_bare(slot);
                    return Err(e);
                }
                slot
            }
        };
        let s = Sequence {
            pages: Vec::new(),
            len: 0,
            slot,
            reserved_blocks: self.spec.blocks_for(reserve_rows) + 1,
        };
        let id = match self.seqs.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.seqs.push(None);
                self.seqs.len() - 1
            }
        };
        self.seqs[id] = Some(s);
        Ok(SeqId::new(id))
    }

    /// Whether [`PagedCache::new_sequence`] with `reserve_rows` would succeed now (a
    /// state slot free under the sequence limit, and the reservation beside what live
    /// sequences pin); a scheduler asks before it commits to a request.
    pub fn can_start(&self, reserve_rows: usize) -> bool {
        let under_limit = self
            .config
            .max_sequences
            .is_none_or(|max| self.slots.live() < max);
        under_limit && self.pinned() + self.sequence_bytes(reserve_rows) <= self.config.budget_bytes
    }

    /// The most rows one sequence can ever hold: the budget with nothing else live
    /// (0 when it cannot hold one block beside a state slot and a copy-on-write page).
    pub fn max_rows(&self) -> usize {
        let bb = self.spec.block_bytes();
        let pages = self
            .config
            .budget_bytes
            .saturating_sub(self.spec.state_bytes())
            / bb;
        pages.saturating_sub(1) * self.spec.block_size
    }

    /// Raises a live sequence's reservation to `rows` rows (a reservation never
    /// shrinks): writes up to that many rows then never fail for lack of room. This
    /// is how a sequence admitted with a short reservation grows as it decodes.
    ///
    /// Errors with [`KvCacheError::OverBudget`] (changing nothing) when the budget
    /// cannot hold the larger reservation beside what the other live sequences pin:
    /// the caller may free a sequence (preempt it) and ask again.
    pub fn reserve(&mut self, seq: SeqId, rows: usize) -> Result<()> {
        let bb = self.spec.block_bytes();
        let target = self.spec.blocks_for(rows) + 1;
        let s = self.seq(seq)?;
        let held = s.pages.len().max(s.reserved_blocks);
        if target <= held {
            return Ok(());
        }
        let needed = (target - held) * bb;
        if self.pinned() + needed > self.config.budget_bytes {
            return Err(self.over_budget(needed));
        }
        self.seq_mut(seq)?.reserved_blocks = target;
        Ok(())
    }

    /// Ends a sequence: its pages lose a reference and its state slot is freed.
    pub fn release(&mut self, seq: SeqId) -> Result<()> {
        self.seq(seq)?;
        let s = self.seqs[seq.index()].take().expect("checked above");
        for p in s.pages {
            self.unref_page(p);
        }
        self.slots.give(s.slot);
        Ok(())
    }

    /// Rolls a sequence back to `len` rows, dropping pages past them. Its recurrent
    /// state is the caller's (see [`PagedCache::save_state`]).
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let keep = self.spec.blocks_for(len);
        let s = self.seq_mut(seq)?;
        if len > s.len {
            return Err(KvCacheError::Rows {
                seq,
                reason: format!("cannot truncate {} rows to {len}", s.len),
            });
        }
        s.len = len;
        let dropped: Vec<BlockId> = s.pages.drain(keep.min(s.pages.len())..).collect();
        for p in dropped {
            self.unref_page(p);
        }
        Ok(())
    }

    /// A copy of a sequence's recurrent state and its length.
    pub fn save_state(&self, seq: SeqId) -> Result<SavedState<M::State>> {
        let s = self.seq(seq)?;
        Ok(SavedState {
            len: s.len,
            state: self.memory.save_state(s.slot)?,
        })
    }

    /// Returns a sequence to a state saved from it earlier: its length and recurrent
    /// state (rows written past the length stay in their pages, to be overwritten).
    /// When the memory fails the copy, the length is unchanged and the slot's state is
    /// unspecified.
    pub fn restore_state(&mut self, seq: SeqId, saved: &SavedState<M::State>) -> Result<()> {
        let block = self.spec.block_size;
        let s = self.seq(seq)?;
        if saved.len > s.pages.len() * block {
            return Err(KvCacheError::Rows {
                seq,
                reason: format!("saved length {} is past the sequence's pages", saved.len),
            });
        }
        let slot = s.slot;
        self.memory.load_state(slot, &saved.state)?;
        self.seq_mut(seq)?.len = saved.len;
        Ok(())
    }

    fn unref_page(&mut self, page: BlockId) {
        self.pages.unref(page);
    }

    /// A fresh page for a sequence, evicting snapshots if the budget needs it.
    fn alloc_page(&mut self) -> Result<BlockId> {
        loop {
            if let Some(p) = self.pages.take_materialized() {
                return Ok(p);
            }
            let bb = self.spec.block_bytes();
            if self.used() + bb <= self.config.budget_bytes {
                let p = self.pages.take_bare();
                if let Err(e) = self.memory.materialize_page(p) {
                    self.pages.give_bare(p);
                    return Err(e);
                }
                return Ok(p);
            }
            if let Some(s) = self.slots.strip_free() {
                self.memory.drop_slot(s);
                continue;
            }
            if !self.evict_one() {
                return Err(self.over_budget(bb));
            }
        }
    }

    /// Frees memory until `bytes` more fit: unused page and slot storage first, then the
    /// least recently used snapshots. False if even that is not enough.
    fn make_room(&mut self, bytes: usize) -> bool {
        while self.used() + bytes > self.config.budget_bytes {
            if let Some(p) = self.pages.strip_free() {
                self.memory.drop_page(p);
                continue;
            }
            if let Some(s) = self.slots.strip_free() {
                self.memory.drop_slot(s);
                continue;
            }
            if !self.evict_one() {
                return false;
            }
        }
        true
    }

    /// Recounts every page's references from the live sequences and snapshots and
    /// compares them with the pool's counts: an error names the first page whose
    /// count is off (for tests; a leak or a double free shows here).
    pub fn verify_refcounts(&self) -> std::result::Result<(), String> {
        let mut counted: HashMap<BlockId, u32> = HashMap::new();
        let pages = (self.seqs.iter().flatten().flat_map(|s| &s.pages))
            .chain(self.entries.values().flat_map(|e| &e.pages));
        for &p in pages {
            *counted.entry(p).or_default() += 1;
        }
        if counted.len() != self.pages.in_use() {
            return Err(format!(
                "{} pages referenced, the pool counts {} in use",
                counted.len(),
                self.pages.in_use()
            ));
        }
        for (p, n) in counted {
            if self.pages.refs(p) != n {
                return Err(format!(
                    "page {p:?}: {n} references, pool says {}",
                    self.pages.refs(p)
                ));
            }
        }
        Ok(())
    }

    /// Pages referenced by anything (for tests of reference counting).
    pub fn pages_in_use(&self) -> usize {
        self.pages.in_use()
    }

    /// Radix-tree nodes (for tests).
    pub fn index_nodes(&self) -> usize {
        self.tree.node_count()
    }
}

impl<M: CacheMemory> SequenceCache for PagedCache<M> {
    type Memory = M;

    fn spec(&self) -> &CacheSpec {
        &self.spec
    }

    fn sequence(&self, seq: SeqId) -> Result<SequenceView<'_>> {
        let s = self.seq(seq)?;
        Ok(SequenceView {
            pages: &s.pages,
            len: s.len,
            slot: s.slot,
        })
    }

    fn prepare_rows(&mut self, seq: SeqId, rows: Range<usize>) -> Result<()> {
        let block = self.spec.block_size;
        let s = self.seq(seq)?;
        if rows.start > s.pages.len() * block || rows.start > rows.end {
            return Err(KvCacheError::Rows {
                seq,
                reason: format!(
                    "rows {rows:?} do not follow the {} rows its pages hold",
                    s.pages.len() * block
                ),
            });
        }
        if rows.is_empty() {
            return Ok(());
        }
        // Copy shared pages the rows fall in, then add pages past the end.
        let first = rows.start / block;
        let last = (rows.end - 1) / block;
        for b in first..(last + 1).min(s.pages.len()) {
            let page = self.seq(seq)?.pages[b];
            if self.pages.refs(page) > 1 {
                let fresh = self.alloc_page()?;
                // Rows of the page before the write start are kept; the rest will be
                // written.
                let keep = rows.start.saturating_sub(b * block).min(block);
                let len = self.seq(seq)?.len;
                let valid = len.saturating_sub(b * block).min(block);
                if let Err(e) = self.memory.copy_rows(page, fresh, keep.max(valid)) {
                    self.unref_page(fresh);
                    return Err(e);
                }
                self.unref_page(page);
                self.seq_mut(seq)?.pages[b] = fresh;
                self.stats.copy_on_write += 1;
            }
        }
        while self.seq(seq)?.pages.len() <= last {
            let fresh = self.alloc_page()?;
            self.seq_mut(seq)?.pages.push(fresh);
        }
        Ok(())
    }

    fn set_len(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let block = self.spec.block_size;
        let s = self.seq_mut(seq)?;
        if len > s.pages.len() * block {
            return Err(KvCacheError::Rows {
                seq,
                reason: format!("length {len} is past its {} pages", s.pages.len()),
            });
        }
        s.len = len;
        Ok(())
    }

    fn memory_mut(&mut self) -> &mut M {
        &mut self.memory
    }
}
