//! One speculative decode step of a sequence: draft a token tree (a chain is a tree of
//! top-1) with the MTP head, verify it in one target forward, keep the accepted path
//! with a commit that re-runs nothing.
//!
//! Positions: when the cache holds `L` tokens and `tok` (position `L`, the root) has
//! just been chosen, the head's row at `L − 1` pairs `h_{L−1}` with `tok` and proposes
//! the root's children. A node at depth `j ≥ 1` is expanded by a head row at position
//! `L + j − 1` pairing the head's output that proposed it with its token; those rows
//! are a tree of their own past the committed end (each sees the head's committed
//! rows and its ancestors' rows). The target verifies the tree at positions `L +
//! depth`. After the path `tok, d₁ … d_a` is accepted, the head's rows `L … L + a` are
//! rewritten from the target's hidden states at the next step, replacing the draft
//! rows.

use crate::accept::{DraftTree, RowFilter, accept, accept_filtered, accept_greedy};
use crate::config::{SpecConfig, SpecStats};
use crate::draft::DraftPool;
use crate::sampling::Sampler;
use crate::{Result, SpecError};
use edge_kvcache::{PagedCache, SeqId, SequenceCache};
use edge_model::{AcceptedPath, Backend, LogitRows, Qwen35Model, StepBatch, TopLogits, TreeLayout};
use std::time::Instant;

/// Rows the head still has to run before the next draft: target hidden states paired
/// with the tokens that follow them, from `first`.
struct Pending<B: Backend> {
    hidden: B::Buf,
    next: Vec<u32>,
    first: usize,
}

/// Speculative decoding of one sequence with the model's MTP head.
pub struct Speculator<B: Backend> {
    config: SpecConfig,
    pending: Option<Pending<B>>,
    stats: SpecStats,
}

/// A head pass's output rows, kept to feed the next depth.
struct Expansions<B: Backend> {
    /// `[rows, hidden]` head outputs.
    hidden: B::Buf,
    /// Pool index of the node each row expanded.
    nodes: Vec<usize>,
    /// Each row's slot and visible mask among the head's draft rows (`None` for the
    /// root's row, which is committed).
    rows: Vec<Option<(u32, u64)>>,
}

impl<B: Backend> Speculator<B> {
    /// A speculator for `model` (which needs an MTP head) with a valid `config`.
    pub fn new(model: &Qwen35Model<B>, config: SpecConfig) -> Result<Self> {
        if model.mtp().is_none() {
            return Err(SpecError::NoMtpHead);
        }
        config.validate()?;
        Ok(Speculator {
            config,
            pending: None,
            stats: SpecStats::default(),
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> SpecStats {
        self.stats
    }

    /// Starts after a prompt: `hidden` is the final hidden state of its last token (at
    /// `position`) and `tok` the token chosen from it. The head's rows before
    /// `position` must already be in the cache (the engine runs them with the prompt).
    pub fn start(&mut self, hidden: B::Buf, tok: u32, position: usize) {
        self.pending = Some(Pending {
            hidden,
            next: vec![tok],
            first: position,
        });
    }

    /// Gives back the buffers held between steps (a speculator dropped without it only
    /// leaks them to the backend's pool).
    pub fn finish(&mut self, be: &mut B) {
        if let Some(p) = self.pending.take() {
            be.free(p.hidden);
        }
    }

    /// One step: drafts a tree after `tok` (the token at the sequence's end, not yet
    /// run), verifies it with one target forward, commits the accepted path and returns
    /// the emitted tokens (accepted drafts, then the target's own next token), at most
    /// `limit` (≥ 1) of them. `sampler` makes the target's choices: greedy, or lossless
    /// rejection sampling (see [`crate::accept()`]).
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
        tok: u32,
        limit: usize,
        sampler: &mut Sampler,
    ) -> Result<Vec<u32>> {
        self.step_filtered(model, be, cache, seq, tok, limit, sampler, None)
    }

    /// [`Speculator::step`] with the target's choices restricted by `filter` (see
    /// [`crate::accept_filtered`]; the paths it is given start after `tok`). With a
    /// filter the verification pass returns every node's full row, greedy or not.
    #[allow(clippy::too_many_arguments)]
    pub fn step_filtered(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
        tok: u32,
        limit: usize,
        sampler: &mut Sampler,
        filter: Option<&mut dyn RowFilter>,
    ) -> Result<Vec<u32>> {
        let vocab = model.config().vocab_size;
        let h = model.config().hidden_size;
        let ctx = model.config().max_position_embeddings;
        let len = cache.sequence(seq)?.len;
        let depth = (self.config.draft_steps)
            .min(limit.saturating_sub(1))
            .min(ctx.saturating_sub(len + 1));
        let (pool, nodes) = self.draft(model, be, cache, seq, tok, depth)?;
        let (picked, parents) = pool.select(nodes);
        let tokens: Vec<u32> = picked.iter().map(|&i| pool.candidates[i].token).collect();
        self.stats.drafted += tokens.len() - 1;

        let t1 = Instant::now();
        let mut batch = StepBatch::new();
        // Greedy verification needs each node's argmax only: the pass returns those
        // instead of the rows (on a GPU, ids instead of nodes × vocab logits).
        let greedy = sampler.is_greedy();
        let rows = match greedy && filter.is_none() {
            true => LogitRows::GreedyAll,
            false => LogitRows::All,
        };
        batch.push_tree(seq, &tokens, &parents, len, rows);
        let out = model.forward(be, &batch, cache)?;
        let tree = DraftTree {
            tokens: tokens.clone(),
            parents: parents.iter().map(|p| p.map(|p| p as usize)).collect(),
        };
        let accepted = match (filter, greedy) {
            (Some(f), _) => accept_filtered(&tree, &out.logits, vocab, sampler, f),
            (None, true) => accept_greedy(&tree, &out.greedy, vocab),
            (None, false) => accept(&tree, &out.logits, vocab, sampler),
        };
        self.stats.target_forwards += 1;
        self.stats.verify_ms += t1.elapsed().as_secs_f64() * 1e3;
        let t2 = Instant::now();
        let kept = out.tree.expect("a tree pass keeps its inputs");
        let accepted = match accepted {
            Ok(a) => a,
            Err(e) => {
                kept.free(be);
                be.free(out.hidden);
                return Err(e);
            }
        };
        let path = AcceptedPath {
            seq,
            rows: accepted.path.clone(),
        };
        if let Err(e) = model.commit_tree(be, kept, &[path], cache) {
            be.free(out.hidden);
            return Err(e.into());
        }
        self.stats.accepted += accepted.path.len() - 1;
        let mut emitted: Vec<u32> = accepted.path[1..].iter().map(|&r| tokens[r]).collect();
        emitted.push(accepted.next);
        let hidden = be.gather_rows(&out.hidden, h, &accepted.path)?;
        be.free(out.hidden);
        self.pending = Some(Pending {
            hidden,
            next: emitted.clone(),
            first: len,
        });
        self.stats.commit_ms += t2.elapsed().as_secs_f64() * 1e3;
        emitted.truncate(limit.max(1));
        Ok(emitted)
    }

    /// Runs the head's pending rows, then expands the tree depth by depth; returns the
    /// candidates and how many nodes to verify.
    fn draft(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
        tok: u32,
        depth: usize,
    ) -> Result<(DraftPool, usize)> {
        let (top_k, nodes) = self.config.shape();
        let h = model.config().hidden_size;
        let len = cache.sequence(seq)?.len;
        let mut pool = DraftPool::new(tok, top_k);
        let t0 = Instant::now();
        let root = self.first_pass(model, be, cache, seq, top_k)?;
        self.stats.draft_ms += t0.elapsed().as_secs_f64() * 1e3;
        if depth == 0 {
            be.free(root.1);
            return Ok((pool, 1));
        }
        let mut tree_time = Instant::now();
        pool.add_children(0, &root.0);
        let mut level = Expansions::<B> {
            hidden: root.1,
            nodes: vec![0],
            rows: vec![None],
        };
        let mut next_slot = 0u32;
        let mut tree_ms = 0.0;
        for d in 1..depth {
            let frontier = pool.frontier(d);
            tree_ms += tree_time.elapsed().as_secs_f64() * 1e3;
            let t = Instant::now();
            let mut toks = Vec::with_capacity(frontier.len());
            let mut positions = Vec::with_capacity(frontier.len());
            let mut parents_rows = Vec::with_capacity(frontier.len());
            let mut rows = Vec::with_capacity(frontier.len());
            for &node in &frontier {
                let c = &pool.candidates[node];
                let parent = c.parent.expect("a frontier node below the root");
                let prow = (level.nodes.iter())
                    .position(|&n| n == parent)
                    .expect("a frontier node's parent was expanded");
                let inherited = level.rows[prow].map_or(0, |(_, mask)| mask);
                rows.push(Some((next_slot, inherited | (1u64 << next_slot))));
                next_slot += 1;
                toks.push(c.token);
                positions.push((len + d - 1) as u32);
                parents_rows.push(prow);
            }
            let input = be.gather_rows(&level.hidden, h, &parents_rows)?;
            let layout = TreeLayout {
                base: len,
                slots: rows.iter().map(|r| r.expect("draft rows").0).collect(),
                visible: rows.iter().map(|r| r.expect("draft rows").1).collect(),
            };
            let mut batch = StepBatch::new();
            batch.push_tree_rows(seq, &toks, &positions, layout, LogitRows::TopAll(top_k));
            let out = model.mtp_forward(be, &batch, &input, cache);
            be.free(input);
            let out = out?;
            be.free(std::mem::replace(&mut level.hidden, out.hidden));
            level.nodes = frontier;
            level.rows = rows;
            self.stats.draft_ms += t.elapsed().as_secs_f64() * 1e3;
            tree_time = Instant::now();
            for (&node, top) in level.nodes.iter().zip(&out.top) {
                pool.add_children(node, top);
            }
        }
        be.free(level.hidden);
        self.stats.tree_ms += tree_ms + tree_time.elapsed().as_secs_f64() * 1e3;
        // Never more nodes than the depth allows a chain (limits and context).
        let nodes = if top_k == 1 {
            nodes.min(depth + 1)
        } else {
            nodes
        };
        Ok((pool, nodes))
    }

    /// Runs the head's pending rows (rewriting provisional ones) and returns the root's
    /// `top_k` most likely children (tokens and log-probabilities) with the head's
    /// output row that produced them.
    fn first_pass(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
        top_k: usize,
    ) -> Result<(TopLogits, B::Buf)> {
        let p = self.pending.take().ok_or(SpecError::NotStarted)?;
        let batch = StepBatch::single(seq, &p.next, p.first, LogitRows::Top(top_k));
        let out = model.mtp_forward(be, &batch, &p.hidden, cache);
        be.free(p.hidden);
        let out = out?;
        let h = model.config().hidden_size;
        let last = be.gather_rows(&out.hidden, h, &[p.next.len() - 1])?;
        be.free(out.hidden);
        let top = out.top.into_iter().next().unwrap_or_default();
        Ok((top, last))
    }
}
