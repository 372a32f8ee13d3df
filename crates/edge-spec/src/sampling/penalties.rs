//! What a request's history does to its next token's logits (presence, frequency and
//! repetition penalties), and the log-probabilities a request may ask for.

use super::SamplingParams;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The tokens a request's penalties look at: how often each generated token occurred,
/// and (for the repetition penalty) which tokens the prompt holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    generated: HashMap<u32, u32>,
    prompt: HashSet<u32>,
}

impl History {
    /// Records a generated token.
    pub fn observe(&mut self, token: u32) {
        *self.generated.entry(token).or_insert(0) += 1;
    }

    /// Records the prompt's tokens.
    pub fn set_prompt(&mut self, prompt: &[u32]) {
        self.prompt = prompt.iter().copied().collect();
    }

    /// `logits` with the penalties of `params` applied (borrowed when none applies):
    /// the repetition penalty `r` divides a positive logit of a token seen in the prompt
    /// or the output by `r` and multiplies a negative one by it (as transformers and
    /// vLLM do); then each generated token's logit loses `frequency · count +
    /// presence` (OpenAI's definition).
    pub fn apply<'a>(&self, params: &SamplingParams, logits: &'a [f32]) -> Cow<'a, [f32]> {
        if !params.has_penalties() || (self.generated.is_empty() && self.prompt.is_empty()) {
            return Cow::Borrowed(logits);
        }
        let mut out = logits.to_vec();
        let r = params.repetition_penalty;
        if r != 1.0 {
            let seen = self.prompt.iter().chain(self.generated.keys());
            let mut done = HashSet::new();
            for &t in seen {
                if let Some(l) = out.get_mut(t as usize)
                    && done.insert(t)
                {
                    *l = if *l > 0.0 { *l / r } else { *l * r };
                }
            }
        }
        for (&t, &count) in &self.generated {
            if let Some(l) = out.get_mut(t as usize) {
                *l -= params.frequency_penalty * count as f32 + params.presence_penalty;
            }
        }
        Cow::Owned(out)
    }
}

/// A generated token's log-probability under the model, with the `top` most likely
/// alternatives at its position.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token.
    pub token: u32,
    /// `log p(token)`.
    pub logprob: f32,
    /// The most likely tokens and their log-probabilities, most likely first.
    pub top: Vec<(u32, f32)>,
}

impl TokenLogprob {
    /// `token`'s entry from the model's logits row (its log-softmax: before
    /// temperature, penalties and truncation, as OpenAI reports them), with the `top`
    /// most likely alternatives.
    pub fn of(logits: &[f32], token: u32, top: usize) -> Self {
        let log_sum = edge_model::log_sum_exp(logits);
        let logprob = logits
            .get(token as usize)
            .map_or(f32::NEG_INFINITY, |&l| l - log_sum);
        TokenLogprob {
            token,
            logprob,
            top: edge_model::top_log_probs(logits, top),
        }
    }
}
