//! Starting a request: its checks, then (when the cache has room) its reservation, its
//! restored prefix and its prefill plan.

use super::active::{Active, EventSink, Phase, Prefill, RequestId};
use super::plan::PrefillPlan;
use super::request::GenerateRequest;
use super::{Engine, ReusePolicy, empty_output};
use crate::sampling::Sampler;
use crate::{Result, RuntimeError};
use edge_kvcache::PrefixCandidate;
use edge_model::Backend;
use std::time::Instant;

/// The most alternatives per token a request may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

impl<B: Backend> Engine<B> {
    /// Checks `req` and makes it a waiting request (no cache room taken yet). Input
    /// errors, including a request the whole cache budget could never hold, come back
    /// here.
    pub(super) fn check(
        &self,
        id: RequestId,
        req: GenerateRequest,
        sink: Option<EventSink>,
    ) -> Result<Active<B>> {
        let start = Instant::now();
        let c = self.model.config();
        let (len, ctx) = (req.prompt.len(), c.max_position_embeddings);
        if len == 0 {
            return Err(RuntimeError::EmptyPrompt);
        }
        if let Some(&bad) = req.prompt.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(RuntimeError::TokenOutOfVocab {
                token: bad,
                vocab: c.vocab_size,
            });
        }
        if len >= ctx {
            return Err(RuntimeError::PromptPastContext { len, context: ctx });
        }
        if let Some(&p) = req.reuse_points.iter().find(|&&p| p == 0 || p > len) {
            return Err(RuntimeError::ReusePointOutsidePrompt { point: p, len });
        }
        if let Some(n) = req.logprobs.filter(|&n| n > MAX_TOP_LOGPROBS) {
            return Err(RuntimeError::TooManyLogprobs {
                requested: n,
                max: MAX_TOP_LOGPROBS,
            });
        }
        let mut sampler = Sampler::new(req.sampling)?;
        sampler.set_prompt(&req.prompt);
        // What speculation cannot serve: logits rows and log-probabilities per token,
        // and penalties, under which a draft's distribution depends on its own path
        // in ways verification does not follow (a tool-call grammar it does follow).
        let speculate = self.config.speculation.is_some()
            && !req.record_logits
            && req.logprobs.is_none()
            && !req.sampling.has_penalties();
        // The most this request can ever hold must fit the budget alone; anything
        // less waits for room (or is preempted) rather than failing.
        let rows = (len + req.max_new_tokens).min(ctx) + self.lookahead(speculate);
        if req.max_new_tokens > 0
            && self.cache.sequence_bytes(rows) > self.cache.config().budget_bytes
        {
            return Err(RuntimeError::ExceedsCache {
                rows,
                max_rows: self.cache.max_rows(),
            });
        }
        let grammar = (req.tool_constraint.as_ref()).map(|c| (c.clone(), c.start()));
        let mut out = empty_output(len);
        out.logits = req.record_logits.then(Vec::new);
        out.logprobs = req.logprobs.map(|_| Vec::new());
        Ok(Active {
            id,
            req,
            seq: None,
            sampler,
            out,
            phase: Phase::Waiting,
            speculator: None,
            start,
            decode_start: None,
            sink,
            speculate,
            grammar,
            error: None,
            placed: false,
        })
    }

    /// Rows past a request's last token that a speculative step writes.
    pub(super) fn lookahead(&self, speculate: bool) -> usize {
        (self.config.speculation)
            .filter(|_| speculate)
            .map_or(0, |s| s.lookahead_rows())
    }

    /// Places a waiting request in the cache: reserves its tokens so far plus the
    /// decode allowance ([`super::EngineConfig::decode_reserve`]), restores its
    /// longest usable cached prefix and plans the rest of its prefill. A preempted
    /// request recomputes its prompt and the tokens it had generated, and resumes with
    /// the token it had chosen. `Ok(false)` (nothing changed) when the cache cannot
    /// hold it beside the requests in flight now, with `headroom` rows to spare.
    pub(super) fn place(&mut self, a: &mut Active<B>, headroom: usize) -> Result<bool> {
        let ctx = self.model.config().max_position_embeddings;
        let n = a.out.tokens.len();
        let resume = n.checked_sub(1).map(|last| a.out.tokens[last]);
        let mut tokens = a.req.prompt.clone();
        tokens.extend_from_slice(&a.out.tokens[..n.saturating_sub(1)]);
        let len = tokens.len();
        let allowance =
            (a.req.max_new_tokens.saturating_sub(n)).min(self.config.decode_reserve.max(1));
        let rows = (len + allowance).min(ctx) + self.lookahead(a.speculate);
        if !self.cache.can_start(rows + headroom) {
            return Ok(false);
        }
        let seq = self.cache.new_sequence(rows)?;
        let mtp_rows = self.config.speculation.is_some();
        let mut reuse_points = a.req.reuse_points.clone();
        if resume.is_some() {
            // The prompt's end, where its own prefill kept a snapshot.
            reuse_points.push(a.req.prompt.len());
        }
        let plan = PrefillPlan::new(
            len,
            self.config.prefill_chunk,
            &reuse_points,
            self.config.snapshot_stride,
            u64::from(mtp_rows),
        );
        let policy = self.config.reuse;
        let usable = |c: &PrefixCandidate| {
            let aligned = match policy {
                ReusePolicy::Exact => plan.tag(c.len) == Some(c.tag),
                ReusePolicy::Longest => true,
            };
            let logits = c.len < len || c.has_logits || resume.is_some();
            aligned && logits && (!mtp_rows || c.has_hidden)
        };
        let mut prefill = Prefill {
            tokens,
            resume,
            plan: plan.clone(),
            passes: Default::default(),
            carry: None,
            logits: None,
        };
        let mut done = 0;
        if let Some(hit) = self.cache.lookup(&prefill.tokens, usable) {
            match self.cache.restore(seq, hit) {
                Ok(data) => {
                    done = hit.len;
                    prefill.logits = data.logits.filter(|_| done == len);
                    prefill.carry = data.hidden;
                }
                Err(e) => {
                    self.cache.release(seq)?;
                    return Err(e.into());
                }
            }
        }
        prefill.passes = plan.passes_from(done).collect();
        // Counted at the first placement only: a request placed again restores what
        // it had computed itself.
        if !a.placed {
            a.out.cached_tokens = done;
            a.placed = true;
        }
        a.seq = Some(seq);
        a.phase = Phase::Prefill(prefill);
        Ok(true)
    }
}
