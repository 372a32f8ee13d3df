//! One engine step: speculating requests run their own verification; every other
//! decoding request contributes its next row, and the oldest prefilling request its
//! next prefill pass, to one batched forward (continuous batching).

use super::Engine;
use super::StopReason;
use super::active::{Event, Phase};
use crate::tool_calls::PathFilter;
use crate::{Result, RuntimeError};
use edge_kvcache::{SequenceCache, SnapshotData};
use edge_model::{Backend, LogitRows, Qwen35Model, StepBatch, TopLogits};
use edge_spec::{RowFilter, Speculator};
use std::sync::Arc;
use std::time::Instant;

/// What a batch row range does for its request.
enum Role {
    /// One decode row, and what the pass returns for it (its logits, its greedy
    /// token or its top tokens).
    Decode(LogitRows),
    /// A prefill pass `from..to`, with a snapshot at `to` when set.
    Prefill(usize, usize, bool),
}

/// What the pass returned for a decode row (`None`: the pass returned too few).
enum DecodeRow<'a> {
    /// Its logits.
    Logits(&'a [f32]),
    /// Its greedy token.
    Greedy(Option<u32>),
    /// Its most likely tokens.
    Top(Option<&'a TopLogits>),
}

impl<B: Backend> Engine<B> {
    /// Runs one step of the requests in flight and sends their events; returns whether
    /// there was anything to run. Requests that end (a stop, the token limit, the
    /// context, a cancellation, an error) are released.
    pub fn step(&mut self) -> bool {
        if self.active.is_empty() && self.waiting.is_empty() {
            return false;
        }
        self.schedule();
        let model = self.model.clone();
        // Prompts restored whole from the cache decode without a prefill pass.
        for i in 0..self.active.len() {
            if let Phase::Prefill(p) = &mut self.active[i].phase
                && p.passes.is_empty()
            {
                let (logits, hidden, resume) = (p.logits.take(), p.carry.take(), p.resume);
                match (resume, logits) {
                    (Some(token), _) => self.resume_decode(&model, i, token, hidden),
                    (None, Some(l)) => self.start_decode(&model, i, &l, hidden),
                    (None, None) => self.active[i].fail(RuntimeError::Internal(
                        "the prompt produced no logits".into(),
                    )),
                }
            }
        }
        for i in 0..self.active.len() {
            let a = &self.active[i];
            if matches!(a.phase, Phase::Decode { .. }) && a.speculator.is_some() {
                self.speculative_step(&model, i);
            }
        }
        self.batched_step(&model);
        self.finish_done();
        true
    }

    /// The decode rows of the non-speculating requests and one prefill pass, in one
    /// forward.
    fn batched_step(&mut self, model: &Arc<Qwen35Model<B>>) {
        let mut batch = StepBatch::new();
        let mut roles = Vec::new();
        for i in 0..self.active.len() {
            let a = &self.active[i];
            if let (Phase::Decode { token }, None) = (&a.phase, &a.speculator) {
                let token = *token;
                let view = a
                    .sequence()
                    .and_then(|seq| Ok((seq, self.cache.sequence(seq)?.len)));
                match view {
                    Ok((seq, len)) => {
                        let rows = a.row_needed();
                        batch.push(seq, &[token], len, rows);
                        roles.push((i, Role::Decode(rows)));
                    }
                    // A sequence the cache no longer knows cannot go on; it ends here
                    // instead of waiting forever.
                    Err(e) => self.active[i].fail(e),
                }
            }
        }
        // The oldest prefilling request's next pass.
        let prefill = (self.active.iter().enumerate()).find_map(|(i, a)| match (&a.phase, a.seq) {
            (Phase::Prefill(p), Some(seq)) => p.passes.front().map(|&(from, to, snapshot)| {
                let rows = match to == p.tokens.len() {
                    true => LogitRows::Last,
                    false => LogitRows::None,
                };
                batch.push(seq, &p.tokens[from..to], from, rows);
                (i, Role::Prefill(from, to, snapshot))
            }),
            _ => None,
        });
        let want_hidden = self.config.speculation.is_some() && prefill.is_some();
        roles.extend(prefill);
        if batch.is_empty() {
            return;
        }
        let ran = model
            .forward(&mut self.backend, &batch, &mut self.cache)
            .and_then(|out| {
                let hidden = match want_hidden {
                    true => Some(self.backend.download(&out.hidden)),
                    false => None,
                };
                self.backend.free(out.hidden);
                Ok((out.logits, out.greedy, out.top, hidden.transpose()?))
            });
        let (logits, greedy, top, hidden) = match ran {
            Ok(ran) => ran,
            Err(e) => {
                let e = std::sync::Arc::new(e);
                for (i, _) in roles {
                    self.active[i].fail(RuntimeError::Forward(e.clone()));
                }
                return;
            }
        };
        let vocab = model.config().vocab_size;
        let (mut logit_row, mut batch_row) = (0, 0);
        let (mut greedy, mut top) = (greedy.into_iter(), top.iter());
        for (i, role) in roles {
            match role {
                Role::Decode(LogitRows::Greedy) => {
                    batch_row += 1;
                    self.decoded(model, i, DecodeRow::Greedy(greedy.next()));
                }
                Role::Decode(LogitRows::Top(_)) => {
                    batch_row += 1;
                    self.decoded(model, i, DecodeRow::Top(top.next()));
                }
                Role::Decode(_) => {
                    let row = &logits[logit_row * vocab..][..vocab];
                    logit_row += 1;
                    batch_row += 1;
                    self.decoded(model, i, DecodeRow::Logits(row));
                }
                Role::Prefill(from, to, snapshot) => {
                    let last = match &self.active[i].phase {
                        Phase::Prefill(p) => to == p.tokens.len(),
                        _ => false,
                    };
                    let logits = last.then(|| logits[logit_row * vocab..][..vocab].to_vec());
                    let h = model.config().hidden_size;
                    let span_hidden = (hidden.as_deref())
                        .map(|all| &all[batch_row * h..(batch_row + to - from) * h]);
                    if let Err(e) =
                        self.prefilled(model, i, (from, to, snapshot), logits, span_hidden)
                    {
                        self.active[i].fail(e);
                    }
                    // Between prefill chunks nothing else reaches the client: ask
                    // whether it is still there, so a long prompt whose client left
                    // stops within a chunk.
                    let a = &mut self.active[i];
                    if matches!(a.phase, Phase::Prefill(_)) && !a.send(Event::Alive) {
                        a.end(StopReason::Cancelled);
                    }
                }
            }
        }
    }

    /// A decode row ran: samples its token (or takes the pass's greedy choice) and
    /// records it.
    fn decoded(&mut self, model: &Qwen35Model<B>, i: usize, row: DecodeRow<'_>) {
        let ctx = model.config().max_position_embeddings;
        let position =
            (self.active[i].sequence()).and_then(|seq| Ok(self.cache.sequence(seq)?.len));
        let a = &mut self.active[i];
        let missing =
            || RuntimeError::Internal("the forward pass returned too few reduced rows".into());
        let (chosen, logits) = match row {
            DecodeRow::Logits(l) => (a.choose(l), Some(l)),
            DecodeRow::Greedy(token) => (token.ok_or_else(missing), None),
            DecodeRow::Top(top) => {
                let token = top.ok_or_else(missing);
                (token.and_then(|t| Ok(a.sampler.sample_top(t)?)), None)
            }
        };
        let token = match (chosen, position) {
            (Ok(t), Ok(p)) => (t, p),
            (Err(e), _) | (_, Err(e)) => return a.fail(e),
        };
        match a.push_token(token.0, logits, Some(token.1), ctx) {
            Some(reason) => a.end(reason),
            None => a.phase = Phase::Decode { token: token.0 },
        }
    }

    /// A prefill pass ran: the MTP head's rows, the snapshot, and the first token when
    /// the prompt is done.
    fn prefilled(
        &mut self,
        model: &Qwen35Model<B>,
        i: usize,
        (from, to, snapshot): (usize, usize, bool),
        logits: Option<Vec<f32>>,
        hidden: Option<&[f32]>,
    ) -> Result<()> {
        let h = model.config().hidden_size;
        let seq = self.active[i].sequence()?;
        let Phase::Prefill(p) = &mut self.active[i].phase else {
            return Ok(());
        };
        p.passes.pop_front();
        let (len, resume) = (p.tokens.len(), p.resume);
        let mut carry = p.carry.take();
        let tag = p.plan.tag(to).unwrap_or_default();
        if let Some(hidden) = hidden {
            mtp_rows(
                model,
                &mut self.backend,
                &mut self.cache,
                (seq, &p.tokens),
                (from, to),
                carry.as_deref(),
                hidden,
            )?;
            carry = Some(hidden[(to - from - 1) * h..].to_vec());
        }
        if snapshot {
            let data = SnapshotData {
                logits: logits.clone().filter(|_| to == len),
                hidden: carry.clone(),
                tag,
            };
            self.cache.insert_snapshot(seq, &p.tokens[..to], data)?;
        }
        p.carry = carry.clone();
        if to == len {
            match resume {
                Some(token) => self.resume_decode(model, i, token, carry),
                None => {
                    let logits = logits.ok_or_else(|| {
                        RuntimeError::Internal("the prompt produced no logits".into())
                    })?;
                    self.start_decode(model, i, &logits, carry);
                }
            }
        }
        Ok(())
    }

    /// The prompt is in the cache: choose the first token, and start speculating.
    fn start_decode(
        &mut self,
        model: &Qwen35Model<B>,
        i: usize,
        logits: &[f32],
        hidden: Option<Vec<f32>>,
    ) {
        let vocab = model.config().vocab_size;
        let ctx = model.config().max_position_embeddings;
        let a = &mut self.active[i];
        a.out.prefill_ms = a.start.elapsed().as_secs_f64() * 1e3;
        a.decode_start = Some(Instant::now());
        let len = a.req.prompt.len();
        let token = match a.choose(&logits[..vocab]) {
            Ok(t) => t,
            Err(e) => return a.fail(e),
        };
        let speculator = match (self.config.speculation, hidden) {
            (Some(cfg), Some(hidden)) if a.speculate => match Speculator::new(model, cfg) {
                Ok(mut s) => match self.backend.upload(&hidden) {
                    Ok(row) => {
                        s.start(row, token, len - 1);
                        Some(s)
                    }
                    Err(e) => return a.fail(e.into()),
                },
                Err(e) => return a.fail(e.into()),
            },
            _ => None,
        };
        a.phase = Phase::Decode { token };
        a.speculator = speculator;
        if let Some(reason) = a.push_token(token, Some(&logits[..vocab]), Some(len), ctx) {
            a.end(reason);
        }
    }

    /// A preempted request's tokens are back in the cache: decoding goes on with the
    /// token it had chosen (already sent), speculating again from the last hidden
    /// state when it did before.
    fn resume_decode(
        &mut self,
        model: &Qwen35Model<B>,
        i: usize,
        token: u32,
        hidden: Option<Vec<f32>>,
    ) {
        let a = &mut self.active[i];
        let len = match &a.phase {
            Phase::Prefill(p) => p.tokens.len(),
            _ => return,
        };
        a.phase = Phase::Decode { token };
        a.speculator = match (self.config.speculation, hidden) {
            (Some(cfg), Some(hidden)) if a.speculate => {
                let started = Speculator::new(model, cfg).map_err(RuntimeError::from);
                let row = self.backend.upload(&hidden).map_err(RuntimeError::from);
                match started.and_then(|s| Ok((s, row?))) {
                    Ok((mut s, row)) => {
                        s.start(row, token, len - 1);
                        Some(s)
                    }
                    Err(e) => return a.fail(e),
                }
            }
            _ => None,
        };
    }

    /// One speculative step of request `i`: draft, verify, commit, emit.
    fn speculative_step(&mut self, model: &Qwen35Model<B>, i: usize) {
        let ctx = model.config().max_position_embeddings;
        let Engine {
            active,
            backend,
            cache,
            ..
        } = self;
        let a = &mut active[i];
        let (Phase::Decode { token }, Some(s)) = (&mut a.phase, a.speculator.as_mut()) else {
            return;
        };
        let limit = a.req.max_new_tokens - a.out.tokens.len();
        // Constrained calls: verification judges each draft from the grammar state its
        // path leads to.
        let mut filter = (a.grammar.as_ref()).map(|(constraint, state)| PathFilter {
            constraint,
            state: *state,
            stops: &a.req.stop_tokens,
        });
        let filter = filter.as_mut().map(|f| f as &mut dyn RowFilter);
        let sampler = &mut a.sampler;
        let Some(seq) = a.seq else {
            return a.fail(RuntimeError::Internal(
                "a decoding request has no sequence".into(),
            ));
        };
        let emitted =
            match s.step_filtered(model, backend, cache, seq, *token, limit, sampler, filter) {
                Ok(e) => e,
                Err(e) => return a.fail(e.into()),
            };
        let Some((&last, accepted)) = emitted.split_last() else {
            return a.fail(RuntimeError::Internal(
                "a speculative step emitted nothing".into(),
            ));
        };
        *token = last;
        for &t in accepted {
            if let Some(reason) = a.push_token(t, None, None, ctx) {
                return a.end(reason);
            }
        }
        let position = cache.sequence(seq).map(|v| v.len).ok();
        if let Some(reason) = a.push_token(last, None, position, ctx) {
            a.end(reason);
        }
    }
}

/// The MTP head's rows for a prefill pass over `prompt[a..b]`: positions `a − 1 ..
/// b − 1`, pairing each hidden state with the prompt token after it (`carry` is the
/// hidden state at `a − 1`).
fn mtp_rows<B: Backend>(
    model: &Qwen35Model<B>,
    backend: &mut B,
    cache: &mut edge_kvcache::PagedCache<B::Memory>,
    (seq, prompt): (edge_kvcache::SeqId, &[u32]),
    (a, b): (usize, usize),
    carry: Option<&[f32]>,
    hidden: &[f32],
) -> Result<()> {
    let h = model.config().hidden_size;
    let first = a.max(1);
    if first >= b {
        return Ok(());
    }
    let mut rows = Vec::with_capacity((b - first) * h);
    if a > 0 {
        rows.extend_from_slice(carry.ok_or_else(|| {
            RuntimeError::Internal("a restored prefix lacks the MTP hidden row".into())
        })?);
    }
    rows.extend_from_slice(&hidden[..(b - a - 1) * h]);
    let rows = backend.upload(&rows)?;
    let batch = StepBatch::single(seq, &prompt[first..b], first - 1, LogitRows::None);
    let out = model.mtp_forward(backend, &batch, &rows, cache);
    backend.free(rows);
    backend.free(out?.hidden);
    Ok(())
}
