//! A request in flight: its sequence, where it is (prefilling or decoding), what it has
//! produced, and where its events go.

use super::plan::PrefillPlan;
use super::request::{GenerateOutput, GenerateRequest, StopReason};
use crate::RuntimeError;
use crate::sampling::Sampler;
use crate::tool_calls::{GrammarState, ToolConstraint};
use edge_kvcache::SeqId;
use edge_model::{Backend, LogitRows};
use edge_spec::Speculator;
use edge_spec::sampling::TokenLogprob;
use std::time::Instant;

/// A request's id within its engine, in submission order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// What a running request reports, in order: its tokens as they are chosen, then one
/// `Finished`.
#[derive(Debug)]
pub enum Event {
    /// A generated token (the first after the prefill; later ones per decode step, or
    /// several per speculative step).
    Token {
        /// The token id.
        id: u32,
        /// Its log-probability and the top alternatives, when the request asked for
        /// them ([`GenerateRequest::logprobs`]).
        logprob: Option<TokenLogprob>,
    },
    /// The request ended: its output, or the error that stopped it. Its pages are back
    /// in the cache's pool.
    Finished(Result<GenerateOutput, RuntimeError>),
    /// The request is still waiting or prefilling (sent after each prefill chunk, and
    /// now and then while queued in an [`super::EngineHandle`]): carries nothing, but a
    /// sink that is gone is noticed here, before any token, and the request ends.
    /// [`super::RequestStream`] never yields it.
    Alive,
}

/// Where a request's events go; returns `false` once nobody listens (the request is
/// then cancelled).
pub type EventSink = Box<dyn FnMut(Event) -> bool + Send>;

/// The prefill still to run: the remaining passes of the plan.
pub(crate) struct Prefill {
    /// The tokens this prefill puts in the cache: the prompt, or after a preemption the
    /// prompt and the tokens generated before it (all but the last, chosen and not yet
    /// run).
    pub tokens: Vec<u32>,
    /// After a preemption: the chosen token that decoding resumes with (the prefill's
    /// logits are not sampled again).
    pub resume: Option<u32>,
    pub plan: PrefillPlan,
    /// `(from, to, snapshot at to)`, in order.
    pub passes: std::collections::VecDeque<(usize, usize, bool)>,
    /// The final hidden state at the position before the next pass (MTP rows), when
    /// speculation is on.
    pub carry: Option<Vec<f32>>,
    /// The prompt's last logits, when restored from a snapshot of the whole prompt.
    pub logits: Option<Vec<f32>>,
}

/// A request's phase.
pub(crate) enum Phase {
    /// Checked and waiting for room in the cache (new, or preempted): it holds no
    /// sequence.
    Waiting,
    Prefill(Prefill),
    Decode {
        /// The last chosen token, not yet run.
        token: u32,
    },
    Done,
}

/// One request in flight.
pub(crate) struct Active<B: Backend> {
    pub id: RequestId,
    pub req: GenerateRequest,
    /// Its cache sequence, while placed (`None` while waiting).
    pub seq: Option<SeqId>,
    pub sampler: Sampler,
    pub out: GenerateOutput,
    pub phase: Phase,
    /// Its speculator, once decoding speculatively.
    pub speculator: Option<Speculator<B>>,
    pub start: Instant,
    pub decode_start: Option<Instant>,
    pub sink: Option<EventSink>,
    /// Whether this request may speculate (speculation on and no logits recorded).
    pub speculate: bool,
    /// Its constrained tool calls and where its reply stands in their grammar.
    pub grammar: Option<(ToolConstraint, GrammarState)>,
    /// What stopped it, when it failed.
    pub error: Option<RuntimeError>,
    /// Whether it has been placed in the cache before (it is being resumed).
    pub placed: bool,
}

impl<B: Backend> Active<B> {
    /// Its cache sequence; a request in a step always has one (an `Internal` error
    /// otherwise).
    pub fn sequence(&self) -> Result<SeqId, RuntimeError> {
        self.seq.ok_or_else(|| {
            RuntimeError::Internal(format!("request {} runs without a sequence", self.id.0))
        })
    }

    /// Ends the request with `reason` (the phase becomes `Done`).
    pub fn end(&mut self, reason: StopReason) {
        self.out.stop = reason;
        self.phase = Phase::Done;
    }

    /// Ends the request with an error.
    pub fn fail(&mut self, error: RuntimeError) {
        self.error = Some(error);
        self.phase = Phase::Done;
    }

    /// Sends `event`; a sink that is gone cancels the request.
    pub fn send(&mut self, event: Event) -> bool {
        match self.sink.as_mut() {
            Some(sink) => sink(event),
            None => true,
        }
    }

    /// What of its next logits row its next token needs, so the forward pass can
    /// return that instead of the row: the greedy choice (temperature 0, no penalties)
    /// or the `top_k` most likely tokens (sampling limited by `top_k`, no penalties),
    /// unless the request keeps the rows or their log-probabilities, or constrains its
    /// tool calls (the grammar may mask any token).
    pub fn row_needed(&self) -> LogitRows {
        let keeps_rows = self.req.logprobs.is_some() || self.out.logits.is_some();
        let penalties = self.sampler.params().has_penalties();
        let constrained = self.grammar.is_some();
        if keeps_rows || penalties || constrained {
            LogitRows::Last
        } else if self.sampler.is_greedy() {
            LogitRows::Greedy
        } else if self.sampler.top_tokens_suffice() {
            LogitRows::Top(self.sampler.params().top_k)
        } else {
            LogitRows::Last
        }
    }

    /// Chooses the next token from a full logits row: the sampler's choice among the
    /// tokens the tool-call grammar allows. Inside a call the row is masked first (the
    /// sampler's cuts then apply to the allowed tokens), except that greedy decoding
    /// tries the unmasked choice first, which stands when the grammar allows it (the
    /// mask only lowers other logits). Outside calls the unmasked choice stands unless
    /// it opens a call wrongly, when the masked row is sampled again.
    pub fn choose(&mut self, row: &[f32]) -> Result<u32, RuntimeError> {
        let stops = &self.req.stop_tokens;
        let Some((constraint, state)) = self.grammar.as_ref().map(|(c, s)| (c, *s)) else {
            return Ok(self.sampler.sample(row)?);
        };
        if self.sampler.is_greedy() || !state.in_call() {
            let token = self.sampler.sample(row)?;
            if constraint.accept(state, token, stops).is_some() {
                return Ok(token);
            }
        }
        let mut masked = row.to_vec();
        if constraint.mask(state, &mut masked, stops) == 0 {
            return Err(RuntimeError::ToolGrammarDeadEnd);
        }
        Ok(self.sampler.sample(&masked)?)
    }

    /// Records a chosen token (with the logits row it came from) and decides whether
    /// the request goes on: `Some(reason)` when it ends here. `position` is where the
    /// token would run (`None` for a token already run, an accepted draft).
    pub fn push_token(
        &mut self,
        token: u32,
        logits: Option<&[f32]>,
        position: Option<usize>,
        context: usize,
    ) -> Option<StopReason> {
        self.out.tokens.push(token);
        self.sampler.observe(token);
        if let Some((c, state)) = self.grammar.as_mut() {
            // A chosen token always fits (`choose` masks); were it forced past the
            // grammar anyway, the reply is taken to be outside any call.
            let stops = &self.req.stop_tokens;
            *state = c.accept(*state, token, stops).unwrap_or_else(|| c.start());
        }
        if let (Some(rows), Some(l)) = (self.out.logits.as_mut(), logits) {
            rows.extend_from_slice(l);
        }
        let logprob = match (logits, self.req.logprobs) {
            (Some(l), Some(n)) => Some(TokenLogprob::of(l, token, n)),
            _ => None,
        };
        if let (Some(list), Some(entry)) = (self.out.logprobs.as_mut(), logprob.as_ref()) {
            list.push(entry.clone());
        }
        if !self.send(Event::Token { id: token, logprob }) {
            return Some(StopReason::Cancelled);
        }
        if self.req.stop_tokens.contains(&token) {
            Some(StopReason::Stop)
        } else if self.out.tokens.len() >= self.req.max_new_tokens {
            Some(StopReason::Length)
        } else if position.is_some_and(|p| p >= context) {
            Some(StopReason::Context)
        } else {
            None
        }
    }
}
