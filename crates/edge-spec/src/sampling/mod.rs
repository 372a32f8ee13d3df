//! Token sampling: greedy, or temperature with optional top-k / min-p / top-p, after
//! presence, frequency and repetition penalties, driven by a seeded generator so runs
//! are reproducible.
//!
//! It lives here because speculative verification must accept drafts against exactly
//! the distribution plain sampling draws from ([`Sampler::distribution`]);
//! `edge_runtime::sampling` re-exports it.

use crate::{Result, SpecError};
use edge_model::argmax;

mod distribution;
mod penalties;
#[cfg(test)]
mod tests;

pub use distribution::Distribution;
pub use penalties::{TokenLogprob, top_log_probs};

/// How the next token is chosen from logits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy (argmax); otherwise logits are divided by it before softmax.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 = no limit).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p` (1 = no limit).
    pub top_p: f32,
    /// Seed of the random generator.
    pub seed: u64,
    /// Drop tokens less likely than `min_p` times the most likely one (0 = off).
    pub min_p: f32,
    /// Subtracted from the logit of every token the output already holds (OpenAI's
    /// `presence_penalty`, −2 to 2).
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per occurrence in the output (OpenAI's
    /// `frequency_penalty`, −2 to 2).
    pub frequency_penalty: f32,
    /// Divides positive (multiplies negative) logits of tokens seen in the prompt or
    /// the output (transformers' and vLLM's `repetition_penalty`; 1 = off).
    pub repetition_penalty: f32,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            min_p: 0.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
        }
    }
}

impl SamplingParams {
    /// Checks ranges, returning a typed error naming the bad parameter.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(SpecError::InvalidRequest(format!(
                "temperature must be a finite number ≥ 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SpecError::InvalidRequest(format!(
                "top_p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SpecError::InvalidRequest(format!(
                "min_p must be in [0, 1], got {}",
                self.min_p
            )));
        }
        for (name, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return Err(SpecError::InvalidRequest(format!(
                    "{name} must be in [-2, 2], got {v}"
                )));
            }
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(SpecError::InvalidRequest(format!(
                "repetition_penalty must be a finite number > 0, got {}",
                self.repetition_penalty
            )));
        }
        Ok(())
    }

    /// Whether a penalty depends on the request's history (speculation then does not
    /// apply: a draft's distribution would depend on its own path).
    pub fn has_penalties(&self) -> bool {
        self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
            || self.repetition_penalty != 1.0
    }
}

/// A seeded sampler (PCG-XSH-RR 64/32 generator).
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    state: u64,
    history: penalties::History,
}

impl Sampler {
    /// Creates a sampler after validating `params`.
    pub fn new(params: SamplingParams) -> Result<Self> {
        params.validate()?;
        let mut s = Sampler {
            params,
            state: 0,
            history: Default::default(),
        };
        s.state = params.seed.wrapping_add(0x853c_49e6_748f_ea9b);
        s.next_u32();
        Ok(s)
    }

    /// The parameters it samples with.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Records the prompt (the repetition penalty looks at its tokens).
    pub fn set_prompt(&mut self, prompt: &[u32]) {
        if self.params.repetition_penalty != 1.0 {
            self.history.set_prompt(prompt);
        }
    }

    /// Records a token the request generated (the penalties look at them).
    pub fn observe(&mut self, token: u32) {
        if self.params.has_penalties() {
            self.history.observe(token);
        }
    }

    /// Whether it decodes greedily (temperature 0): argmax, no randomness consumed.
    pub fn is_greedy(&self) -> bool {
        self.params.temperature == 0.0
    }

    fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        xorshifted.rotate_right((old >> 59) as u32)
    }

    /// The next uniform number in [0, 1) (24 random bits), advancing the generator.
    pub fn uniform(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32
    }

    /// The distribution [`Sampler::sample`] draws from for one row of logits: the
    /// penalties applied, softmax at the temperature over the `top_k` largest logits,
    /// tokens below `min_p` times the most likely one dropped, cut to the smallest
    /// prefix whose probability reaches `top_p`, renormalised; tokens of probability 0
    /// (underflow) are left out. Greedy: a point mass on the [`argmax`] of the
    /// penalised logits. NaN logits are never chosen. Consumes no randomness.
    pub fn distribution(&self, logits: &[f32]) -> Result<Distribution> {
        if logits.is_empty() {
            return Err(SpecError::InvalidRequest("empty logits".into()));
        }
        let logits = self.history.apply(&self.params, logits);
        let logits = &logits[..];
        if self.is_greedy() {
            return Ok(Distribution {
                tokens: vec![argmax(logits)],
                probs: vec![1.0],
            });
        }
        let mut order: Vec<u32> = (0..logits.len() as u32)
            .filter(|&i| !logits[i as usize].is_nan())
            .collect();
        if order.is_empty() {
            return Err(SpecError::InvalidRequest("every logit is NaN".into()));
        }
        order.sort_unstable_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        if self.params.top_k > 0 {
            order.truncate(self.params.top_k);
        }
        let max = logits[order[0] as usize];
        let t = self.params.temperature;
        // `l == max` keeps a +inf (or all -inf) maximum finite: exp(0) = 1.
        let mut probs: Vec<f32> = order
            .iter()
            .map(|&i| logits[i as usize])
            .map(|l| if l == max { 1.0 } else { ((l - max) / t).exp() })
            .collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= total);
        if self.params.min_p > 0.0 {
            // Probabilities fall along `order`: the tokens below the floor are a suffix.
            let floor = self.params.min_p * probs[0];
            let kept = probs.iter().take_while(|&&p| p >= floor).count();
            probs.truncate(kept);
            order.truncate(kept);
            let mass: f32 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p /= mass);
        }
        let mut keep = probs.len();
        let mut cum = 0.0;
        for (i, p) in probs.iter().enumerate() {
            cum += p;
            if cum >= self.params.top_p {
                keep = i + 1;
                break;
            }
        }
        // Probabilities fall along `order`, so the zeros (underflow) are a suffix.
        let keep = probs[..keep].iter().take_while(|&&p| p > 0.0).count();
        order.truncate(keep);
        probs.truncate(keep);
        let mass: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= mass);
        Ok(Distribution {
            tokens: order,
            probs,
        })
    }

    /// Chooses a token from one row of logits: a draw from
    /// [`Sampler::distribution`] with one [`Sampler::uniform`] (none when greedy).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let dist = self.distribution(logits)?;
        let u = if self.is_greedy() {
            0.0
        } else {
            self.uniform()
        };
        dist.draw(u)
            .ok_or_else(|| SpecError::InvalidRequest("no token to sample".into()))
    }
}
