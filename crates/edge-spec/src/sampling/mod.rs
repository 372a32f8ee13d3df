//! Token sampling: greedy, or temperature with optional top-k / min-p / top-p, after
//! presence, frequency and repetition penalties, driven by the request's seed through
//! the project's one generator ([`edge_core::rng::SeededRng`]), so runs are reproducible.
//!
//! It lives here because speculative verification must accept drafts against exactly
//! the distribution plain sampling draws from ([`Sampler::distribution`]);
//! `edge_runtime::sampling` re-exports it.

use crate::{Result, SpecError};
use edge_core::rng::SeededRng;
use edge_model::{TopLogits, argmax};

#[cfg(test)]
mod candidates_tests;
mod distribution;
mod penalties;
#[cfg(test)]
mod tests;

pub use distribution::Distribution;
pub use edge_model::top_log_probs;
pub use penalties::TokenLogprob;

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
            return Err(SpecError::InvalidSampling {
                param: "temperature",
                value: self.temperature,
                expected: "a finite number ≥ 0",
            });
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SpecError::InvalidSampling {
                param: "top_p",
                value: self.top_p,
                expected: "in (0, 1]",
            });
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SpecError::InvalidSampling {
                param: "min_p",
                value: self.min_p,
                expected: "in [0, 1]",
            });
        }
        for (name, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return Err(SpecError::InvalidSampling {
                    param: name,
                    value: v,
                    expected: "in [-2, 2]",
                });
            }
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(SpecError::InvalidSampling {
                param: "repetition_penalty",
                value: self.repetition_penalty,
                expected: "a finite number > 0",
            });
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

/// A row's top candidates, the input of [`Sampler::distribution_from_candidates`]: what
/// `edge_model::cuda::top_k` computes on the device (or any backend's equivalent).
#[derive(Clone, Copy, Debug)]
pub struct Candidates<'a> {
    /// Token ids, in descending logit order, ties by the lower id (NaN never).
    pub ids: &'a [u32],
    /// Their logits.
    pub logits: &'a [f32],
    /// Whether these are all the row's non-NaN logits.
    pub complete: bool,
    /// `Σ exp((l − max) / temperature)` over the whole row's non-NaN logits (`l == max`
    /// counts 1), at the sampler's temperature.
    pub sum: f32,
}

/// The bits of a (non-NaN) float as a u32 that orders like the float (`total_cmp`).
fn order_bits(v: f32) -> u32 {
    let b = v.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// How close to `top_p` a cumulative probability computed with another row's softmax
/// sum may be before the cut counts as undecided (f32 sums over a large vocabulary in
/// another order differ by about this much).
const CUT_MARGIN: f32 = 1e-4;

/// What lies past the logits [`Sampler::shape`] is given.
#[derive(Clone, Copy)]
enum Tail {
    /// Nothing: they are the whole (possibly `top_k`-limited) row.
    None,
    /// More of the row, whose full softmax denominator is this.
    Sum(f32),
}

/// A seeded sampler: its draws come from [`SeededRng::from_seed`] of the request's
/// `seed`, so a seed gives the same tokens on every machine.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: SeededRng,
    history: penalties::History,
}

impl Sampler {
    /// Creates a sampler after validating `params`.
    pub fn new(params: SamplingParams) -> Result<Self> {
        params.validate()?;
        Ok(Sampler {
            params,
            rng: SeededRng::from_seed(params.seed),
            history: Default::default(),
        })
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

    /// The next uniform number in [0, 1) (24 random bits: [`SeededRng::next_f32`]),
    /// advancing the generator.
    pub fn uniform(&mut self) -> f32 {
        self.rng.next_f32()
    }

    /// The distribution [`Sampler::sample`] draws from for one row of logits: the
    /// penalties applied, softmax at the temperature over the `top_k` largest logits,
    /// tokens below `min_p` times the most likely one dropped, cut to the smallest
    /// prefix whose probability reaches `top_p`, renormalised; tokens of probability 0
    /// (underflow) are left out. Greedy: a point mass on the [`argmax`] of the
    /// penalised logits. NaN logits are never chosen. Consumes no randomness.
    pub fn distribution(&self, logits: &[f32]) -> Result<Distribution> {
        if logits.is_empty() {
            return Err(SpecError::NothingToSample {
                reason: "empty logits",
            });
        }
        let logits = self.history.apply(&self.params, logits);
        let logits = &logits[..];
        if self.is_greedy() {
            return Ok(Distribution {
                tokens: vec![argmax(logits)],
                probs: vec![1.0],
            });
        }
        // Descending logits, ties by the lower id (as the device's top-k candidates order
        // them), as one u64 key per token: the inverted order-preserving bits of the
        // logit above the id, so the sort compares plain integers.
        let mut keys: Vec<u64> = (logits.iter().enumerate())
            .filter(|(_, l)| !l.is_nan())
            .map(|(i, &l)| (u64::from(!order_bits(l)) << 32) | i as u64)
            .collect();
        if keys.is_empty() {
            return Err(SpecError::NothingToSample {
                reason: "every logit is NaN",
            });
        }
        keys.sort_unstable();
        if self.params.top_k > 0 {
            keys.truncate(self.params.top_k);
        }
        let order: Vec<u32> = keys.iter().map(|&k| k as u32).collect();
        let values = order.iter().map(|&i| logits[i as usize]).collect();
        Ok(self
            .shape(order, values, Tail::None)
            .expect("a complete list always determines the distribution"))
    }

    /// The distribution from a row's top candidates alone ([`Candidates`], e.g. the
    /// device's top-k), without the rest of the vocabulary: `Some` when the candidates
    /// determine it, then equal to [`Sampler::distribution`] on the full row (bit for bit
    /// when `top_k` limits it to the candidates or they are the whole row; without
    /// `top_k` the top-p cut uses the given softmax denominator, which may round
    /// differently at the cut). `None` when the full row is needed: a history penalty
    /// changes logits, `top_k` reaches past the candidates of an incomplete list, or
    /// neither `min_p` nor `top_p` cuts inside them.
    pub fn distribution_from_candidates(&self, c: &Candidates<'_>) -> Result<Option<Distribution>> {
        if c.ids.len() != c.logits.len() {
            return Err(SpecError::CandidateMismatch {
                ids: c.ids.len(),
                logits: c.logits.len(),
            });
        }
        if self.params.has_penalties() {
            return Ok(None);
        }
        if self.is_greedy() {
            // The first candidate is the lowest-id maximum; none: every logit is NaN.
            return Ok(Some(Distribution {
                tokens: vec![c.ids.first().copied().unwrap_or(0)],
                probs: vec![1.0],
            }));
        }
        if c.ids.is_empty() {
            return Err(SpecError::NothingToSample {
                reason: "every logit is NaN",
            });
        }
        let k = self.params.top_k;
        if c.complete || (k > 0 && k <= c.ids.len()) {
            let n = if k > 0 {
                k.min(c.ids.len())
            } else {
                c.ids.len()
            };
            let d = self.shape(c.ids[..n].to_vec(), c.logits[..n].to_vec(), Tail::None);
            return Ok(d);
        }
        if k > 0 {
            // The softmax runs over the top_k tokens, some past the candidates.
            return Ok(None);
        }
        Ok(self.shape(c.ids.to_vec(), c.logits.to_vec(), Tail::Sum(c.sum)))
    }

    /// Softmax at the temperature over `order` (token ids, descending `values`), then
    /// the `min_p` and `top_p` cuts and the drop of zero probabilities, renormalised.
    /// With [`Tail::Sum`], `order` is only the head of the row and the probabilities
    /// use the row's full denominator; `None` when no cut closes inside the head.
    fn shape(&self, mut order: Vec<u32>, values: Vec<f32>, tail: Tail) -> Option<Distribution> {
        let max = values[0];
        let t = self.params.temperature;
        // The logits become the probabilities in place (no second vocabulary-sized
        // buffer). `l == max` keeps a +inf (or all -inf) maximum finite: exp(0) = 1.
        let mut probs = values;
        for p in &mut probs {
            *p = if *p == max {
                1.0
            } else {
                ((*p - max) / t).exp()
            };
        }
        let total: f32 = match tail {
            Tail::None => probs.iter().sum(),
            Tail::Sum(sum) => sum,
        };
        probs.iter_mut().for_each(|p| *p /= total);
        let mut cut = matches!(tail, Tail::None);
        if self.params.min_p > 0.0 {
            // Probabilities fall along `order`: the tokens below the floor are a suffix.
            let floor = self.params.min_p * probs[0];
            let kept = probs.iter().take_while(|&&p| p >= floor).count();
            cut |= kept < probs.len();
            if !cut {
                return None; // tokens past the head may still be above the floor
            }
            probs.truncate(kept);
            order.truncate(kept);
            let mass: f32 = probs.iter().sum();
            probs.iter_mut().for_each(|p| *p /= mass);
        }
        let mut keep = probs.len();
        let mut cum = 0.0;
        for (i, p) in probs.iter().enumerate() {
            let before = cum;
            cum += p;
            if cum >= self.params.top_p {
                // With another row's sum the cut must not hinge on rounding: a cumulative
                // mass this close to top_p on either side could fall the other way.
                let near = |c: f32| (c - self.params.top_p).abs() <= CUT_MARGIN;
                if matches!(tail, Tail::Sum(_)) && (near(before) || near(cum)) {
                    return None;
                }
                keep = i + 1;
                cut = true;
                break;
            }
        }
        if !cut {
            return None; // the nucleus reaches past the head
        }
        // Probabilities fall along `order`, so the zeros (underflow) are a suffix.
        let keep = probs[..keep].iter().take_while(|&&p| p > 0.0).count();
        order.truncate(keep);
        probs.truncate(keep);
        let mass: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= mass);
        Some(Distribution {
            tokens: order,
            probs,
        })
    }

    /// Chooses a token from one row of logits: a draw from
    /// [`Sampler::distribution`] with one [`Sampler::uniform`] (none when greedy).
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let dist = self.distribution(logits)?;
        self.draw(&dist)
    }

    /// Whether [`Sampler::sample_top`] can choose from a row's `top_k` most likely
    /// tokens alone: `top_k` limits the draw and no penalty changes the logits.
    pub fn top_tokens_suffice(&self) -> bool {
        self.params.top_k > 0 && !self.params.has_penalties()
    }

    /// Chooses a token from a row's most likely tokens alone (at least `top_k` of them,
    /// or all the row's, as a pass returns them for [`edge_model::LogitRows::Top`]): the
    /// same distribution [`Sampler::sample`] draws from the full row, with the same one
    /// uniform. Errors where they do not determine it
    /// ([`Sampler::top_tokens_suffice`] is false).
    pub fn sample_top(&mut self, top: &TopLogits) -> Result<u32> {
        if !self.is_greedy() && !self.top_tokens_suffice() {
            return Err(SpecError::NeedsFullRow);
        }
        let candidates = Candidates {
            ids: &top.ids,
            logits: &top.logits,
            // Fewer than asked: the row has no other non-NaN logit.
            complete: top.ids.len() < self.params.top_k,
            // Read only without top_k, which the check above rules out.
            sum: f32::NAN,
        };
        let dist = self
            .distribution_from_candidates(&candidates)?
            .ok_or(SpecError::NeedsFullRow)?;
        self.draw(&dist)
    }

    /// One draw from `dist` (no randomness when greedy).
    fn draw(&mut self, dist: &Distribution) -> Result<u32> {
        let u = if self.is_greedy() {
            0.0
        } else {
            self.uniform()
        };
        dist.draw(u).ok_or(SpecError::NothingToSample {
            reason: "no token to sample",
        })
    }
}
