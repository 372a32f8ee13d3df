//! Per-token log-probabilities in the two OpenAI shapes: chat's
//! `{"content": [{token, logprob, bytes, top_logprobs}]}` and text completions'
//! `{tokens, token_logprobs, top_logprobs, text_offset}`.

use crate::Tokenizer;
use edge_spec::sampling::TokenLogprob;
use serde_json::{Map, Value, json};

/// One generated token's log-probability, with its text and alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct LogprobEntry {
    /// The token's text (a token that ends inside a UTF-8 character shows the
    /// replacement character; `bytes` holds what decoding produced).
    pub token: String,
    /// `log p(token)` under the model (before temperature and truncation).
    pub logprob: f32,
    /// The most likely tokens and their log-probabilities, most likely first.
    pub top: Vec<(String, f32)>,
}

impl LogprobEntry {
    /// Names the engine's token ids with the tokenizer.
    pub fn new(tokenizer: &Tokenizer, lp: &TokenLogprob) -> Self {
        let text = |id: u32| tokenizer.decode(&[id]).unwrap_or_default();
        LogprobEntry {
            token: text(lp.token),
            logprob: lp.logprob,
            top: lp.top.iter().map(|&(id, l)| (text(id), l)).collect(),
        }
    }
}

/// JSON has no infinities: a token the model gave no probability gets OpenAI's floor.
fn finite(l: f32) -> f64 {
    if l.is_finite() { f64::from(l) } else { -9999.0 }
}

/// Chat's `logprobs` object.
pub fn chat_json(entries: &[LogprobEntry]) -> Value {
    let item = |token: &str, logprob: f32| json!({"token": token, "logprob": finite(logprob), "bytes": token.as_bytes()});
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = item(&e.token, e.logprob);
            v["top_logprobs"] = e.top.iter().map(|(t, l)| item(t, *l)).collect();
            v
        })
        .collect();
    json!({ "content": content })
}

/// Text completions' `logprobs` object; `offset` is the text length before the first
/// entry's token.
pub fn completion_json(entries: &[LogprobEntry], offset: usize) -> Value {
    let mut at = offset;
    let mut text_offset = Vec::with_capacity(entries.len());
    for e in entries {
        text_offset.push(at);
        at += e.token.len();
    }
    let top: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            for (t, l) in &e.top {
                // Two ids with the same text: the more likely one's figure stays.
                m.entry(t.clone()).or_insert(json!(finite(*l)));
            }
            Value::Object(m)
        })
        .collect();
    json!({
        "tokens": entries.iter().map(|e| e.token.clone()).collect::<Vec<_>>(),
        "token_logprobs": entries.iter().map(|e| finite(e.logprob)).collect::<Vec<_>>(),
        "top_logprobs": top,
        "text_offset": text_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(token: &str, logprob: f32, top: &[(&str, f32)]) -> LogprobEntry {
        LogprobEntry {
            token: token.into(),
            logprob,
            top: top.iter().map(|&(t, l)| (t.into(), l)).collect(),
        }
    }

    #[test]
    fn chat_shape_has_bytes_and_alternatives() {
        let v = chat_json(&[entry("hé", -0.5, &[("hé", -0.5), ("a", -1.5)])]);
        let c = &v["content"][0];
        assert_eq!(c["token"], "hé");
        assert_eq!(c["bytes"], json!([104, 195, 169]));
        assert_eq!(c["top_logprobs"][1]["token"], "a");
        assert_eq!(c["top_logprobs"][1]["logprob"], -1.5);
    }

    #[test]
    fn completion_shape_offsets_follow_the_text() {
        let v = completion_json(
            &[
                entry("ab", -0.25, &[]),
                entry("c", f32::NEG_INFINITY, &[("c", -1.0), ("c", -2.0)]),
            ],
            3,
        );
        assert_eq!(v["tokens"], json!(["ab", "c"]));
        assert_eq!(v["text_offset"], json!([3, 5]));
        assert_eq!(v["token_logprobs"], json!([-0.25, -9999.0]));
        assert_eq!(v["top_logprobs"][1], json!({"c": -1.0}));
    }
}
