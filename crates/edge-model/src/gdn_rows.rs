//! A forward pass's Gated DeltaNet spans as flat arrays, the form a device kernel reads:
//! each span's rows, state slot and (for a token tree) each row's parent. Built once per
//! pass from the [`ForwardPlan`] and shared by every GDN layer (the CUDA backend uploads
//! it once).

use crate::backend::ForwardPlan;
use crate::error::dim_u32;
use crate::{ModelError, Result};

/// `tree_of` entry of a chain span and `parents` entry of a tree root.
pub const NO_TREE: u32 = u32::MAX;

/// The spans of a pass as the GDN kernels see them.
///
/// Span `s` is batch rows `starts[s] .. starts[s + 1]` on state slot `slots[s]`. A chain
/// span (`tree_of[s] == NO_TREE`: decode steps, prompt chunks) advances its conv window
/// and state row after row. A token-tree span (`tree_of[s]` its index among the pass's
/// trees) leaves them unchanged; row `i`'s parent within the span is
/// `parents[starts[s] + i]` ([`NO_TREE`] for a root), parents before children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GdnRows {
    /// State slot per span (distinct).
    pub slots: Vec<u32>,
    /// First batch row per span, then the row count (`spans + 1` entries, ascending).
    pub starts: Vec<u32>,
    /// Per span: its tree index, or [`NO_TREE`].
    pub tree_of: Vec<u32>,
    /// Per batch row: its parent within a tree span, or [`NO_TREE`].
    pub parents: Vec<u32>,
}

impl GdnRows {
    /// The spans of `plan`, in batch order.
    pub fn from_plan(plan: &ForwardPlan) -> Result<Self> {
        let mut rows = GdnRows {
            slots: Vec::with_capacity(plan.spans.len()),
            starts: vec![0],
            tree_of: Vec::with_capacity(plan.spans.len()),
            parents: Vec::with_capacity(plan.tokens()),
        };
        let mut trees = 0u32;
        for (s, span) in plan.spans.iter().enumerate() {
            if span.rows.start != *rows.starts.last().expect("leading 0") as usize {
                return Err(ModelError::InvalidPlan {
                    op: "gdn rows",
                    reason: format!(
                        "span {s} starts at row {}, not where span {} ended",
                        span.rows.start,
                        s.wrapping_sub(1)
                    ),
                });
            }
            rows.slots
                .push(dim_u32("gdn rows", "slot", span.slot.index())?);
            rows.starts.push(dim_u32("gdn rows", "row", span.rows.end)?);
            match &span.tree {
                None => {
                    rows.tree_of.push(NO_TREE);
                    rows.parents
                        .extend(std::iter::repeat_n(NO_TREE, span.len()));
                }
                Some(tree) => {
                    rows.tree_of.push(trees);
                    trees += 1;
                    if tree.parents.len() != span.len() {
                        return Err(ModelError::InvalidPlan {
                            op: "gdn rows",
                            reason: format!(
                                "span {s} has {} rows and {} parents",
                                span.len(),
                                tree.parents.len()
                            ),
                        });
                    }
                    rows.parents
                        .extend(tree.parents.iter().map(|p| p.unwrap_or(NO_TREE)));
                }
            }
        }
        rows.check()?;
        Ok(rows)
    }

    /// Chain spans of `rows[s]` rows each on `slots`.
    #[cfg(test)]
    pub fn chains(slots: Vec<u32>, rows: &[usize]) -> Result<Self> {
        let mut starts = vec![0u32];
        for &n in rows {
            let end = *starts.last().expect("leading 0") as usize + n;
            starts.push(dim_u32("gdn rows", "row", end)?);
        }
        let total = *starts.last().expect("leading 0") as usize;
        let gdn = GdnRows {
            tree_of: vec![NO_TREE; slots.len()],
            slots,
            starts,
            parents: vec![NO_TREE; total],
        };
        gdn.check()?;
        Ok(gdn)
    }

    /// Spans.
    pub fn spans(&self) -> usize {
        self.slots.len()
    }

    /// Batch rows of all spans.
    pub fn rows(&self) -> usize {
        self.starts.last().map_or(0, |&r| r as usize)
    }

    /// Rows of the longest span (0 without spans).
    pub fn longest(&self) -> usize {
        (self.starts.windows(2))
            .map(|w| w[1].saturating_sub(w[0]) as usize)
            .max()
            .unwrap_or(0)
    }

    /// Token-tree spans.
    pub fn trees(&self) -> usize {
        self.tree_of.iter().filter(|&&t| t != NO_TREE).count()
    }

    /// Checks the arrays against each other: one start per span plus one, non-empty
    /// spans, distinct slots, tree indices 0, 1, … in order, parents earlier rows of
    /// their own tree span (at most 64 rows a tree).
    pub fn check(&self) -> Result<()> {
        let bad = |reason: String| {
            Err(ModelError::InvalidPlan {
                op: "gdn rows",
                reason,
            })
        };
        let n = self.slots.len();
        if self.starts.len() != n + 1 || self.tree_of.len() != n || self.starts[0] != 0 {
            return bad(format!(
                "{n} slots, {} starts (from {:?}), {} tree entries",
                self.starts.len(),
                self.starts.first(),
                self.tree_of.len()
            ));
        }
        if self.parents.len() != self.rows() {
            return bad(format!(
                "{} parents for {} rows",
                self.parents.len(),
                self.rows()
            ));
        }
        let mut trees = 0;
        for s in 0..n {
            let (r0, r1) = (self.starts[s] as usize, self.starts[s + 1] as usize);
            if r1 <= r0 {
                return bad(format!("span {s} has no rows"));
            }
            if self.slots[..s].contains(&self.slots[s]) {
                return bad(format!("slot {} used twice", self.slots[s]));
            }
            let tree = self.tree_of[s] != NO_TREE;
            if tree && (self.tree_of[s] != trees || r1 - r0 > 64) {
                return bad(format!(
                    "span {s}: tree {} of {} rows",
                    self.tree_of[s],
                    r1 - r0
                ));
            }
            trees += u32::from(tree);
            for (i, &p) in self.parents[r0..r1].iter().enumerate() {
                if p != NO_TREE && (!tree || p as usize >= i) {
                    return bad(format!("row {i} of span {s} has parent {p}"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{SpanPlan, TreePlan};
    use edge_kvcache::SlotId;

    #[test]
    fn rows_follow_the_plan() {
        let tree = TreePlan {
            slots: vec![0, 1, 2],
            visible: vec![0b001, 0b011, 0b101],
            parents: vec![None, Some(0), Some(0)],
        };
        let span = |rows, slot, tree| SpanPlan {
            rows,
            first: 4,
            pages: vec![],
            slot: SlotId::new(slot),
            tree,
        };
        let plan = ForwardPlan {
            spans: vec![
                span(0..1, 7, None),
                span(1..4, 2, None),
                span(4..7, 5, Some(tree)),
            ],
            positions: vec![0; 7],
            block_size: 16,
        };
        let rows = GdnRows::from_plan(&plan).unwrap();
        assert_eq!(rows.slots, vec![7, 2, 5]);
        assert_eq!(rows.starts, vec![0, 1, 4, 7]);
        assert_eq!(rows.tree_of, vec![NO_TREE, NO_TREE, 0]);
        assert_eq!(
            rows.parents,
            vec![NO_TREE, NO_TREE, NO_TREE, NO_TREE, NO_TREE, 0, 0]
        );
        assert_eq!((rows.spans(), rows.rows(), rows.trees()), (3, 7, 1));
        assert_eq!(rows.longest(), 3);
        assert_eq!(
            GdnRows::chains(vec![7, 2], &[1, 3]).unwrap().starts,
            vec![0, 1, 4]
        );
    }

    #[test]
    fn bad_rows_are_typed_errors() {
        let ok = GdnRows {
            slots: vec![3, 1],
            starts: vec![0, 1, 4],
            tree_of: vec![NO_TREE, 0],
            parents: vec![NO_TREE, NO_TREE, 0, 1],
        };
        ok.check().unwrap();
        let cases = [
            GdnRows {
                slots: vec![3, 3],
                ..ok.clone()
            },
            GdnRows {
                starts: vec![0, 1, 1],
                parents: vec![NO_TREE],
                ..ok.clone()
            },
            GdnRows {
                tree_of: vec![NO_TREE, 1],
                ..ok.clone()
            },
            GdnRows {
                parents: vec![NO_TREE, NO_TREE, 2, 1],
                ..ok.clone()
            },
            GdnRows {
                parents: vec![0, NO_TREE, 0, 1],
                ..ok.clone()
            },
            GdnRows {
                parents: vec![NO_TREE; 3],
                ..ok.clone()
            },
            GdnRows {
                starts: vec![1, 2, 4],
                ..ok.clone()
            },
        ];
        for (i, bad) in cases.iter().enumerate() {
            assert!(
                matches!(bad.check(), Err(ModelError::InvalidPlan { .. })),
                "case {i}"
            );
        }
        assert!(
            GdnRows::chains(vec![1, 2], &[1, 0]).is_err(),
            "an empty span"
        );
    }
}
