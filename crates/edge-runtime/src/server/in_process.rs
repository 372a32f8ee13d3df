//! Chat completions without HTTP: the request body goes through the same parsing,
//! prompt rendering and worker loop as `POST /v1/chat/completions`, on the caller's
//! thread. Benchmarks use it to measure the engine exactly as the server would drive
//! it (same prompt tokens, same reuse points, same tool-call parsing) without the
//! socket in between.

use super::ServerState;
use super::chat;
use super::errors::ApiError;
use super::worker::{self, Piece, Summary};
use crate::tool_calls::Delta;
use serde_json::Value;

/// Runs the OpenAI chat request `body` to completion. Each [`Delta`] the SSE writer
/// would send as a chunk (content, reasoning or a whole tool call) is passed to
/// `on_delta` as it arrives; the reply's usage comes back at the end. `stream` and
/// `stream_options` are ignored (the deltas always arrive one by one), and so are the
/// log-probabilities a body with `logprobs` asks for.
///
/// Errors are the ones the server would answer with (400 for a malformed body, 429
/// when the engine's queue is full, …).
pub fn chat_completion(
    state: &ServerState,
    body: &Value,
    mut on_delta: impl FnMut(&Delta),
) -> Result<Summary, ApiError> {
    let body = body
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the request body must be a JSON object", None))?;
    let params = chat::gen_params(body)?;
    let prompt = chat::chat_prompt(state, body)?;
    let stream = worker::submit(state, &prompt, &params)?;
    let mut end: Option<Result<Summary, ApiError>> = None;
    worker::run(
        state,
        stream,
        &prompt,
        &params.stop,
        // The caller waits on this thread: it cannot leave.
        &|| true,
        &mut |piece| match piece {
            Piece::Delta(d) => {
                on_delta(&d);
                true
            }
            Piece::Logprob(_) => true,
            Piece::Done(s) => {
                end = Some(Ok(s));
                false
            }
            Piece::Error(e) => {
                end = Some(Err(e));
                false
            }
        },
    );
    end.unwrap_or_else(|| {
        Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the engine stopped before the request finished",
        ))
    })
}
