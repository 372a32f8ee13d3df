//! Where a batch's rows go: the plan the layer operations read beside their
//! activations (each sequence's rows, cache pages, state slot and token tree).
//!
//! Only the model builds plans, from a validated [`crate::StepBatch`] and the cache
//! (`Qwen35Model::forward`), so every index in one is in bounds; a backend reads them
//! through the accessors.

use edge_kvcache::{BlockId, SlotId};
use std::ops::Range;

/// One sequence's share of a forward pass, as the layer operations see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanPlan {
    /// Its rows of the batch.
    pub(crate) rows: Range<usize>,
    /// The cache row (= position) of its first row; row `i` of the span is cache row
    /// `first + i` and attends to cache rows `0..=first + i`.
    pub(crate) first: usize,
    /// Its pages, covering at least cache rows `0..first + rows.len()`.
    pub(crate) pages: Vec<BlockId>,
    /// Its recurrent-state slot.
    pub(crate) slot: SlotId,
    /// For a token tree: where its rows are stored and what they see (`first` is then
    /// the committed end, and every row also sees the rows before it).
    pub(crate) tree: Option<TreePlan>,
}

/// A token-tree span's layout as the operations see it (see
/// [`crate::TreeLayout`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    /// Per row: its cache row as an offset from the committed end.
    pub(crate) slots: Vec<u32>,
    /// Per row: the offsets past the committed end that its attention sees.
    pub(crate) visible: Vec<u64>,
    /// Per row: its parent row within the span (`None` for a root, whose recurrent
    /// inputs continue the committed state).
    pub(crate) parents: Vec<Option<u32>>,
}

impl TreePlan {
    /// Per row: its cache row as an offset from the committed end.
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }

    /// Per row: the offsets past the committed end that its attention sees (bit `j`:
    /// offset `j`).
    pub fn visible(&self) -> &[u64] {
        &self.visible
    }

    /// Per row: its parent row within the span (`None` for a root).
    pub fn parents(&self) -> &[Option<u32>] {
        &self.parents
    }

    /// Cache rows past the committed end that the tree touches.
    pub fn extent(&self) -> usize {
        self.slots
            .iter()
            .map(|&s| s as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Row `row`'s path from its root, root first.
    pub fn path(&self, row: usize) -> Vec<usize> {
        let mut path = vec![row];
        while let Some(p) = self.parents[*path.last().expect("non-empty")] {
            path.push(p as usize);
        }
        path.reverse();
        path
    }
}

impl SpanPlan {
    /// Its rows of the batch.
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// The cache row (= position) of its first row (for a tree, the committed end).
    pub fn first(&self) -> usize {
        self.first
    }

    /// Its pages.
    pub fn pages(&self) -> &[BlockId] {
        &self.pages
    }

    /// Its recurrent-state slot.
    pub fn slot(&self) -> SlotId {
        self.slot
    }

    /// Its token-tree layout, for a tree span.
    pub fn tree(&self) -> Option<&TreePlan> {
        self.tree.as_ref()
    }

    /// Rows in the span.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True for an empty span (never in a validated plan).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Everything the layer operations need to know about a batch besides its
/// activations: where each row goes in the cache and whose state it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardPlan {
    /// The spans, in row order.
    pub(crate) spans: Vec<SpanPlan>,
    /// The position of each row (RoPE).
    pub(crate) positions: Vec<u32>,
    /// Tokens per KV page.
    pub(crate) block_size: usize,
}

impl ForwardPlan {
    /// The spans, in row order.
    pub fn spans(&self) -> &[SpanPlan] {
        &self.spans
    }

    /// The position of each row (RoPE).
    pub fn positions(&self) -> &[u32] {
        &self.positions
    }

    /// Tokens per KV page.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Rows of the batch.
    pub fn tokens(&self) -> usize {
        self.positions.len()
    }

    /// The page and row within it where batch row `row` of `span` is cached.
    pub fn kv_slot(&self, span: &SpanPlan, row: usize) -> (BlockId, usize) {
        let offset = match &span.tree {
            Some(tree) => tree.slots[row] as usize,
            None => row,
        };
        self.cache_slot(span, span.first + offset)
    }

    /// The page and row within it of cache row `r` of `span`'s sequence.
    pub fn cache_slot(&self, span: &SpanPlan, r: usize) -> (BlockId, usize) {
        (span.pages[r / self.block_size], r % self.block_size)
    }

    /// True when some span is a token tree.
    pub fn has_trees(&self) -> bool {
        self.spans.iter().any(|s| s.tree.is_some())
    }

    /// The state slots of the spans, in order.
    pub fn slots(&self) -> Vec<SlotId> {
        self.spans.iter().map(|s| s.slot).collect()
    }

    /// One chain span of `rows` rows on `span`'s state slot: what a tree commit runs its
    /// accepted path through to advance the Gated DeltaNet (its ops read only the spans'
    /// rows and slots; the plan has no pages).
    pub(crate) fn gdn_chain(span: &SpanPlan, rows: usize) -> ForwardPlan {
        ForwardPlan {
            spans: vec![SpanPlan {
                rows: 0..rows,
                first: span.first,
                pages: Vec::new(),
                slot: span.slot,
                tree: None,
            }],
            positions: vec![0; rows],
            block_size: 1,
        }
    }
}
