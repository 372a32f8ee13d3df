//! [`Distribution`]: what a sampler draws from.

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
