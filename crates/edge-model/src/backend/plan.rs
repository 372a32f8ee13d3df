//! Where a batch's rows go: the plan the layer operations read beside their
//! activations (each sequence's rows, cache pages, state slot and token tree).

use edge_kvcache::{BlockId, SlotId};
use std::ops::Range;

/// One sequence's share of a forward pass, as the layer operations see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanPlan {
    /// Its rows of the batch.
    pub rows: Range<usize>,
    /// The cache row (= position) of its first row; row `i` of the span is cache row
    /// `first + i` and attends to cache rows `0..=first + i`.
    pub first: usize,
    /// Its pages, covering at least cache rows `0..first + rows.len()`.
    pub pages: Vec<BlockId>,
    /// Its recurrent-state slot.
    pub slot: SlotId,
    /// For a token tree: where its rows are stored and what they see (`first` is then
    /// the committed end, and every row also sees the rows before it).
    pub tree: Option<TreePlan>,
}

/// A token-tree span's layout as the operations see it (see
/// [`crate::TreeLayout`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    /// Per row: its cache row as an offset from the committed end.
    pub slots: Vec<u32>,
    /// Per row: the offsets past the committed end that its attention sees.
    pub visible: Vec<u64>,
    /// Per row: its parent row within the span (`None` for a root, whose recurrent
    /// inputs continue the committed state).
    pub parents: Vec<Option<u32>>,
}

impl TreePlan {
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
    pub spans: Vec<SpanPlan>,
    /// The position of each row (RoPE).
    pub positions: Vec<u32>,
    /// Tokens per KV page.
    pub block_size: usize,
}

impl ForwardPlan {
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
    pub fn gdn_chain(span: &SpanPlan, rows: usize) -> ForwardPlan {
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
