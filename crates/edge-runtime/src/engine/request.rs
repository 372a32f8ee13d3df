//! What a request asks of the engine and what it gets back.

use crate::sampling::SamplingParams;
use crate::tool_calls::ToolConstraint;
use edge_spec::SpecStats;
use edge_spec::sampling::TokenLogprob;

/// What to generate.
#[derive(Clone, Debug, Default)]
pub struct GenerateRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// Positions in the prompt where a later request may continue from this one (the
    /// ends of chat messages): the prefill is cut there and a snapshot kept, so a
    /// request sharing the prompt up to such a point resumes there exactly.
    pub reuse_points: Vec<usize>,
    /// Upper bound on generated tokens.
    pub max_new_tokens: usize,
    /// Sampling parameters.
    pub sampling: SamplingParams,
    /// Generation stops after emitting any of these (the stop token is kept).
    pub stop_tokens: Vec<u32>,
    /// Keep the logits row each generated token was chosen from (turns speculation
    /// off for this request).
    pub record_logits: bool,
    /// Report each generated token's log-probability under the model, with this many
    /// most likely alternatives (at most 20; turns speculation off for this request).
    pub logprobs: Option<usize>,
    /// Constrain the tool calls the reply writes to the request's tools (see
    /// [`crate::tool_calls::grammar`]): while a call is open, tokens the grammar rejects
    /// are never chosen. The reply outside calls is free. Speculation verifies each
    /// draft against the grammar state its path leads to, so it stays lossless.
    pub tool_constraint: Option<ToolConstraint>,
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A stop token was generated.
    Stop,
    /// `max_new_tokens` was reached.
    Length,
    /// The model's context is full.
    Context,
    /// The caller cancelled it (or stopped listening).
    Cancelled,
}

impl StopReason {
    /// `stop`, `length`, `context` or `cancelled`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::Context => "context",
            StopReason::Cancelled => "cancelled",
        }
    }
}

/// The result of [`crate::Engine::generate`].
#[derive(Clone, Debug)]
pub struct GenerateOutput {
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// `[tokens, vocab]` logits when requested: row i produced token i.
    pub logits: Option<Vec<f32>>,
    /// Why it stopped.
    pub stop: StopReason,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens restored from the prefix cache instead of prefilled.
    pub cached_tokens: usize,
    /// Wall time from the request to its first token's logits (lookup, restore and
    /// prefill), milliseconds.
    pub prefill_ms: f64,
    /// Wall time after that, milliseconds.
    pub decode_ms: f64,
    /// Speculation counters, when the request was speculated.
    pub speculation: Option<SpecStats>,
    /// Per generated token, its log-probability and alternatives, when requested.
    pub logprobs: Option<Vec<TokenLogprob>>,
}

impl GenerateOutput {
    /// Prompt tokens that ran through the model.
    pub fn prefilled_tokens(&self) -> usize {
        self.prompt_tokens - self.cached_tokens
    }

    /// Decode speed: tokens after the first per second of decode time.
    pub fn decode_tokens_per_s(&self) -> f64 {
        let decoded = self.tokens.len().saturating_sub(1);
        if decoded == 0 || self.decode_ms <= 0.0 {
            0.0
        } else {
            decoded as f64 / (self.decode_ms / 1000.0)
        }
    }
}

/// Totals over an engine's requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests served (successfully).
    pub requests: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Prompt tokens restored from the prefix cache.
    pub cached_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Times a running request gave its pages back for another to grow, to resume
    /// later by recomputing its tokens (see [`crate::engine::EngineConfig::decode_reserve`]).
    pub preemptions: u64,
}

impl EngineStats {
    /// Prompt tokens that ran through the model.
    pub fn prefilled_tokens(&self) -> u64 {
        self.prompt_tokens - self.cached_tokens
    }

    /// Cached prompt tokens over all prompt tokens (0 before any request).
    pub fn hot_cache_ratio(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.prompt_tokens as f64
        }
    }
}
