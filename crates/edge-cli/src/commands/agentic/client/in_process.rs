//! [`InProcess`]: an engine in this process, driven through the server's own request
//! path ([`edge_runtime::server::in_process::chat_completion`]), so the prompt tokens,
//! reuse points and tool-call parsing are exactly those `edge-llm serve` would use.

use super::{ChatBackend, ChatReply, ClientError, ReplyBuilder, Speculation, Usage};
use edge_runtime::server::ServerState;
use edge_runtime::server::in_process::chat_completion;
use edge_runtime::tool_calls::Delta;
use serde_json::{Value, json};
use std::time::Instant;

/// The server's state, without the server.
#[derive(Clone, Debug)]
pub struct InProcess {
    state: ServerState,
}

impl InProcess {
    /// A backend on `state` (as `edge-llm serve` builds it).
    pub fn new(state: ServerState) -> Self {
        InProcess { state }
    }
}

impl ChatBackend for InProcess {
    fn complete(&mut self, body: &Value, _session: Option<&str>) -> Result<ChatReply, ClientError> {
        let mut b = ReplyBuilder::new(Instant::now());
        // Each delta as the SSE chunk the server would send, merged as the endpoint
        // client merges chunks (a streamed call's end sends nothing).
        let summary = chat_completion(&self.state, body, |d: &Delta| {
            if let Some(delta) = d.to_openai() {
                b.chunk(&json!({"choices": [{"index": 0, "delta": delta}]}));
            }
        })
        .map_err(|e| ClientError::Engine(e.to_string()))?;
        b.finish_reason(summary.finish_reason);
        b.usage(Usage {
            prompt_tokens: summary.prompt_tokens as u64,
            completion_tokens: summary.completion_tokens as u64,
            cached_tokens: Some(summary.cached_tokens as u64),
            speculation: summary.speculation.map(|s| Speculation {
                target_forwards: s.target_forwards as u64,
                accepted: s.accepted as u64,
            }),
        });
        Ok(b.finish())
    }

    fn mode(&self) -> &'static str {
        "in-process"
    }
}
