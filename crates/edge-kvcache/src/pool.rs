//! Id pools: pages with reference counts, and state slots.

use crate::{BlockId, SlotId};

/// Page ids with reference counts. A free page either keeps its storage
/// ("materialised", reused first) or has none ("bare").
#[derive(Debug, Default)]
pub(crate) struct PagePool {
    refs: Vec<u32>,
    free_materialized: Vec<BlockId>,
    free_bare: Vec<BlockId>,
    in_use: usize,
}

impl PagePool {
    /// Pages with at least one reference.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Free pages that keep their storage.
    pub fn free_materialized(&self) -> usize {
        self.free_materialized.len()
    }

    /// Pages with storage, used or free.
    pub fn materialized(&self) -> usize {
        self.in_use + self.free_materialized.len()
    }

    pub fn refs(&self, page: BlockId) -> u32 {
        self.refs[page.index()]
    }

    /// A free page that has storage, now referenced once.
    pub fn take_materialized(&mut self) -> Option<BlockId> {
        let p = self.free_materialized.pop()?;
        self.refs[p.index()] = 1;
        self.in_use += 1;
        Some(p)
    }

    /// A page without storage (a new id if none is free), now referenced once; the
    /// caller gives it storage.
    pub fn take_bare(&mut self) -> BlockId {
        let p = self.free_bare.pop().unwrap_or_else(|| {
            self.refs.push(0);
            BlockId::new(self.refs.len() - 1)
        });
        self.refs[p.index()] = 1;
        self.in_use += 1;
        p
    }

    /// Undoes [`PagePool::take_bare`] when the page could not be given storage.
    pub fn give_bare(&mut self, page: BlockId) {
        debug_assert_eq!(self.refs[page.index()], 1, "a page just taken bare");
        self.refs[page.index()] = 0;
        self.in_use -= 1;
        self.free_bare.push(page);
    }

    /// A free page with storage, moved to the bare list: the caller drops its
    /// storage.
    pub fn strip_free(&mut self) -> Option<BlockId> {
        let p = self.free_materialized.pop()?;
        self.free_bare.push(p);
        Some(p)
    }

    pub fn add_ref(&mut self, page: BlockId) {
        self.refs[page.index()] += 1;
    }

    /// Drops a reference; the last one puts the page on the free list (storage kept).
    pub fn unref(&mut self, page: BlockId) {
        let r = &mut self.refs[page.index()];
        assert!(*r > 0, "page {page:?} has no reference to drop");
        *r -= 1;
        if *r == 0 {
            self.in_use -= 1;
            self.free_materialized.push(page);
        }
    }
}

/// State slot ids. A free slot either keeps its storage (reused first: allocating a
/// slot's tens of megabytes afresh page-faults them in, about as long as a short
/// prefill) or has none.
#[derive(Debug, Default)]
pub(crate) struct SlotPool {
    next: usize,
    free_materialized: Vec<SlotId>,
    free_bare: Vec<SlotId>,
}

impl SlotPool {
    /// A free slot with storage, if any.
    pub fn take_materialized(&mut self) -> Option<SlotId> {
        self.free_materialized.pop()
    }

    /// A slot without storage (a new id if none is free); the caller gives it storage.
    pub fn take_bare(&mut self) -> SlotId {
        self.free_bare.pop().unwrap_or_else(|| {
            self.next += 1;
            SlotId::new(self.next - 1)
        })
    }

    /// Undoes [`SlotPool::take_bare`] when the slot could not be given storage.
    pub fn give_bare(&mut self, slot: SlotId) {
        self.free_bare.push(slot);
    }

    /// Returns a slot, keeping its storage.
    pub fn give(&mut self, slot: SlotId) {
        self.free_materialized.push(slot);
    }

    /// A free slot with storage, moved to the bare list: the caller drops its storage.
    pub fn strip_free(&mut self) -> Option<SlotId> {
        let s = self.free_materialized.pop()?;
        self.free_bare.push(s);
        Some(s)
    }

    /// Slots owned by sequences.
    pub fn live(&self) -> usize {
        self.next - self.free_materialized.len() - self.free_bare.len()
    }

    /// Slots with storage, owned or free.
    pub fn materialized(&self) -> usize {
        self.next - self.free_bare.len()
    }

    /// Free slots that keep their storage.
    pub fn free_materialized(&self) -> usize {
        self.free_materialized.len()
    }
}
