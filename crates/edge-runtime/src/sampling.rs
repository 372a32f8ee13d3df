//! Token sampling: greedy, or temperature with optional top-k / top-p, driven by a
//! seeded generator so runs are reproducible.

use crate::{Result, RuntimeError};

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
            return Err(RuntimeError::InvalidRequest(format!(
                "temperature must be a finite number ≥ 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(RuntimeError::InvalidRequest(format!(
                "top_p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        Ok(())
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

    fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        xorshifted.rotate_right((old >> 59) as u32)
    }

    fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 24) as f32
    }

    /// Chooses a token from one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        if logits.is_empty() {
            return Err(RuntimeError::InvalidRequest("empty logits".into()));
        }
        if self.params.temperature == 0.0 {
            return Ok(argmax(logits));
        }
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        if self.params.top_k > 0 {
            order.truncate(self.params.top_k);
        }
        let max = logits[order[0] as usize];
        let mut probs: Vec<f32> = order
            .iter()
            .map(|&i| ((logits[i as usize] - max) / self.params.temperature).exp())
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
        let mass: f32 = probs[..keep].iter().sum();
        let mut r = self.next_f32() * mass;
        for (i, p) in probs[..keep].iter().enumerate() {
            r -= p;
            if r <= 0.0 {
                return Ok(order[i]);
            }
        }
        Ok(order[keep - 1])
    }
}

pub use edge_model::argmax;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_is_argmax() {
        let mut s = Sampler::new(SamplingParams::default()).unwrap();
        assert_eq!(s.sample(&[0.1, 3.0, 2.0]).unwrap(), 1);
        assert_eq!(argmax(&[f32::NAN, 1.0, 1.0]), 1);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_follows_distribution() {
        let params = SamplingParams {
            temperature: 1.0,
            seed: 42,
            ..Default::default()
        };
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
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_k: 2,
            seed: 1,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..200 {
            assert!(s.sample(&logits).unwrap() < 2);
        }
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            top_p: 0.01,
            seed: 1,
            ..Default::default()
        })
        .unwrap();
        for _ in 0..50 {
            assert_eq!(s.sample(&logits).unwrap(), 0);
        }
    }

    #[test]
    fn bad_params_are_errors() {
        for p in [
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            },
            SamplingParams {
                temperature: f32::NAN,
                ..Default::default()
            },
            SamplingParams {
                top_p: 0.0,
                ..Default::default()
            },
        ] {
            assert!(Sampler::new(p).is_err());
        }
        let mut s = Sampler::new(SamplingParams::default()).unwrap();
        assert!(s.sample(&[]).is_err());
    }
}
