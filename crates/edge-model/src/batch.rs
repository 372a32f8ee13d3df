//! [`StepBatch`]: the tokens one forward pass runs, for one or more sequences.

use crate::{ModelError, Result};
use edge_kvcache::SeqId;

/// The rows of a batch that belong to one sequence: consecutive rows, whose keys and
/// values go to consecutive cache rows starting at the position of the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpan {
    /// The sequence in the cache.
    pub seq: SeqId,
    /// Rows of the batch it takes.
    pub len: usize,
}

/// Which rows of a span need logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows {
    /// None (a prefill chunk that is not the prompt's last).
    None,
    /// Only the last row (generation).
    Last,
    /// Every row (scoring, speculative verification).
    All,
}

/// The input of one forward pass: tokens of one or more sequences, each token with an
/// explicit position, and the rows that need logits.
///
/// Positions are the single source of truth for RoPE; a span's rows are stored at
/// cache rows `p, p + 1, …` from the position `p` of its first row. Tree parents are
/// the hook of tree speculation: here every span is a causal chain (each row's parent
/// is the row before it), which is what [`StepBatch::push`] builds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepBatch {
    tokens: Vec<u32>,
    positions: Vec<u32>,
    spans: Vec<SeqSpan>,
    /// Per row, the row of the same span it follows (`None` for a span's first row).
    parents: Vec<Option<u32>>,
    logit_rows: Vec<usize>,
}

impl StepBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch of one sequence's `tokens` from position `first`.
    pub fn single(seq: SeqId, tokens: &[u32], first: usize, logits: LogitRows) -> Self {
        let mut b = Self::new();
        b.push(seq, tokens, first, logits);
        b
    }

    /// Appends a span: `tokens` of `seq` at positions `first, first + 1, …`, as a
    /// causal chain.
    pub fn push(&mut self, seq: SeqId, tokens: &[u32], first: usize, logits: LogitRows) {
        let start = self.tokens.len();
        self.tokens.extend_from_slice(tokens);
        self.positions
            .extend((0..tokens.len()).map(|i| (first + i) as u32));
        self.parents
            .extend((0..tokens.len()).map(|i| i.checked_sub(1).map(|p| p as u32)));
        self.spans.push(SeqSpan {
            seq,
            len: tokens.len(),
        });
        match logits {
            LogitRows::None => {}
            LogitRows::Last if !tokens.is_empty() => self.logit_rows.push(start + tokens.len() - 1),
            LogitRows::Last => {}
            LogitRows::All => self.logit_rows.extend(start..start + tokens.len()),
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

    /// Rows whose logits the pass returns, ascending.
    pub fn logit_rows(&self) -> &[usize] {
        &self.logit_rows
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
    /// positions in the context, spans non-empty and of distinct sequences, chain
    /// parents and positions.
    pub(crate) fn validate(&self, vocab: usize, context: usize) -> Result<()> {
        if self.tokens.is_empty() {
            return Err(ModelError::InvalidInput("no tokens to run".into()));
        }
        if let Some(&bad) = self.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::InvalidInput(format!(
                "token id {bad} is outside the vocabulary of {vocab}"
            )));
        }
        let mut row = 0;
        for (i, span) in self.spans.iter().enumerate() {
            if span.len == 0 {
                return Err(ModelError::InvalidInput(format!("span {i} has no tokens")));
            }
            if self.spans[..i].iter().any(|s| s.seq == span.seq) {
                return Err(ModelError::InvalidInput(format!(
                    "sequence {:?} appears twice in one batch",
                    span.seq
                )));
            }
            let first = self.positions[row] as usize;
            let end = first + span.len;
            if end > context {
                return Err(ModelError::InvalidInput(format!(
                    "{} tokens from position {first} would reach position {end}, past the \
                     context of {context}",
                    span.len
                )));
            }
            for j in 0..span.len {
                let chain = self.parents[row + j] == j.checked_sub(1).map(|p| p as u32);
                if !chain || self.positions[row + j] as usize != first + j {
                    return Err(ModelError::InvalidInput(format!(
                        "span {i}, row {j}: only causal chains at consecutive positions \
                         run here (tree batches need tree speculation's verifier)"
                    )));
                }
            }
            row += span.len;
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
        batch.validate(16, 100).unwrap();
        assert!(
            batch.validate(8, 100).is_err(),
            "token 8 is outside a vocabulary of 8"
        );
        assert!(
            batch.validate(16, 12).is_err(),
            "positions past the context"
        );
        let mut twice = StepBatch::single(a, &[1], 0, LogitRows::Last);
        twice.push(a, &[1], 1, LogitRows::Last);
        assert!(twice.validate(16, 100).is_err());
        assert!(StepBatch::new().validate(16, 100).is_err());
        let mut tree = StepBatch::single(a, &[1, 2, 3], 0, LogitRows::All);
        tree.parents[2] = Some(0);
        assert!(tree.validate(16, 100).is_err());
    }
}
