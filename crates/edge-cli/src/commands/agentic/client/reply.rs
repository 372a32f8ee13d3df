//! Assembling a reply from streamed pieces, with its timings: content and reasoning
//! concatenated, tool-call deltas merged by `index` (the first delta of an index
//! brings its id and name, later ones add `arguments` fragments), the first chunk that
//! carries any of them stamped as TTFT.

use super::{ChatReply, ToolCall, Usage};
use serde_json::Value;
use std::time::Instant;

/// A reply under construction; `issued` is when the request left.
#[derive(Debug)]
pub struct ReplyBuilder {
    issued: Instant,
    first: Option<Instant>,
    reply: ChatReply,
    /// Calls by their stream `index`, in first-seen order.
    calls: Vec<(u64, ToolCall)>,
}

impl ReplyBuilder {
    /// An empty reply to a request issued at `issued`.
    pub fn new(issued: Instant) -> Self {
        ReplyBuilder {
            issued,
            first: None,
            reply: ChatReply::default(),
            calls: Vec::new(),
        }
    }

    fn mark(&mut self) {
        if self.first.is_none() {
            self.first = Some(Instant::now());
        }
    }

    /// Answer text.
    pub fn content(&mut self, text: &str) {
        if !text.is_empty() {
            self.mark();
            self.reply.content.push_str(text);
        }
    }

    /// Reasoning text.
    pub fn reasoning(&mut self, text: &str) {
        if !text.is_empty() {
            self.mark();
            self.reply.reasoning.push_str(text);
        }
    }

    /// A tool-call delta: `id` and `name` when it brings them, an `arguments`
    /// fragment to append.
    pub fn tool_call(&mut self, index: u64, id: Option<&str>, name: Option<&str>, args: &str) {
        self.mark();
        let at = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(at) => at,
            None => {
                self.calls.push((index, ToolCall::default()));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at].1;
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = name.filter(|s| !s.is_empty()) {
            call.name.push_str(name);
        }
        call.arguments.push_str(args);
    }

    /// How the reply ended.
    pub fn finish_reason(&mut self, reason: &str) {
        self.reply.finish_reason = Some(reason.to_string());
    }

    /// The reply's token counts.
    pub fn usage(&mut self, usage: Usage) {
        self.reply.usage = Some(usage);
    }

    /// One OpenAI chat completion chunk (`choices[].delta`, `usage`), or a whole
    /// non-streamed response (`choices[].message`).
    pub fn chunk(&mut self, v: &Value) {
        for choice in v["choices"].as_array().into_iter().flatten() {
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(d) = delta {
                if let Some(c) = d.get("content").and_then(Value::as_str) {
                    self.content(c);
                }
                // vLLM and llama.cpp name it `reasoning_content`; some servers `reasoning`.
                let reasoning = d.get("reasoning_content").or_else(|| d.get("reasoning"));
                if let Some(r) = reasoning.and_then(Value::as_str) {
                    self.reasoning(r);
                }
                for (n, call) in d["tool_calls"].as_array().into_iter().flatten().enumerate() {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(n as u64);
                    let f = &call["function"];
                    // Non-streamed bodies may carry the arguments as an object.
                    let args = match &f["arguments"] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    self.tool_call(index, call["id"].as_str(), f["name"].as_str(), &args);
                }
            }
            if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason(r);
            }
        }
        if let Some(u) = v.get("usage").and_then(Usage::from_openai) {
            let mut u = u;
            // llama.cpp's own count of prompt tokens taken from its cache.
            if u.cached_tokens.is_none() {
                u.cached_tokens = v.pointer("/timings/cache_n").and_then(Value::as_u64);
            }
            self.usage(u);
        }
    }

    /// The finished reply, its latency measured now.
    pub fn finish(mut self) -> ChatReply {
        let issued = self.issued;
        self.reply.latency_ms = ms_since(issued, Instant::now());
        self.reply.ttft_ms = self.first.map(|t| ms_since(issued, t));
        self.calls.sort_by_key(|(i, _)| *i);
        self.reply.tool_calls = self.calls.into_iter().map(|(_, c)| c).collect();
        self.reply
    }
}

/// Milliseconds from `from` to `to`.
fn ms_since(from: Instant, to: Instant) -> f64 {
    (to - from).as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn role_only_chunks_do_not_start_the_reply() {
        let role =
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]});
        let mut b = ReplyBuilder::new(Instant::now());
        b.chunk(&role);
        assert!(b.finish().ttft_ms.is_none());
        let mut b = ReplyBuilder::new(Instant::now());
        b.chunk(&role);
        std::thread::sleep(std::time::Duration::from_millis(5));
        b.chunk(&json!({"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]}));
        b.chunk(&json!({"choices": [{"index": 0, "delta": {"reasoning": " ok"}}]}));
        let r = b.finish();
        assert!(r.ttft_ms.unwrap() >= 5.0);
        assert_eq!(r.reasoning, "hm ok");
        assert!(r.ttft_ms.unwrap() <= r.latency_ms);
    }

    #[test]
    fn tool_call_deltas_merge_by_index() {
        let mut b = ReplyBuilder::new(Instant::now());
        let calls = |v: Value| json!({"choices": [{"index": 0, "delta": {"tool_calls": v}}]});
        b.chunk(&calls(json!([
            {"index": 1, "id": "b", "type": "function", "function": {"name": "bash", "arguments": ""}}
        ])));
        b.chunk(&calls(json!([
            {"index": 0, "id": "a", "type": "function", "function": {"name": "bash", "arguments": "{\"com"}}
        ])));
        b.chunk(&calls(
            json!([{"index": 0, "function": {"arguments": "mand\": \"ls\"}"}}]),
        ));
        b.chunk(&calls(
            json!([{"index": 1, "function": {"arguments": "{}"}}]),
        ));
        b.chunk(&json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        b.chunk(
            &json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 8},
            "speculation": {"target_forwards": 2, "accepted": 1}}}),
        );
        let r = b.finish();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "a");
        assert_eq!(r.tool_calls[0].arguments, r#"{"command": "ls"}"#);
        assert_eq!(r.tool_calls[1].arguments, "{}");
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        let u = r.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.cached_tokens), (10, Some(8)));
        assert_eq!(u.speculation.unwrap().mean_accepted(), Some(1.5));
    }

    #[test]
    fn whole_responses_and_llama_cpp_cache_counts() {
        let mut b = ReplyBuilder::new(Instant::now());
        b.chunk(&json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": {"a": 1}}}]}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2},
            "timings": {"cache_n": 5}
        }));
        let r = b.finish();
        assert_eq!(r.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(r.usage.unwrap().cached_tokens, Some(5));
        assert!(r.usage.unwrap().speculation.is_none());
    }
}
