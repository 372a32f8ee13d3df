//! Chat backends for the replay benchmarks: send one OpenAI chat request body, get
//! back the assembled reply with its usage and client-side timings.
//!
//! [`InProcess`] runs the body on an engine in this process through the server's own
//! request path (no HTTP); [`Endpoint`] posts it to any OpenAI-compatible server.
//! Both assemble the reply with [`ReplyBuilder`], so TTFT means the same in both.

mod endpoint;
mod in_process;
mod open;
mod reply;
mod sse;

pub use endpoint::Endpoint;
pub use in_process::InProcess;
pub use open::{BackendArgs, OpenBackend};
pub use reply::ReplyBuilder;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached, or the connection broke (after one retry).
    #[error("cannot reach {url}: {reason}")]
    Connect {
        /// The URL posted to.
        url: String,
        /// What the HTTP client said.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{url} answered HTTP {status}: {body}")]
    Status {
        /// The URL posted to.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The response body (truncated).
        body: String,
    },
    /// The response was not what the OpenAI protocol says (bad JSON, an error event
    /// inside the stream, a stream that ended without a reply).
    #[error("bad response: {0}")]
    Protocol(String),
    /// The in-process engine refused or failed the request.
    #[error("the engine answered: {0}")]
    Engine(String),
}

/// A tool call of a reply, as OpenAI's `tool_calls[].function` carries it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id (may be empty when the server sent none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments: a JSON string, as sent (fragments concatenated).
    pub arguments: String,
}

/// Speculative decoding counters of one reply (edge-llm's `usage.speculation`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Speculation {
    /// Target-model forwards that verified drafts.
    pub target_forwards: u64,
    /// Draft tokens accepted.
    pub accepted: u64,
}

impl Speculation {
    /// Tokens emitted per target forward (accepted drafts plus the target's own).
    pub fn mean_accepted(&self) -> Option<f64> {
        (self.target_forwards > 0)
            .then(|| (self.accepted + self.target_forwards) as f64 / self.target_forwards as f64)
    }
}

/// Token counts of one reply, as the server reported them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Prompt tokens served from the server's prefix cache, when it says.
    pub cached_tokens: Option<u64>,
    /// Speculation counters, when the server reports them.
    pub speculation: Option<Speculation>,
}

impl Usage {
    /// Reads an OpenAI `usage` object: `prompt_tokens_details.cached_tokens` for the
    /// cache (llama.cpp's `timings.cache_n` is read by [`ReplyBuilder`] as a fallback),
    /// edge-llm's `speculation` object for acceptance.
    pub fn from_openai(u: &Value) -> Option<Usage> {
        let prompt_tokens = u.get("prompt_tokens")?.as_u64()?;
        let spec = u.get("speculation").and_then(|s| {
            Some(Speculation {
                target_forwards: s.get("target_forwards")?.as_u64()?,
                accepted: s.get("accepted")?.as_u64()?,
            })
        });
        Some(Usage {
            prompt_tokens,
            completion_tokens: u.get("completion_tokens").and_then(Value::as_u64)?,
            cached_tokens: u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64),
            speculation: spec,
        })
    }
}

/// One assembled reply with its client-side timings.
#[derive(Clone, Debug, Default)]
pub struct ChatReply {
    /// The answer text.
    pub content: String,
    /// The reasoning text.
    pub reasoning: String,
    /// The structured tool calls, in `index` order.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`, … when the server said.
    pub finish_reason: Option<String>,
    /// Token counts, when the server reported them.
    pub usage: Option<Usage>,
    /// From issuing the request to the first chunk carrying content, reasoning or a
    /// tool-call delta (role-only chunks do not count), milliseconds; `None` for a
    /// reply with none.
    pub ttft_ms: Option<f64>,
    /// From issuing the request to the end of the reply, milliseconds.
    pub latency_ms: f64,
}

/// Something that answers OpenAI chat completion requests.
pub trait ChatBackend {
    /// Sends `body` (an OpenAI `/v1/chat/completions` request; `stream: true` to get
    /// streamed timings) and returns the whole reply. `session` is sent as the
    /// `X-Session-ID` header where there is one.
    fn complete(&mut self, body: &Value, session: Option<&str>) -> Result<ChatReply, ClientError>;

    /// `in-process` or `endpoint`.
    fn mode(&self) -> &'static str;

    /// Connections reopened so far because the server closed one (0 in-process).
    fn reconnects(&self) -> u64 {
        0
    }
}
