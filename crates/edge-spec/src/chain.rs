//! Greedy chain speculation with the MTP head, as one decode step of a sequence in a
//! paged cache.
//!
//! Positions: when the cache holds `L` tokens and `tok` (position `L`) has just been
//! chosen, the head's row at `L − 1` pairs `h_{L−1}` with `tok` and drafts `d₁`;
//! draft step `i ≥ 2` pairs the head's own previous output with `dᵢ₋₁` at position
//! `L + i − 2`. The target verifies `[tok, d₁ … d_k]` at `L … L + k`. After `a`
//! drafts are accepted, the head's rows `L … L + a` are rewritten from the target's
//! hidden states, replacing the provisional draft rows.

use crate::{Result, SpecError};
use edge_kvcache::{PagedCache, SeqId, SequenceCache};
use edge_model::{Backend, LogitRows, Qwen35Model, StepBatch, argmax};
use std::time::Instant;

/// Speculation settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecConfig {
    /// Tokens drafted per target forward (`k`).
    pub draft_tokens: usize,
}

impl Default for SpecConfig {
    fn default() -> Self {
        SpecConfig { draft_tokens: 3 }
    }
}

/// Counters of one speculative generation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpecStats {
    /// Target verification forwards (the prompt prefill is not counted).
    pub verify_forwards: usize,
    /// Extra target forwards re-running an accepted prefix after a rejection (rollback).
    pub recompute_forwards: usize,
    /// Draft tokens proposed.
    pub drafted: usize,
    /// Draft tokens accepted.
    pub accepted: usize,
    /// Milliseconds in the MTP head (first passes and draft steps).
    pub draft_ms: f64,
    /// Milliseconds in verification forwards.
    pub verify_ms: f64,
    /// Milliseconds rolling back and re-running accepted prefixes.
    pub commit_ms: f64,
}

impl SpecStats {
    /// Tokens emitted per verification forward (each emits the accepted drafts plus
    /// one token of its own).
    pub fn tokens_per_verify(&self) -> f64 {
        if self.verify_forwards == 0 {
            0.0
        } else {
            (self.accepted + self.verify_forwards) as f64 / self.verify_forwards as f64
        }
    }
}

/// Rows the head still has to run before the next draft: target hidden states paired
/// with the tokens that follow them, from `first`.
struct Pending<B: Backend> {
    hidden: B::Buf,
    next: Vec<u32>,
    first: usize,
}

/// Greedy chain speculation for one sequence (see the module docs for positions).
pub struct ChainSpeculator<B: Backend> {
    config: SpecConfig,
    pending: Option<Pending<B>>,
    stats: SpecStats,
}

impl<B: Backend> ChainSpeculator<B> {
    /// A speculator drafting `config.draft_tokens` (≥ 1) tokens per step with `model`'s
    /// MTP head.
    pub fn new(model: &Qwen35Model<B>, config: SpecConfig) -> Result<Self> {
        if model.mtp().is_none() {
            return Err(SpecError::InvalidRequest(
                "the model has no MTP head to draft with".into(),
            ));
        }
        if config.draft_tokens == 0 {
            return Err(SpecError::InvalidRequest(
                "draft_tokens must be at least 1".into(),
            ));
        }
        Ok(ChainSpeculator {
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

    /// One step: drafts up to `k` tokens after `tok` (the token at the sequence's end,
    /// not yet run), verifies them with one target forward, commits the accepted ones
    /// and returns the emitted tokens (accepted drafts, then the target's own token),
    /// at most `limit` (≥ 1) of them.
    pub fn step(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
        tok: u32,
        limit: usize,
    ) -> Result<Vec<u32>> {
        let vocab = model.config().vocab_size;
        let h = model.config().hidden_size;
        let ctx = model.config().max_position_embeddings;
        let len = cache.sequence(seq)?.len;
        let t0 = Instant::now();
        let (mut draft, mut hid) = self.first_draft(model, be, cache, seq)?;
        let k = (self.config.draft_tokens)
            .min(limit.saturating_sub(1))
            .min(ctx.saturating_sub(len + 1));
        let mut drafts = Vec::with_capacity(k);
        while drafts.len() < k {
            drafts.push(draft);
            if drafts.len() == k {
                break;
            }
            let batch = StepBatch::single(seq, &[draft], len + drafts.len() - 1, LogitRows::Last);
            let out = model.mtp_forward(be, &batch, &hid, cache)?;
            be.free(std::mem::replace(&mut hid, out.hidden));
            draft = argmax(&out.logits[..vocab]);
        }
        be.free(hid);
        self.stats.drafted += drafts.len();
        self.stats.draft_ms += t0.elapsed().as_secs_f64() * 1e3;

        // Verify [tok, d1..dk] in one target forward.
        let t1 = Instant::now();
        let saved = cache.save_state(seq)?;
        let mut input = vec![tok];
        input.extend_from_slice(&drafts);
        let batch = StepBatch::single(seq, &input, len, LogitRows::All);
        let v = model.forward(be, &batch, cache)?;
        self.stats.verify_forwards += 1;
        let mut accepted = 0;
        while accepted < drafts.len()
            && argmax(&v.logits[accepted * vocab..][..vocab]) == drafts[accepted]
        {
            accepted += 1;
        }
        let bonus = argmax(&v.logits[accepted * vocab..][..vocab]);
        self.stats.accepted += accepted;
        self.stats.verify_ms += t1.elapsed().as_secs_f64() * 1e3;
        if accepted < drafts.len() {
            // The recurrent state ran past the accepted prefix: roll back and re-run it.
            let t2 = Instant::now();
            cache.truncate(seq, len)?;
            cache.restore_state(seq, &saved)?;
            let batch = StepBatch::single(seq, &input[..=accepted], len, LogitRows::None);
            let again = model.forward(be, &batch, cache)?;
            be.free(again.hidden);
            self.stats.recompute_forwards += 1;
            self.stats.commit_ms += t2.elapsed().as_secs_f64() * 1e3;
        }
        let mut emitted: Vec<u32> = drafts[..accepted].to_vec();
        emitted.push(bonus);
        let rows: Vec<usize> = (0..=accepted).collect();
        let hidden = be.gather_rows(&v.hidden, h, &rows);
        be.free(v.hidden);
        self.pending = Some(Pending {
            hidden,
            next: emitted.clone(),
            first: len,
        });
        emitted.truncate(limit.max(1));
        Ok(emitted)
    }

    /// Runs the head's pending rows (rewriting provisional ones) and returns the first
    /// draft with the head's output row that produced it.
    fn first_draft(
        &mut self,
        model: &Qwen35Model<B>,
        be: &mut B,
        cache: &mut PagedCache<B::Memory>,
        seq: SeqId,
    ) -> Result<(u32, B::Buf)> {
        let p = self
            .pending
            .take()
            .ok_or_else(|| SpecError::InvalidRequest("speculation step before start".into()))?;
        let batch = StepBatch::single(seq, &p.next, p.first, LogitRows::Last);
        let out = model.mtp_forward(be, &batch, &p.hidden, cache)?;
        be.free(p.hidden);
        let h = model.config().hidden_size;
        let last = be.gather_rows(&out.hidden, h, &[p.next.len() - 1]);
        be.free(out.hidden);
        Ok((argmax(&out.logits), last))
    }
}
