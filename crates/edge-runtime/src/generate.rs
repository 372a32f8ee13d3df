//! Single-sequence generation: prefill the prompt, then decode token by token.

use crate::sampling::{Sampler, SamplingParams};
use crate::{Result, RuntimeError};
use edge_model::{Logits, Qwen35Model, Scratch};
use std::time::Instant;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenerateRequest {
    /// Prompt token ids (at least one).
    pub prompt: Vec<u32>,
    /// Upper bound on generated tokens.
    pub max_new_tokens: usize,
    /// Sampling parameters.
    pub sampling: SamplingParams,
    /// Generation stops after emitting any of these (the stop token is kept).
    pub stop_tokens: Vec<u32>,
    /// Keep the logits row each generated token was chosen from.
    pub record_logits: bool,
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
}

/// The result of [`generate`].
#[derive(Clone, Debug)]
pub struct GenerateOutput {
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// `[tokens, vocab]` logits when requested: row i produced token i.
    pub logits: Option<Vec<f32>>,
    /// Wall time of the prompt forward, milliseconds.
    pub prefill_ms: f64,
    /// Wall time of the decode forwards, milliseconds.
    pub decode_ms: f64,
    /// Why it stopped.
    pub stop: StopReason,
}

impl GenerateOutput {
    /// Decode speed: tokens produced by decode forwards per second (the first token
    /// comes from the prefill forward and is not counted).
    pub fn decode_tokens_per_s(&self) -> f64 {
        let decoded = self.tokens.len().saturating_sub(1);
        if decoded == 0 || self.decode_ms <= 0.0 {
            0.0
        } else {
            decoded as f64 / (self.decode_ms / 1000.0)
        }
    }
}

/// Runs one generation on a fresh sequence state.
pub fn generate(model: &Qwen35Model, req: &GenerateRequest) -> Result<GenerateOutput> {
    if req.prompt.is_empty() {
        return Err(RuntimeError::InvalidRequest("the prompt is empty".into()));
    }
    let ctx = model.config().max_position_embeddings;
    if req.prompt.len() >= ctx {
        return Err(RuntimeError::InvalidRequest(format!(
            "the prompt has {} tokens; the model's context is {ctx}, leaving no room to generate",
            req.prompt.len()
        )));
    }
    let mut sampler = Sampler::new(req.sampling)?;
    let mut state = model.new_state();
    let vocab = model.config().vocab_size;
    let mut out = GenerateOutput {
        tokens: Vec::new(),
        logits: req.record_logits.then(Vec::new),
        prefill_ms: 0.0,
        decode_ms: 0.0,
        stop: StopReason::Length,
    };
    if req.max_new_tokens == 0 {
        return Ok(out);
    }
    // One pool of work buffers for the request: decode steps reuse the prompt's.
    let mut scratch = Scratch::new();
    let start = Instant::now();
    let mut logits =
        (model.forward_with_scratch(&req.prompt, &mut state, Logits::Last, &mut scratch)?).logits;
    out.prefill_ms = start.elapsed().as_secs_f64() * 1e3;
    let decode_start = Instant::now();
    loop {
        let token = sampler.sample(&logits[..vocab])?;
        out.tokens.push(token);
        if let Some(rows) = out.logits.as_mut() {
            rows.extend_from_slice(&logits[..vocab]);
        }
        if req.stop_tokens.contains(&token) {
            out.stop = StopReason::Stop;
            break;
        }
        if out.tokens.len() >= req.max_new_tokens {
            break;
        }
        if state.position >= ctx {
            out.stop = StopReason::Context;
            break;
        }
        logits =
            (model.forward_with_scratch(&[token], &mut state, Logits::Last, &mut scratch)?).logits;
    }
    out.decode_ms = decode_start.elapsed().as_secs_f64() * 1e3;
    Ok(out)
}
