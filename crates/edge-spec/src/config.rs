//! Speculation settings and counters.

use crate::{Result, SpecError};
use edge_model::MAX_TREE_ROWS;

/// How drafts are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drafting {
    /// One draft per step: the head's most likely token, `draft_steps` deep.
    Linear,
    /// A token tree: each expanded node proposes its head's `top_k` most likely
    /// tokens; the `top_k` best candidates of a depth (by cumulative log-probability)
    /// are expanded further; the best `nodes` (root included) are verified.
    Tree {
        /// Children proposed per expanded node, and nodes expanded per depth.
        top_k: usize,
        /// Nodes verified per step, the root (the token already chosen) included.
        nodes: usize,
    },
}

/// Speculation settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecConfig {
    /// Draft depth: tokens past the root on the longest drafted path.
    pub draft_steps: usize,
    /// Chain or tree.
    pub drafting: Drafting,
}

impl SpecConfig {
    /// A chain of `steps` drafts.
    pub fn linear(steps: usize) -> Self {
        SpecConfig {
            draft_steps: steps,
            drafting: Drafting::Linear,
        }
    }

    /// A tree `steps` deep with `top_k` children per expanded node and `nodes`
    /// verified nodes.
    pub fn tree(steps: usize, top_k: usize, nodes: usize) -> Self {
        SpecConfig {
            draft_steps: steps,
            drafting: Drafting::Tree { top_k, nodes },
        }
    }

    /// `(top_k, nodes)`: a chain is a tree of top-1 with one node per step.
    pub fn shape(&self) -> (usize, usize) {
        match self.drafting {
            Drafting::Linear => (1, self.draft_steps + 1),
            Drafting::Tree { top_k, nodes } => (top_k, nodes),
        }
    }

    /// Cache rows past a sequence's end that one step may touch: the verified tree's
    /// and the head's draft rows.
    pub fn lookahead_rows(&self) -> usize {
        let (top_k, nodes) = self.shape();
        nodes.max(self.draft_steps.saturating_sub(1) * top_k)
    }

    /// Checks the shape: at least one step, one child and two nodes, and trees that
    /// fit the [`MAX_TREE_ROWS`] rows a tree pass may use.
    pub fn validate(&self) -> Result<()> {
        let (top_k, nodes) = self.shape();
        let bad = |reason: String| Err(SpecError::InvalidConfig { reason });
        if self.draft_steps == 0 {
            return bad("draft_steps must be at least 1".into());
        }
        if top_k == 0 {
            return bad("a tree needs top_k of at least 1".into());
        }
        if !(2..=MAX_TREE_ROWS).contains(&nodes) {
            return bad(format!(
                "a tree verifies 2 to {MAX_TREE_ROWS} nodes (root included), not {nodes}"
            ));
        }
        if self.draft_steps.saturating_sub(1) * top_k > MAX_TREE_ROWS {
            return bad(format!(
                "{} steps of top-{top_k} expansions need more than {MAX_TREE_ROWS} draft rows",
                self.draft_steps
            ));
        }
        Ok(())
    }
}

/// Per-token weight bytes up to which [`SpecConfig::fastest_on_cpu`] turns speculation
/// off: such a model's weights stay in the last-level cache, decoding is compute-bound
/// and verifying `k` rows costs nearly `k` decode steps.
pub const CPU_CACHE_RESIDENT_BYTES: usize = 64 << 20;

impl SpecConfig {
    /// The speculation measured fastest on the CPU for a model that reads
    /// `weight_bytes_per_token` per decode step (docs/PERFORMANCE.md, speculation):
    /// none for a cache-resident model (the 21 MB demo model decodes 1.4–1.6× faster
    /// without), else a chain of 3 drafts (on the 0.53B shape, 1.06 GB, it decodes 2–3×
    /// faster than without; a tree verifies more nodes than the CPU's matmuls handle at
    /// the cost of one, and is faster only where a forward's cost is flat in its rows).
    pub fn fastest_on_cpu(weight_bytes_per_token: usize) -> Option<SpecConfig> {
        (weight_bytes_per_token > CPU_CACHE_RESIDENT_BYTES).then(|| SpecConfig::linear(3))
    }
}

impl Default for SpecConfig {
    /// A chain of 3 drafts.
    fn default() -> Self {
        SpecConfig::linear(3)
    }
}

/// Counters of one speculative generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecStats {
    /// Target verification forwards (the prompt prefill is not counted).
    pub target_forwards: usize,
    /// Draft tokens proposed for verification (tree nodes past the root).
    pub drafted: usize,
    /// Draft tokens accepted.
    pub accepted: usize,
    /// Milliseconds in the MTP head's passes.
    pub draft_ms: f64,
    /// Milliseconds choosing tree nodes from the head's logits (the bookkeeping of
    /// drafting, without the head's passes).
    pub tree_ms: f64,
    /// Milliseconds in verification forwards, including acceptance.
    pub verify_ms: f64,
    /// Milliseconds committing accepted paths.
    pub commit_ms: f64,
}

impl SpecStats {
    /// Mean accepted length: tokens emitted per target forward (the accepted drafts
    /// plus the target's own next token), the figure EAGLE reports as τ.
    pub fn mean_accepted(&self) -> f64 {
        if self.target_forwards == 0 {
            0.0
        } else {
            (self.accepted + self.target_forwards) as f64 / self.target_forwards as f64
        }
    }

    /// Adds another generation's counters.
    pub fn add(&mut self, other: &SpecStats) {
        self.target_forwards += other.target_forwards;
        self.drafted += other.drafted;
        self.accepted += other.accepted;
        self.draft_ms += other.draft_ms;
        self.tree_ms += other.tree_ms;
        self.verify_ms += other.verify_ms;
        self.commit_ms += other.commit_ms;
    }
}
