//! A forward pass's attention as flat per-row arrays, the form a device kernel reads:
//! each query row names its sequence's page-table row, the cached rows it sees in order
//! from the start, and the token-tree rows it also sees. Built once per pass from the
//! [`ForwardPlan`] and shared by every attention layer (the CUDA backend uploads it once).

use crate::backend::ForwardPlan;
use crate::error::dim_u32;
use crate::{ModelError, Result};

/// Which cached rows every query row of a pass attends to.
///
/// Query row `i` sees its sequence's cache rows `0 .. lens[i]` and also row
/// `lens[i] + o` for every bit `o` set in `masks[i]`. A decode or prompt row has
/// `lens = position + 1` and no mask; a token-tree node has `lens` = the committed end
/// and its visible tree rows in the mask.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionRows {
    /// Page ids, `[spans, max_pages]`; a span's unused tail entries repeat its first page
    /// (every entry must name a page).
    pub table: Vec<u32>,
    /// Table entries per span.
    pub max_pages: usize,
    /// Rows per page.
    pub block_size: usize,
    /// Per query row: its span (row of `table`).
    pub span_of: Vec<u32>,
    /// Per query row: the cache rows from the start it sees.
    pub lens: Vec<u32>,
    /// Per query row: the tree rows past `lens` it also sees.
    pub masks: Vec<u64>,
    /// Per query row: the cache slot (`page · block_size + row`) its keys and values are
    /// stored in.
    pub stores: Vec<u32>,
}

impl AttentionRows {
    /// The rows of `plan`, in batch order.
    pub fn from_plan(plan: &ForwardPlan) -> Result<Self> {
        let max_pages = plan.spans.iter().map(|s| s.pages.len()).max().unwrap_or(0);
        let mut rows = AttentionRows {
            table: Vec::with_capacity(plan.spans.len() * max_pages),
            max_pages,
            block_size: plan.block_size,
            span_of: Vec::with_capacity(plan.tokens()),
            lens: Vec::with_capacity(plan.tokens()),
            masks: Vec::with_capacity(plan.tokens()),
            stores: Vec::with_capacity(plan.tokens()),
        };
        for (s, span) in plan.spans.iter().enumerate() {
            let Some(&head) = span.pages.first() else {
                return Err(ModelError::InvalidPlan {
                    op: "attention rows",
                    reason: format!("span {s} has no pages"),
                });
            };
            let ids = span.pages.iter().map(|p| p.index());
            let pad = std::iter::repeat_n(head.index(), max_pages - span.pages.len());
            for id in ids.chain(pad) {
                rows.table.push(dim_u32("attention rows", "page id", id)?);
            }
            if let Some(tree) = &span.tree
                && (tree.slots.len() != span.len() || tree.visible.len() != span.len())
            {
                return Err(ModelError::InvalidPlan {
                    op: "attention rows",
                    reason: format!(
                        "span {s} has {} rows, its tree {} slots and {} masks",
                        span.len(),
                        tree.slots.len(),
                        tree.visible.len()
                    ),
                });
            }
            let extent = span.tree.as_ref().map_or(span.len(), |t| t.extent());
            if span.first + extent > span.pages.len() * plan.block_size {
                return Err(ModelError::InvalidPlan {
                    op: "attention rows",
                    reason: format!(
                        "span {s} reaches row {} with {} pages of {}",
                        span.first + extent - 1,
                        span.pages.len(),
                        plan.block_size
                    ),
                });
            }
            for i in 0..span.len() {
                let (len, mask) = match &span.tree {
                    Some(tree) => (span.first, tree.visible[i]),
                    None => (span.first + i + 1, 0),
                };
                let (page, row) = plan.kv_slot(span, i);
                let slot = page.index() * plan.block_size + row;
                rows.span_of.push(dim_u32("attention rows", "span", s)?);
                rows.lens.push(dim_u32("attention rows", "row", len)?);
                rows.masks.push(mask);
                rows.stores
                    .push(dim_u32("attention rows", "cache slot", slot)?);
            }
        }
        rows.check()?;
        Ok(rows)
    }

    /// One decode row per span: span `s` sees its first `lens[s]` rows and stores its
    /// own keys and values in the last of them.
    #[cfg(test)]
    pub fn decode(
        table: Vec<u32>,
        max_pages: usize,
        block_size: usize,
        lens: Vec<u32>,
    ) -> Result<Self> {
        let mut rows = AttentionRows {
            table,
            max_pages,
            block_size,
            span_of: (0..lens.len() as u32).collect(),
            masks: vec![0; lens.len()],
            stores: vec![0; lens.len()],
            lens,
        };
        rows.check()?;
        for (s, &len) in rows.lens.iter().enumerate() {
            let r = len as usize - 1;
            let page = rows.table[s * max_pages + r / block_size] as usize;
            rows.stores[s] = dim_u32(
                "attention rows",
                "cache slot",
                page * block_size + r % block_size,
            )?;
        }
        Ok(rows)
    }

    /// Query rows.
    pub fn rows(&self) -> usize {
        self.lens.len()
    }

    /// Spans (rows of the page table).
    pub fn spans(&self) -> usize {
        self.table.len().checked_div(self.max_pages).unwrap_or(0)
    }

    /// One past the last cache row query row `i` sees.
    pub fn end(&self, i: usize) -> usize {
        let extent = 64 - self.masks[i].leading_zeros() as usize;
        self.lens[i] as usize + extent
    }

    /// One past the last cache row any query row sees (0 without rows).
    pub fn longest(&self) -> usize {
        (0..self.rows()).map(|i| self.end(i)).max().unwrap_or(0)
    }

    /// The rows cut into tiles for a kernel that reads the cache once per tile: runs of
    /// consecutive rows of one span, at most `most` rows each (at least 1). A prompt
    /// chunk or a token tree becomes few tiles; a batch of decode rows one tile each.
    pub fn query_tiles(&self, most: usize) -> Result<QueryTiles> {
        let most = most.max(1);
        let mut tiles = QueryTiles::default();
        for (i, &span) in self.span_of.iter().enumerate() {
            match (tiles.first.last(), tiles.count.last_mut()) {
                (Some(&first), Some(count))
                    if self.span_of[first as usize] == span && (*count as usize) < most =>
                {
                    *count += 1
                }
                _ => {
                    tiles.first.push(dim_u32("attention tiles", "row", i)?);
                    tiles.count.push(1);
                }
            }
        }
        Ok(tiles)
    }

    /// Checks the arrays against each other: one entry per row, spans inside the table,
    /// every row sees at least one cache row and no row past its table.
    pub fn check(&self) -> Result<()> {
        let bad = |reason: String| {
            Err(ModelError::InvalidPlan {
                op: "attention rows",
                reason,
            })
        };
        let n = self.lens.len();
        if self.span_of.len() != n || self.masks.len() != n || self.stores.len() != n {
            return bad(format!(
                "{n} lens, {} spans, {} masks, {} stores",
                self.span_of.len(),
                self.masks.len(),
                self.stores.len()
            ));
        }
        if self.block_size == 0 || (n > 0 && self.max_pages == 0) {
            return bad(format!(
                "block {} with {} pages a span",
                self.block_size, self.max_pages
            ));
        }
        if self.max_pages > 0 && !self.table.len().is_multiple_of(self.max_pages) {
            return bad(format!(
                "a table of {} entries, {} a span",
                self.table.len(),
                self.max_pages
            ));
        }
        let capacity = self.max_pages * self.block_size;
        for i in 0..n {
            if self.span_of[i] as usize >= self.spans() {
                return bad(format!(
                    "row {i} names span {} of {}",
                    self.span_of[i],
                    self.spans()
                ));
            }
            if self.lens[i] == 0 && self.masks[i] == 0 {
                return bad(format!("row {i} sees no cache row"));
            }
            if self.end(i) > capacity {
                return bad(format!(
                    "row {i} sees row {} past its table's {capacity}",
                    self.end(i) - 1
                ));
            }
        }
        Ok(())
    }
}

/// Query rows in tiles ([`AttentionRows::query_tiles`]): tile `t` is rows
/// `first[t] .. first[t] + count[t]`, all of one span.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueryTiles {
    /// Each tile's first row.
    pub first: Vec<u32>,
    /// Each tile's rows.
    pub count: Vec<u32>,
}

impl QueryTiles {
    /// Tiles.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    /// Whether there is no tile (no rows).
    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{SpanPlan, TreePlan};
    use edge_kvcache::{BlockId, SlotId};

    fn pages(ids: &[usize]) -> Vec<BlockId> {
        ids.iter().map(|&i| BlockId::new(i)).collect()
    }

    /// A decode span, a prompt chunk and a token tree, as the CPU's attend reads them.
    #[test]
    fn rows_follow_the_plan() {
        let tree = TreePlan {
            slots: vec![0, 1, 2],
            visible: vec![0b001, 0b011, 0b101],
            parents: vec![None, Some(0), Some(0)],
        };
        let plan = ForwardPlan {
            spans: vec![
                SpanPlan {
                    rows: 0..1,
                    first: 9,
                    pages: pages(&[4, 7, 2]),
                    slot: SlotId::new(0),
                    tree: None,
                },
                SpanPlan {
                    rows: 1..4,
                    first: 2,
                    pages: pages(&[5, 8]),
                    slot: SlotId::new(1),
                    tree: None,
                },
                SpanPlan {
                    rows: 4..7,
                    first: 5,
                    pages: pages(&[1, 3]),
                    slot: SlotId::new(2),
                    tree: Some(tree),
                },
            ],
            positions: vec![9, 2, 3, 4, 5, 6, 6],
            block_size: 4,
        };
        let rows = AttentionRows::from_plan(&plan).unwrap();
        assert_eq!(rows.max_pages, 3);
        assert_eq!(rows.table, vec![4, 7, 2, 5, 8, 5, 1, 3, 1]);
        assert_eq!(rows.span_of, vec![0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(rows.lens, vec![10, 3, 4, 5, 5, 5, 5]);
        assert_eq!(rows.masks, vec![0, 0, 0, 0, 0b001, 0b011, 0b101]);
        // Cache slots page·4 + row: row 9 of span 0 (page 2), rows 2, 3, 4 of span 1
        // (pages 5, 5, 8), the tree's rows 5, 6, 7 (page 3).
        assert_eq!(rows.stores, vec![9, 22, 23, 32, 13, 14, 15]);
        assert_eq!(rows.end(6), 8);
        assert_eq!(rows.longest(), 10);
        // Tiles never mix spans and hold at most `most` rows.
        let tiles = rows.query_tiles(2).unwrap();
        assert_eq!(tiles.first, vec![0, 1, 3, 4, 6]);
        assert_eq!(tiles.count, vec![1, 2, 1, 2, 1]);
        let tiles = rows.query_tiles(64).unwrap();
        assert_eq!((tiles.first, tiles.count), (vec![0, 1, 4], vec![1, 3, 3]));
        assert_eq!(rows.query_tiles(0).unwrap().len(), 7);

        let mut short = plan.clone();
        short.spans[1].pages.pop();
        assert!(
            matches!(
                AttentionRows::from_plan(&short),
                Err(ModelError::InvalidPlan { .. })
            ),
            "a span whose pages do not cover its rows"
        );
    }

    #[test]
    fn bad_rows_are_typed_errors() {
        let ok = AttentionRows::decode(vec![0, 1], 2, 4, vec![8]).unwrap();
        assert_eq!(ok.rows(), 1);
        assert_eq!(ok.stores, vec![4 + 3], "row 7 is row 3 of page 1");
        let cases = [
            AttentionRows {
                lens: vec![9],
                ..ok.clone()
            },
            AttentionRows {
                lens: vec![0],
                ..ok.clone()
            },
            AttentionRows {
                span_of: vec![1],
                ..ok.clone()
            },
            AttentionRows {
                masks: vec![],
                ..ok.clone()
            },
            AttentionRows {
                stores: vec![],
                ..ok.clone()
            },
            AttentionRows {
                lens: vec![7],
                masks: vec![0b10],
                ..ok.clone()
            },
            AttentionRows {
                block_size: 0,
                ..ok.clone()
            },
        ];
        for (i, bad) in cases.iter().enumerate() {
            assert!(
                matches!(bad.check(), Err(ModelError::InvalidPlan { .. })),
                "case {i}"
            );
        }
        let lone_tree = AttentionRows {
            lens: vec![0],
            masks: vec![0b1],
            ..ok
        };
        assert!(
            lone_tree.check().is_ok(),
            "a tree row with no committed row"
        );
    }
}
