//! Token sampling: greedy, or temperature with optional top-k / top-p, driven by a
//! seeded generator so runs are reproducible.
//!
//! It lives here because speculative verification must accept drafts against exactly
//! the distribution plain sampling draws from ([`Sampler::distribution`]);
//! `edge_runtime::sampling` re-exports it.

use crate::{Result, SpecError};
use edge_model::argmax;

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
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
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
        Ok(())
    }
}

/// A sparse distribution over tokens: the support in descending probability, the
/// probabilities summing to 1 (up to rounding). Tokens outside `tokens` have
/// probability 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Distribution {
    /// Tokens with positive probability, most likely first.
    pub tokens: Vec<u32>,
    /// `probs[i]` is the probability of `tokens[i]`.
    pub probs: Vec<f32>,
}

impl Distribution {
    /// Probability of `token` (0 outside the support).
    pub fn prob(&self, token: u32) -> f32 {
        self.tokens
            .iter()
            .position(|&t| t == token)
            .map_or(0.0, |i| self.probs[i])
    }

    /// Conditions on "not `token`": drops it and renormalises the rest. A token outside
    /// the support leaves the distribution as it is. When no mass is left (the
    /// support was `token` alone), the distribution becomes empty and stays so:
    /// [`Distribution::draw`] then returns `None`.
    pub fn remove(&mut self, token: u32) {
        let Some(i) = self.tokens.iter().position(|&t| t == token) else {
            return;
        };
        self.tokens.remove(i);
        self.probs.remove(i);
        let rest: f32 = self.probs.iter().sum();
        if rest > 0.0 && rest.is_finite() {
            self.probs.iter_mut().for_each(|p| *p /= rest);
        } else {
            self.tokens.clear();
            self.probs.clear();
        }
    }

    /// Inverse-CDF draw for `u` in [0, 1): the first token whose cumulative
    /// probability reaches `u` (the last one when rounding leaves `u` above the total);
    /// `None` when empty.
    pub fn draw(&self, u: f32) -> Option<u32> {
        let mut r = u;
        for (&t, &p) in self.tokens.iter().zip(&self.probs) {
            r -= p;
            if r <= 0.0 {
                return Some(t);
            }
        }
        self.tokens.last().copied()
    }

    /// Whether no token has positive probability.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// A seeded sampler (PCG-XSH-RR 64/32 generator).
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    state: u64,
}

impl Sampler {
    /// Creates a sampler after validating `params`.
    pub fn new(params: SamplingParams) -> Result<Self> {
        params.validate()?;
        let mut s = Sampler { params, state: 0 };
        s.state = params.seed.wrapping_add(0x853c_49e6_748f_ea9b);
        s.next_u32();
        Ok(s)
    }

    /// The parameters it samples with.
    pub fn params(&self) -> &SamplingParams {
        &self.params
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

    /// The distribution [`Sampler::sample`] draws from for one row of logits: softmax
    /// at the temperature over the `top_k` largest logits, cut to the smallest prefix
    /// whose probability reaches `top_p`, renormalised; tokens of probability 0
    /// (underflow) are left out. Greedy: a point mass on [`argmax`]. NaN logits are
    /// never chosen. Consumes no randomness.
    pub fn distribution(&self, logits: &[f32]) -> Result<Distribution> {
        if logits.is_empty() {
            return Err(SpecError::InvalidRequest("empty logits".into()));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplingParams {
        SamplingParams {
            temperature,
            top_k,
            top_p,
            seed,
        }
    }

    #[test]
    fn greedy_is_argmax() {
        let mut s = Sampler::new(SamplingParams::default()).unwrap();
        assert!(s.is_greedy());
        assert_eq!(s.sample(&[0.1, 3.0, 2.0]).unwrap(), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0, 1.0]), 1);
        let d = s.distribution(&[0.1, 3.0, 2.0]).unwrap();
        assert_eq!((d.tokens, d.probs), (vec![1], vec![1.0]));
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_follows_distribution() {
        let params = params(1.0, 0, 1.0, 42);
        let logits = [0.0f32, (3.0f32).ln()];
        let draw = |params| {
            let mut s = Sampler::new(params).unwrap();
            (0..4000)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(params);
        assert_eq!(a, draw(params));
        let ones = a.iter().filter(|&&t| t == 1).count() as f32 / 4000.0;
        assert!((ones - 0.75).abs() < 0.03, "{ones}");
    }

    #[test]
    fn top_k_and_top_p_restrict_choices() {
        let logits = [5.0, 4.9, -10.0, 4.8];
        let mut s = Sampler::new(params(1.0, 2, 1.0, 1)).unwrap();
        for _ in 0..200 {
            assert!(s.sample(&logits).unwrap() < 2);
        }
        let mut s = Sampler::new(params(1.0, 0, 0.01, 1)).unwrap();
        for _ in 0..50 {
            assert_eq!(s.sample(&logits).unwrap(), 0);
        }
    }

    #[test]
    fn bad_params_are_errors() {
        for p in [
            params(-1.0, 0, 1.0, 0),
            params(f32::NAN, 0, 1.0, 0),
            params(0.0, 0, 0.0, 0),
        ] {
            assert!(Sampler::new(p).is_err());
        }
        let mut s = Sampler::new(SamplingParams::default()).unwrap();
        assert!(s.sample(&[]).is_err());
        assert!(s.distribution(&[]).is_err());
    }

    #[test]
    fn distribution_is_sorted_normalised_and_cut() {
        let s = Sampler::new(params(1.0, 3, 1.0, 0)).unwrap();
        let d = s.distribution(&[0.0, 2.0, -1.0, 1.0, -200.0]).unwrap();
        assert_eq!(d.tokens, vec![1, 3, 0]);
        assert!((d.probs.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(d.probs.windows(2).all(|w| w[0] >= w[1]));
        assert_eq!(d.prob(2), 0.0);
        // exp(-200) underflows: the token is left out of the support.
        let s = Sampler::new(params(1.0, 0, 1.0, 0)).unwrap();
        assert_eq!(s.distribution(&[0.0, -200.0]).unwrap().tokens, vec![0]);
        // top_p 0.6 over [0.5, 0.3, 0.2] keeps two tokens, renormalised.
        let s = Sampler::new(params(1.0, 0, 0.6, 0)).unwrap();
        let d = s
            .distribution(&[0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()])
            .unwrap();
        assert_eq!(d.tokens, vec![0, 1]);
        assert!((d.prob(0) - 0.625).abs() < 1e-6 && (d.prob(1) - 0.375).abs() < 1e-6);
        // NaN logits are never chosen; all NaN is an error.
        assert_eq!(s.distribution(&[f32::NAN, 1.0]).unwrap().tokens, vec![1]);
        assert!(s.distribution(&[f32::NAN]).is_err());
    }

    #[test]
    fn remove_renormalises_and_can_empty() {
        let mut d = Distribution {
            tokens: vec![4, 2, 7],
            probs: vec![0.5, 0.3, 0.2],
        };
        d.remove(9);
        assert_eq!(d.tokens, vec![4, 2, 7]);
        d.remove(4);
        assert_eq!(d.tokens, vec![2, 7]);
        assert!((d.prob(2) - 0.6).abs() < 1e-6 && (d.prob(7) - 0.4).abs() < 1e-6);
        assert_eq!(
            (d.draw(0.0), d.draw(0.59), d.draw(0.61)),
            (Some(2), Some(2), Some(7))
        );
        d.remove(2);
        d.remove(7);
        assert!(d.is_empty());
        assert_eq!(d.draw(0.5), None);
    }

    /// The sampler as it was before `distribution` existed: `r = u · mass` over the
    /// kept prefix of the top-k softmax.
    fn legacy_sample(s: &mut Sampler, logits: &[f32]) -> u32 {
        let p = *s.params();
        if p.temperature == 0.0 {
            return argmax(logits);
        }
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        if p.top_k > 0 {
            order.truncate(p.top_k);
        }
        let max = logits[order[0] as usize];
        let mut probs: Vec<f32> = order
            .iter()
            .map(|&i| ((logits[i as usize] - max) / p.temperature).exp())
            .collect();
        let total: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|q| *q /= total);
        let mut keep = probs.len();
        let mut cum = 0.0;
        for (i, q) in probs.iter().enumerate() {
            cum += q;
            if cum >= p.top_p {
                keep = i + 1;
                break;
            }
        }
        let mass: f32 = probs[..keep].iter().sum();
        let mut r = s.uniform() * mass;
        for (i, q) in probs[..keep].iter().enumerate() {
            r -= q;
            if r <= 0.0 {
                return order[i];
            }
        }
        order[keep - 1]
    }

    #[test]
    fn sampling_draws_the_same_tokens_as_before_the_refactor() {
        let mut rng = Sampler::new(params(1.0, 0, 1.0, 7)).unwrap();
        let mut draws = 0;
        for (case, (t, k, p)) in [0.0, 0.3, 1.0, 2.5]
            .into_iter()
            .flat_map(|t| [0, 1, 3, 20].map(move |k| (t, k)))
            .flat_map(|(t, k)| [1.0, 0.9, 0.5].map(move |p| (t, k, p)))
            .enumerate()
        {
            let pr = params(t, k, p, case as u64);
            let (mut new, mut old) = (Sampler::new(pr).unwrap(), Sampler::new(pr).unwrap());
            for row in 0..100 {
                let vocab = 1 + row % 40;
                // Quantised logits (ties) over a wide range (underflow at low temperature).
                let logits: Vec<f32> = (0..vocab)
                    .map(|_| ((rng.uniform() * 40.0).floor() - 20.0) * 0.5)
                    .collect();
                for _ in 0..20 {
                    assert_eq!(
                        new.sample(&logits).unwrap(),
                        legacy_sample(&mut old, &logits)
                    );
                    draws += 1;
                }
            }
        }
        assert_eq!(draws, 48 * 2000);
    }
}
