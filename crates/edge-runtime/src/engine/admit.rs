//! Starting a request: checks, the cache reservation, the restored prefix and the
//! prefill plan.

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
    /// Checks `req`, reserves its rows and restores its longest usable prefix; nothing
    /// is left behind on an error.
    pub(super) fn admit(
        &mut self,
        id: RequestId,
        req: GenerateRequest,
        sink: Option<EventSink>,
    ) -> Result<Active<B>> {
        let start = Instant::now();
        let c = self.model.config();
        let (len, ctx) = (req.prompt.len(), c.max_position_embeddings);
        if len == 0 {
            return Err(RuntimeError::InvalidRequest("the prompt is empty".into()));
        }
        if let Some(&bad) = req.prompt.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(RuntimeError::InvalidRequest(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.vocab_size
            )));
        }
        if len >= ctx {
            return Err(RuntimeError::InvalidRequest(format!(
                "the prompt has {len} tokens; the model's context is {ctx}, leaving no room to generate"
            )));
        }
        if let Some(&p) = req.reuse_points.iter().find(|&&p| p == 0 || p > len) {
            return Err(RuntimeError::InvalidRequest(format!(
                "reuse point {p} is outside the prompt of {len} tokens"
            )));
        }
        if let Some(n) = req.logprobs.filter(|&n| n > MAX_TOP_LOGPROBS) {
            return Err(RuntimeError::InvalidRequest(format!(
                "at most {MAX_TOP_LOGPROBS} alternatives per token, not {n}"
            )));
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
        let grammar = (req.tool_constraint.as_ref()).map(|c| (c.clone(), c.start()));
        let lookahead = (self.config.speculation)
            .filter(|_| speculate)
            .map_or(0, |s| s.lookahead_rows());
        let rows = (len + req.max_new_tokens).min(ctx) + lookahead;
        let seq = self.cache.new_sequence(rows)?;
        let mut out = empty_output(len);
        out.logits = req.record_logits.then(Vec::new);
        out.logprobs = req.logprobs.map(|_| Vec::new());
        let mtp_rows = self.config.speculation.is_some();
        let plan = PrefillPlan::new(
            len,
            self.config.prefill_chunk,
            &req.reuse_points,
            self.config.snapshot_stride,
            u64::from(mtp_rows),
        );
        let policy = self.config.reuse;
        let usable = |c: &PrefixCandidate| {
            let aligned = match policy {
                ReusePolicy::Exact => plan.tag(c.len) == Some(c.tag),
                ReusePolicy::Longest => true,
            };
            aligned && (c.len < len || c.has_logits) && (!mtp_rows || c.has_hidden)
        };
        let mut prefill = Prefill {
            plan: plan.clone(),
            passes: Default::default(),
            carry: None,
            logits: None,
        };
        let mut done = 0;
        let lookup = match req.max_new_tokens {
            0 => None,
            _ => self.cache.lookup(&req.prompt, usable),
        };
        if let Some(hit) = lookup {
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
        out.cached_tokens = done;
        let phase = if req.max_new_tokens == 0 {
            Phase::Done
        } else {
            Phase::Prefill(prefill)
        };
        Ok(Active {
            id,
            req,
            seq,
            sampler,
            out,
            phase,
            speculator: None,
            start,
            decode_start: None,
            sink,
            speculate,
            grammar,
            error: None,
        })
    }
}
