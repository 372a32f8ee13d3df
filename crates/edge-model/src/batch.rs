//! [`StepBatch`]: the tokens one forward pass runs, for one or more sequences.

use crate::{ModelError, Result};
use edge_kvcache::SeqId;
use std::ops::Range;

/// The rows of a batch that belong to one sequence: consecutive rows, whose keys and
/// values go to consecutive cache rows starting at the position of the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpan {
    /// The sequence in the cache.
    pub seq: SeqId,
    /// Rows of the batch it takes.
    pub len: usize,
}

/// Where the rows of a token-tree span go and what their attention sees, besides the
/// sequence's committed rows (which every row sees).
///
/// A tree span is provisional: its rows are stored at cache rows `base + slot` past the
/// committed end `base`, and the sequence's length and recurrent state do not change
/// until [`crate::Qwen35Model::commit_tree`] keeps an accepted path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeLayout {
    /// The sequence's committed length when the tree runs: offsets count from here.
    pub base: usize,
    /// Per row: the cache row it is stored at, as an offset from the committed end.
    pub slots: Vec<u32>,
    /// Per row: the offsets its attention sees (bit `j`: cache row `base + j`),
    /// including its own slot.
    pub visible: Vec<u64>,
}

/// The most rows past a sequence's committed end that a tree span may use (a
/// [`TreeLayout::visible`] mask has one bit per offset).
pub const MAX_TREE_ROWS: usize = 64;

/// Which rows of a span need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// None (a prefill chunk that is not the prompt's last).
    None,
    /// Only the last row (generation).
    Last,
    /// Every row (scoring, speculative verification).
    All,
    /// Only the last row, reduced to its greedy token ([`crate::argmax`]) where the
    /// logits are: the pass returns the token ([`crate::StepOutput::greedy`]) instead of
    /// the row, so a GPU downloads one id instead of the vocabulary.
    Greedy,
    /// Every row, each reduced to its greedy token (speculative verification under
    /// greedy decoding).
    GreedyAll,
    /// Only the last row, reduced to its `k` most likely tokens with their logits and
    /// the row's normaliser ([`crate::TopLogits`]; [`crate::StepOutput::top`]):
    /// sampling with a `top_k` of at most `k`.
    Top(usize),
    /// Every row, each reduced to its `k` most likely tokens (drafting a token tree).
    TopAll(usize),
}

/// The input of one forward pass: tokens of one or more sequences, each token with an
/// explicit position, and the rows that need logits.
///
/// Positions are the single source of truth for RoPE; a span's rows are stored at
/// cache rows `p, p + 1, …` from the position `p` of its first row. A span is either a
/// causal chain ([`StepBatch::push`]: each row's parent is the row before it) or a
/// token tree ([`StepBatch::push_tree`], [`StepBatch::push_tree_rows`]): rows with
/// explicit parents, stored provisionally past the committed end (see
/// [`TreeLayout`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepBatch {
    tokens: Vec<u32>,
    positions: Vec<u32>,
    spans: Vec<SeqSpan>,
    /// Per row, the row of the same span it follows (`None` for a span's first row).
    parents: Vec<Option<u32>>,
    /// Per span, its tree layout (`None` for a chain).
    trees: Vec<Option<TreeLayout>>,
    logit_rows: Vec<usize>,
    greedy_rows: Vec<usize>,
    top_rows: Vec<(usize, usize)>,
}

impl StepBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch of one sequence's `tokens` from position `first`.
    ///
    /// Mismatched lengths in the tree constructors are cut to the shorter input.
    pub fn single(seq: SeqId, tokens: &[u32], first: usize, logits: LogitRows) -> Self {
        let mut b = Self::new();
        b.push(seq, tokens, first, logits);
        b
    }

    /// Appends a span: `tokens` of `seq` at positions `first, first + 1, …`, as a
    /// causal chain.
    pub fn push(&mut self, seq: SeqId, tokens: &[u32], first: usize, logits: LogitRows) {
        self.tokens.extend_from_slice(tokens);
        self.positions
            .extend((0..tokens.len()).map(|i| (first + i) as u32));
        self.parents
            .extend((0..tokens.len()).map(|i| i.checked_sub(1).map(|p| p as u32)));
        self.add_span(seq, tokens.len(), None, logits);
    }

    /// Appends a token tree of `seq` whose root continues its committed rows at `base`:
    /// `parents[i]` is row `i`'s parent within the span (`None` for a root, else an
    /// earlier row). Row `i` sits at position `base + depth(i)`, is stored at cache row
    /// `base + i` and attends to the committed rows and its ancestors. Shape errors
    /// (a parent that is not earlier, more than [`MAX_TREE_ROWS`] rows) are reported by
    /// the forward pass.
    pub fn push_tree(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        parents: &[Option<u32>],
        base: usize,
        logits: LogitRows,
    ) {
        let n = tokens.len().min(parents.len());
        let mut depth = vec![0u32; n];
        let mut visible = vec![0u64; n];
        for i in 0..n {
            let own = if i < MAX_TREE_ROWS { 1u64 << i } else { 0 };
            match parents[i].map(|p| p as usize).filter(|&p| p < i) {
                Some(p) => {
                    depth[i] = depth[p] + 1;
                    visible[i] = visible[p] | own;
                }
                None => visible[i] = own,
            }
        }
        self.tokens.extend_from_slice(&tokens[..n]);
        self.positions
            .extend(depth.iter().map(|&d| base as u32 + d));
        self.parents.extend_from_slice(&parents[..n]);
        let layout = TreeLayout {
            base,
            slots: (0..n as u32).collect(),
            visible,
        };
        self.add_span(seq, n, Some(layout), logits);
    }

    /// Appends tree rows of `seq` with an explicit layout: row `i` at `positions[i]`,
    /// stored at cache row `layout.base + layout.slots[i]` and seeing the committed rows plus
    /// `layout.visible[i]`. Rows have no parents within the batch, so only a model part
    /// without recurrent layers (the MTP head, drafting level by level) runs them.
    pub fn push_tree_rows(
        &mut self,
        seq: SeqId,
        tokens: &[u32],
        positions: &[u32],
        layout: TreeLayout,
        logits: LogitRows,
    ) {
        self.tokens.extend_from_slice(tokens);
        self.positions.extend_from_slice(positions);
        self.parents.extend(tokens.iter().map(|_| None));
        self.add_span(seq, tokens.len(), Some(layout), logits);
    }

    fn add_span(&mut self, seq: SeqId, len: usize, tree: Option<TreeLayout>, logits: LogitRows) {
        let start = self.tokens.len() - len;
        self.spans.push(SeqSpan { seq, len });
        self.trees.push(tree);
        match logits {
            LogitRows::None => {}
            LogitRows::Last if len > 0 => self.logit_rows.push(start + len - 1),
            LogitRows::Last => {}
            LogitRows::All => self.logit_rows.extend(start..start + len),
            LogitRows::Greedy if len > 0 => self.greedy_rows.push(start + len - 1),
            LogitRows::Greedy => {}
            LogitRows::GreedyAll => self.greedy_rows.extend(start..start + len),
            LogitRows::Top(k) if len > 0 => self.top_rows.push((start + len - 1, k)),
            LogitRows::Top(_) => {}
            LogitRows::TopAll(k) => self.top_rows.extend((start..start + len).map(|r| (r, k))),
        }
    }

    /// Token ids, span after span.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The position of each token.
    pub fn positions(&self) -> &[u32] {
        &self.positions
    }

    /// The spans, in row order.
    pub fn spans(&self) -> &[SeqSpan] {
        &self.spans
    }

    /// Each row's parent within its span (`None` for a first row).
    pub fn parents(&self) -> &[Option<u32>] {
        &self.parents
    }

    /// Span `i`'s tree layout (`None` for a chain).
    pub fn tree(&self, i: usize) -> Option<&TreeLayout> {
        self.trees.get(i).and_then(|t| t.as_ref())
    }

    /// Rows whose logits the pass returns, ascending.
    pub fn logit_rows(&self) -> &[usize] {
        &self.logit_rows
    }

    /// Rows whose greedy token the pass returns ([`LogitRows::Greedy`],
    /// [`LogitRows::GreedyAll`]), ascending.
    pub fn greedy_rows(&self) -> &[usize] {
        &self.greedy_rows
    }

    /// Rows whose most likely tokens the pass returns, with how many each
    /// ([`LogitRows::Top`], [`LogitRows::TopAll`]), ascending.
    pub fn top_rows(&self) -> &[(usize, usize)] {
        &self.top_rows
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Checks everything that does not need the cache: ids in the vocabulary,
    /// positions in the context, spans non-empty and of distinct sequences, chains at
    /// consecutive positions, and tree layouts. With `recurrent` (the pass has
    /// recurrent layers, which follow parents while attention follows the masks), a
    /// tree's masks must be exactly its parent structure.
    pub(crate) fn validate(&self, vocab: usize, context: usize, recurrent: bool) -> Result<()> {
        if self.tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        if let Some(&bad) = self.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfVocab { token: bad, vocab });
        }
        let mut row = 0;
        for (i, span) in self.spans.iter().enumerate() {
            if span.len == 0 {
                return Err(ModelError::MalformedBatch {
                    span: i,
                    reason: "no tokens".into(),
                });
            }
            if self.spans[..i].iter().any(|s| s.seq == span.seq) {
                return Err(ModelError::MalformedBatch {
                    span: i,
                    reason: format!("sequence {:?} appears twice in one batch", span.seq),
                });
            }
            let rows = row..row + span.len;
            match &self.trees[i] {
                None => self.validate_chain(i, rows, context)?,
                Some(tree) => self.validate_tree(i, rows, tree, context, recurrent)?,
            }
            row += span.len;
        }
        Ok(())
    }

    fn validate_chain(&self, i: usize, rows: Range<usize>, context: usize) -> Result<()> {
        let first = self.positions[rows.start] as usize;
        let end = first + rows.len();
        if end > context {
            return Err(ModelError::PastContext {
                tokens: rows.len(),
                first,
                end,
                context,
            });
        }
        for (j, r) in rows.enumerate() {
            let chain = self.parents[r] == j.checked_sub(1).map(|p| p as u32);
            if !chain || self.positions[r] as usize != first + j {
                return Err(ModelError::MalformedBatch {
                    span: i,
                    reason: format!(
                        "row {j}: a chain's rows follow each other at consecutive positions"
                    ),
                });
            }
        }
        Ok(())
    }

    fn validate_tree(
        &self,
        i: usize,
        rows: Range<usize>,
        tree: &TreeLayout,
        context: usize,
        recurrent: bool,
    ) -> Result<()> {
        let bad = |j: usize, what: &str| {
            Err(ModelError::MalformedBatch {
                span: i,
                reason: format!("tree row {j}: {what}"),
            })
        };
        let n = rows.len();
        if n > MAX_TREE_ROWS || tree.slots.len() != n || tree.visible.len() != n {
            return Err(ModelError::MalformedBatch {
                span: i,
                reason: format!(
                    "a tree of {n} rows, {} slots and {} masks (at most {MAX_TREE_ROWS} rows, \
                     one slot and one mask each)",
                    tree.slots.len(),
                    tree.visible.len()
                ),
            });
        }
        let mut used = 0u64;
        for (j, r) in rows.clone().enumerate() {
            let slot = tree.slots[j] as usize;
            if slot >= MAX_TREE_ROWS || used & (1 << slot) != 0 {
                return bad(j, "slots must be distinct and below 64");
            }
            used |= 1 << slot;
            let own = 1u64 << slot;
            if tree.visible[j] & own == 0 {
                return bad(j, "a row must see its own slot");
            }
            let pos = self.positions[r] as usize;
            if pos >= context {
                return bad(
                    j,
                    &format!("position {pos} is past the context of {context}"),
                );
            }
            match self.parents[r] {
                Some(p) if p as usize >= j => return bad(j, "a parent must come before its child"),
                Some(p) => {
                    let pr = rows.start + p as usize;
                    if pos != self.positions[pr] as usize + 1 {
                        return bad(j, "a child sits one position after its parent");
                    }
                    if recurrent && tree.visible[j] != tree.visible[p as usize] | own {
                        return bad(j, "the mask must be the parent's plus the row's own slot");
                    }
                }
                None if recurrent && (pos != tree.base || tree.visible[j] != own) => {
                    return bad(j, "a root sits at the committed end and sees only itself");
                }
                None => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_positions_and_logit_rows() {
        let (a, b) = (SeqId::new(0), SeqId::new(1));
        let mut batch = StepBatch::single(a, &[5, 6, 7], 10, LogitRows::Last);
        batch.push(b, &[8], 3, LogitRows::All);
        batch.push(SeqId::new(2), &[1, 2], 0, LogitRows::None);
        assert_eq!(batch.positions(), &[10, 11, 12, 3, 0, 1]);
        assert_eq!(batch.logit_rows(), &[2, 3]);
        assert_eq!(
            batch.parents(),
            &[None, Some(0), Some(1), None, None, Some(0)]
        );
        batch.validate(16, 100, true).unwrap();
        assert!(
            matches!(
                batch.validate(8, 100, true),
                Err(crate::ModelError::TokenOutOfVocab { token: 8, vocab: 8 })
            ),
            "token 8 is outside a vocabulary of 8"
        );
        assert!(
            matches!(
                batch.validate(16, 12, true),
                Err(crate::ModelError::PastContext {
                    first: 10,
                    end: 13,
                    context: 12,
                    ..
                })
            ),
            "positions past the context"
        );
        let mut twice = StepBatch::single(a, &[1], 0, LogitRows::Last);
        twice.push(a, &[1], 1, LogitRows::Last);
        assert!(matches!(
            twice.validate(16, 100, true),
            Err(crate::ModelError::MalformedBatch { span: 1, .. })
        ));
        assert!(matches!(
            StepBatch::new().validate(16, 100, true),
            Err(crate::ModelError::EmptyBatch)
        ));
        let mut tree = StepBatch::single(a, &[1, 2, 3], 0, LogitRows::All);
        tree.parents[2] = Some(0);
        assert!(matches!(
            tree.validate(16, 100, true),
            Err(crate::ModelError::MalformedBatch { span: 0, .. })
        ));
    }
}
