//! The prefix index side of [`PagedCache`]: storing, finding, restoring and evicting
//! snapshots.

use super::PagedCache;
use crate::memory::CacheMemory;
use crate::prefix::NodeId;
use crate::{BlockId, KvCacheError, Result, SeqId};

/// What a snapshot keeps besides pages and state: the rows a caller needs to resume
/// exactly where the snapshot was taken.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotData {
    /// Logits of the last token (`[vocab]`): a request whose whole prompt is cached
    /// samples its first token from them without running the model.
    pub logits: Option<Vec<f32>>,
    /// The final-normed hidden state of the last token (`[hidden]`): the input the MTP
    /// head pairs with the token that follows.
    pub hidden: Option<Vec<f32>>,
    /// Caller-defined fingerprint of how the cached rows were computed (see
    /// [`PrefixCandidate::tag`]).
    pub tag: u64,
}

impl SnapshotData {
    fn bytes(&self) -> usize {
        4 * (self.logits.as_ref().map_or(0, Vec::len) + self.hidden.as_ref().map_or(0, Vec::len))
    }
}

/// A snapshot found on a prompt's path, offered to the caller's filter of
/// [`PagedCache::lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixCandidate {
    /// Tokens it covers (a prefix of the looked-up prompt).
    pub len: usize,
    /// [`SnapshotData::tag`] as inserted.
    pub tag: u64,
    /// It carries last-token logits.
    pub has_logits: bool,
    /// It carries a last-token hidden state.
    pub has_hidden: bool,
}

/// The snapshot [`PagedCache::lookup`] chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefixHit {
    entry: u64,
    /// Tokens it covers.
    pub len: usize,
}

#[derive(Debug)]
pub(super) struct Entry<S> {
    pub(super) node: NodeId,
    pub(super) len: usize,
    pub(super) pages: Vec<BlockId>,
    pub(super) state: S,
    pub(super) data: SnapshotData,
    pub(super) bytes: usize,
    pub(super) tick: u64,
}

impl<M: CacheMemory> PagedCache<M> {
    pub(super) fn evict_one(&mut self) -> bool {
        let Some(&(tick, id)) = self.lru.first() else {
            return false;
        };
        self.lru.remove(&(tick, id));
        self.remove_entry(id);
        self.stats.evictions += 1;
        true
    }

    fn remove_entry(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id) {
            self.lru.remove(&(e.tick, id));
            self.tree.remove_entry(e.node);
            self.snapshot_bytes -= e.bytes;
            for p in e.pages {
                self.unref_page(p);
            }
        }
    }

    /// Stores a snapshot of `seq` as it is now (its first `tokens.len()` rows and its
    /// recurrent state, which must have absorbed exactly those tokens) under
    /// `tokens`. It shares the sequence's pages; later writes of the sequence copy a
    /// shared page first. A snapshot already at `tokens` is replaced.
    ///
    /// Returns false (storing nothing) when prefix caching is off, or when the budget
    /// has no room even after evicting older snapshots. If the memory fails the state
    /// copy ([`KvCacheError::Memory`]), nothing is stored and a snapshot it was to
    /// replace is gone.
    pub fn insert_snapshot(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        data: SnapshotData,
    ) -> Result<bool> {
        let s = self.seq(seq)?;
        if s.len != tokens.len() {
            return Err(KvCacheError::Rows {
                seq,
                reason: format!(
                    "snapshot of {} tokens taken from a sequence of {} rows",
                    tokens.len(),
                    s.len
                ),
            });
        }
        if !self.config.prefix_cache || tokens.is_empty() {
            return Ok(false);
        }
        let bytes = self.spec.state_bytes() + data.bytes();
        // A snapshot at the same tokens is replaced: free it first so that its bytes
        // count as room.
        let node = self.tree.insert(tokens);
        if let Some(old) = self.tree.set_entry(node, u64::MAX) {
            self.remove_entry_keep_node(old);
        }
        if !self.make_room(bytes) {
            self.tree.remove_entry(node);
            self.stats.snapshots_skipped += 1;
            return Ok(false);
        }
        // `make_room` may have pruned and reused tree nodes: look the node up again.
        let node = self.tree.insert(tokens);
        let s = self.seq(seq)?;
        let pages = s.pages[..self.spec.blocks_for(tokens.len())].to_vec();
        let state = match self.memory.save_state(s.slot) {
            Ok(state) => state,
            Err(e) => {
                self.tree.remove_entry(node);
                return Err(e);
            }
        };
        for &p in &pages {
            self.pages.add_ref(p);
        }
        let id = self.next_entry;
        self.next_entry += 1;
        self.tick += 1;
        self.tree.set_entry(node, id);
        self.lru.insert((self.tick, id));
        self.snapshot_bytes += bytes;
        self.entries.insert(
            id,
            Entry {
                node,
                len: tokens.len(),
                pages,
                state,
                data,
                bytes,
                tick: self.tick,
            },
        );
        self.stats.snapshots += 1;
        Ok(true)
    }

    /// Removes an entry whose node keeps a placeholder (the caller re-sets it).
    fn remove_entry_keep_node(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id) {
            self.lru.remove(&(e.tick, id));
            self.snapshot_bytes -= e.bytes;
            for p in e.pages {
                self.unref_page(p);
            }
        }
    }

    /// The longest snapshot on `tokens`' path that `accept` takes, or `None` (always
    /// `None` with prefix caching off).
    pub fn lookup(
        &mut self,
        tokens: &[u32],
        accept: impl Fn(&PrefixCandidate) -> bool,
    ) -> Option<PrefixHit> {
        self.stats.lookups += 1;
        if !self.config.prefix_cache {
            return None;
        }
        let path = self.tree.entries_on_path(tokens);
        path.into_iter().rev().find_map(|(len, id)| {
            let e = self.entries.get(&id)?;
            let candidate = PrefixCandidate {
                len,
                tag: e.data.tag,
                has_logits: e.data.logits.is_some(),
                has_hidden: e.data.hidden.is_some(),
            };
            accept(&candidate).then_some(PrefixHit { entry: id, len })
        })
    }

    /// Makes an empty sequence resume from a snapshot: it shares the snapshot's pages,
    /// its state slot gets the snapshot's state, and its length becomes the
    /// snapshot's. Returns the snapshot's data. If the memory fails the state copy
    /// ([`KvCacheError::Memory`]), the sequence stays empty (its slot's state
    /// unspecified) and the snapshot stays cached.
    pub fn restore(&mut self, seq: SeqId, hit: PrefixHit) -> Result<SnapshotData> {
        let s = self.seq(seq)?;
        if s.len != 0 || !s.pages.is_empty() {
            return Err(KvCacheError::Rows {
                seq,
                reason: "a snapshot can only be restored into an empty sequence".into(),
            });
        }
        let slot = s.slot;
        let e = (self.entries.get_mut(&hit.entry)).ok_or(KvCacheError::UnknownEntry(hit.entry))?;
        self.memory.load_state(slot, &e.state)?;
        self.lru.remove(&(e.tick, hit.entry));
        self.tick += 1;
        e.tick = self.tick;
        self.lru.insert((self.tick, hit.entry));
        let (pages, len, data) = (e.pages.clone(), e.len, e.data.clone());
        for &p in &pages {
            self.pages.add_ref(p);
        }
        let s = self.seq_mut(seq)?;
        s.pages = pages;
        s.len = len;
        self.stats.hits += 1;
        self.stats.hit_tokens += len as u64;
        Ok(data)
    }

    /// Drops every snapshot (pages they alone held are freed).
    pub fn clear_prefixes(&mut self) {
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        for id in ids {
            self.remove_entry(id);
        }
    }
}
