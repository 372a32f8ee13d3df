//! Replies: server-sent events (`data: <JSON>\n\n` chunks ending with `data: [DONE]`)
//! for `stream: true`, one JSON body otherwise.

use super::errors::ApiError;
use super::logprobs::{self, LogprobEntry};
use super::worker::{Piece, Summary};
use crate::tool_calls::{Delta, ToolCall};
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::convert::Infallible;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// The identity of one reply.
#[derive(Clone, Debug)]
pub struct ReplyMeta {
    /// `chatcmpl-…` or `cmpl-…`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// A chat completion (else a text completion).
    pub chat: bool,
}

/// Renders pieces as SSE records.
struct ChunkWriter {
    meta: ReplyMeta,
    include_usage: bool,
    started: bool,
    /// Log-probabilities of tokens whose text is not sent yet: they ride on the next
    /// chunk.
    pending: Vec<LogprobEntry>,
    /// Text length sent so far (completions' `text_offset`).
    sent_text: usize,
}

/// The `logprobs` value of a choice: `null`, or the entries in the endpoint's shape.
fn logprobs_value(chat: bool, entries: &[LogprobEntry], offset: usize) -> Value {
    match (entries.is_empty(), chat) {
        (true, _) => Value::Null,
        (false, true) => logprobs::chat_json(entries),
        (false, false) => logprobs::completion_json(entries, offset),
    }
}

impl ChunkWriter {
    fn chunk(&self, choices: Value, usage: Option<Value>) -> Value {
        let object = if self.meta.chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let mut v = json!({
            "id": self.meta.id,
            "object": object,
            "created": self.meta.created,
            "model": self.meta.model,
            "choices": choices,
        });
        if let Some(u) = usage {
            v["usage"] = u;
        }
        v
    }

    fn choice(&mut self, delta: Value, finish_reason: Option<&str>) -> Value {
        let entries = std::mem::take(&mut self.pending);
        let logprobs = logprobs_value(self.meta.chat, &entries, self.sent_text);
        self.sent_text += entries.iter().map(|e| e.token.len()).sum::<usize>();
        if self.meta.chat {
            json!([{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}])
        } else {
            let text = delta.get("content").cloned().unwrap_or(json!(""));
            json!([{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}])
        }
    }

    /// The role chunk a chat stream opens with, before its first text.
    fn open(&mut self, out: &mut String) {
        if !self.started && self.meta.chat {
            // It carries no token: the pending log-probabilities wait for the first
            // text.
            let pending = std::mem::take(&mut self.pending);
            let choice = self.choice(json!({"role": "assistant", "content": ""}), None);
            self.pending = pending;
            record(out, &self.chunk(choice, None));
        }
        self.started = true;
    }

    fn render(&mut self, piece: Piece) -> Bytes {
        let mut out = String::new();
        match piece {
            Piece::Logprob(entry) => self.pending.push(entry),
            Piece::Delta(d) => {
                // A streamed call's end adds nothing: its pieces were sent.
                if let Some(delta) = d.to_openai() {
                    self.open(&mut out);
                    let choice = self.choice(delta, None);
                    record(&mut out, &self.chunk(choice, None));
                }
            }
            Piece::Done(s) => {
                self.open(&mut out);
                let choice = self.choice(json!({}), Some(s.finish_reason));
                record(&mut out, &self.chunk(choice, None));
                if self.include_usage {
                    record(&mut out, &self.chunk(json!([]), Some(s.usage())));
                }
                out.push_str("data: [DONE]\n\n");
            }
            Piece::Error(e) => {
                self.open(&mut out);
                record(&mut out, &e.body());
                out.push_str("data: [DONE]\n\n");
            }
        }
        Bytes::from(out)
    }
}

/// Appends one SSE record.
fn record(out: &mut String, v: &Value) {
    out.push_str("data: ");
    out.push_str(&v.to_string());
    out.push_str("\n\n");
}

/// The SSE response: `first` (already received, so errors before any output could
/// become plain HTTP errors) and the rest of `rx`. Dropping the body (the client went
/// away) drops `rx`, which cancels the request.
pub fn sse(
    meta: ReplyMeta,
    include_usage: bool,
    first: Piece,
    rx: mpsc::Receiver<Piece>,
) -> Response {
    let mut writer = ChunkWriter {
        meta,
        include_usage,
        started: false,
        pending: Vec::new(),
        sent_text: 0,
    };
    let pieces = tokio_stream::once(first).chain(ReceiverStream::new(rx));
    let body = pieces.map(move |p| Ok::<_, Infallible>(writer.render(p)));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

/// Collects a whole reply into one JSON body.
pub async fn collect(
    meta: ReplyMeta,
    first: Piece,
    mut rx: mpsc::Receiver<Piece>,
) -> Result<Value, ApiError> {
    let (mut content, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
    let mut entries = Vec::new();
    let mut next = Some(first);
    let summary: Summary = loop {
        let piece = match next.take() {
            Some(p) => p,
            None => rx.recv().await.ok_or_else(|| {
                ApiError::new(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "the engine stopped before the request finished",
                )
            })?,
        };
        match piece {
            Piece::Delta(Delta::Content(c)) => content.push_str(&c),
            Piece::Delta(Delta::Reasoning(r)) => reasoning.push_str(&r),
            // A streamed call is taken whole from its end.
            Piece::Delta(d) => calls.extend(d.completed_call().map(ToolCall::to_openai)),
            Piece::Logprob(e) => entries.push(e),
            Piece::Done(s) => break s,
            Piece::Error(e) => return Err(e),
        }
    };
    let logprobs = logprobs_value(meta.chat, &entries, 0);
    let choice = if meta.chat {
        let mut message = json!({"role": "assistant", "content": content});
        if !reasoning.is_empty() {
            message["reasoning_content"] = json!(reasoning);
        }
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        json!({"index": 0, "message": message, "logprobs": logprobs, "finish_reason": summary.finish_reason})
    } else {
        json!({"index": 0, "text": content, "logprobs": logprobs, "finish_reason": summary.finish_reason})
    };
    Ok(json!({
        "id": meta.id,
        "object": if meta.chat { "chat.completion" } else { "text_completion" },
        "created": meta.created,
        "model": meta.model,
        "choices": [choice],
        "usage": summary.usage(),
    }))
}
