//! One generation, bridged from the engine thread to async handlers: the blocking
//! [`crate::RequestStream`] is read on a `spawn_blocking` thread that detokenizes,
//! applies the stop strings and the tool-call parser, and sends [`Piece`]s over a
//! tokio channel. When the receiver is dropped (the client went away, or a stop
//! string ended the reply) the thread drops the request stream, which cancels the
//! request and frees its pages. [`super::in_process`] runs the same loop on the
//! caller's thread, with a callback in place of the channel.

use super::ServerState;
use super::chat::{GenParams, Prompt};
use super::errors::ApiError;
use super::logprobs::LogprobEntry;
use crate::tool_calls::{
    Delta, ToolCallFormat, ToolCallParser, ToolConstraint, WarningKind, prompt_opens_reasoning,
};
use crate::{Event, GenerateRequest, Polled, RequestStream, StopReason};
use axum::http::StatusCode;
use edge_spec::SpecStats;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the worker reports.
#[derive(Debug)]
pub enum Piece {
    /// Text, reasoning or a tool call of the reply.
    Delta(Delta),
    /// A generated token's log-probability (only when the request asked for them),
    /// sent before the deltas its text produces.
    Logprob(LogprobEntry),
    /// The reply is complete.
    Done(Summary),
    /// The request failed.
    Error(ApiError),
}

/// How a reply ended, with its token counts.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// `stop`, `length` or `tool_calls`.
    pub finish_reason: &'static str,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Prompt tokens restored from the prefix cache (0 when a stop string ended the
    /// reply: the cancelled request reports no count).
    pub cached_tokens: usize,
    /// Speculation counters, when the reply was speculated (and not cut by a stop
    /// string).
    pub speculation: Option<SpecStats>,
}

impl Summary {
    /// The OpenAI `usage` object. A speculated reply adds edge-llm's own
    /// `speculation` object (`target_forwards`, `drafted`, `accepted`,
    /// `mean_accepted`: tokens per target forward), which OpenAI clients ignore.
    pub fn usage(&self) -> serde_json::Value {
        let mut u = serde_json::json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        });
        if let Some(s) = self.speculation {
            u["speculation"] = serde_json::json!({
                "target_forwards": s.target_forwards,
                "drafted": s.drafted,
                "accepted": s.accepted,
                "mean_accepted": s.mean_accepted(),
            });
        }
        u
    }
}

/// Submits the prompt to the engine; queue-full and shut-down engines are refused
/// here, before any response is sent.
pub fn submit(
    state: &ServerState,
    prompt: &Prompt,
    params: &GenParams,
) -> Result<RequestStream, ApiError> {
    let inner = &state.inner;
    // Without `max_tokens` a request runs to the context (or what the cache holds for
    // one request) or a stop: its pages grow as it decodes.
    let remaining = state.request_limit().saturating_sub(prompt.ids.len());
    let max_new_tokens = params.max_tokens.unwrap_or(remaining).min(remaining);
    let tool_constraint = match (&inner.tool_vocab, &prompt.tools) {
        (Some(vocab), Some(tools)) => {
            let c = ToolConstraint::for_prompt(tools, vocab.clone(), &prompt.text)?;
            Some(if prompt.must_call {
                c.requiring_call()
            } else {
                c
            })
        }
        _ => None,
    };
    Ok(inner.handle.submit(GenerateRequest {
        prompt: prompt.ids.clone(),
        reuse_points: prompt.reuse_points.clone(),
        max_new_tokens,
        sampling: params.sampling,
        stop_tokens: match params.ignore_eos {
            true => Vec::new(),
            false => inner.eos.clone(),
        },
        logprobs: params.logprobs,
        tool_constraint,
        ..GenerateRequest::default()
    })?)
}

/// Submits the prompt and starts the worker on a blocking thread.
pub fn start(
    state: &ServerState,
    prompt: Prompt,
    params: &GenParams,
) -> Result<mpsc::Receiver<Piece>, ApiError> {
    let stream = submit(state, &prompt, params)?;
    let (tx, rx) = mpsc::channel(64);
    let state = state.clone();
    let stops = params.stop.clone();
    let watch = tx.clone();
    let generation = state.inner.lifecycle.track();
    tokio::task::spawn_blocking(move || {
        let _counted = generation;
        let wanted = || !watch.is_closed();
        run(&state, stream, &prompt, &stops, &wanted, &mut |p| {
            tx.blocking_send(p).is_ok()
        })
    });
    Ok(rx)
}

/// Where the text may be shown up to: before the first stop string (and `true`), or
/// before a tail that could still become one.
fn stop_cut(text: &str, shown: usize, stops: &[String]) -> (usize, bool) {
    let longest = stops.iter().map(String::len).max().unwrap_or(0);
    if longest == 0 {
        return (text.len(), false);
    }
    let mut from = shown.saturating_sub(longest);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let hit = stops
        .iter()
        .filter_map(|s| text[from..].find(s.as_str()).map(|p| p + from))
        .min();
    if let Some(p) = hit {
        return (p.max(shown), true);
    }
    let held = (shown..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .find(|&i| stops.iter().any(|s| s.starts_with(&text[i..])));
    (held.unwrap_or(text.len()), false)
}

/// Turns text into deltas: through the tool-call parser for chats, as content for
/// plain completions.
struct Splitter {
    parser: Option<ToolCallParser>,
    /// Complete calls so far.
    tool_calls: usize,
    /// Whether a streamed call ended early (the reply was cut inside it).
    cut_call: bool,
}

impl Splitter {
    fn push(&mut self, text: &str) -> Vec<Delta> {
        let deltas = match &mut self.parser {
            Some(p) => p.push(text),
            None => vec![Delta::Content(text.to_string())],
        };
        self.count(deltas)
    }

    fn finish(&mut self) -> Vec<Delta> {
        let Some(p) = self.parser.take() else {
            return Vec::new();
        };
        let (deltas, warnings) = p.finish();
        for w in warnings {
            self.cut_call |= w.kind == WarningKind::IncompleteCall;
            tracing::debug!("tool-call parser: {}", w.message);
        }
        self.count(deltas)
    }

    fn count(&mut self, deltas: Vec<Delta>) -> Vec<Delta> {
        self.tool_calls += deltas.iter().filter_map(Delta::completed_call).count();
        deltas
    }
}

/// How often a request that sends nothing (queued, prefilling, or inside a tool call
/// the parser holds back) looks whether its client is still there.
const CLIENT_CHECK: Duration = Duration::from_millis(100);

/// Reads the request's events to the end, handing each [`Piece`] to `send`. `send`
/// returning `false`, or `wanted` (asked at least every [`CLIENT_CHECK`] and at every
/// token) returning `false`, means nobody listens any more: the loop stops, which
/// drops the stream and so cancels the request, at any stage.
pub fn run(
    state: &ServerState,
    mut stream: RequestStream,
    prompt: &Prompt,
    stops: &[String],
    wanted: &dyn Fn() -> bool,
    send: &mut dyn FnMut(Piece) -> bool,
) {
    let inner = &state.inner;
    let deadline = inner.request_timeout.map(|t| (Instant::now() + t, t));
    // `send_all` and the direct sends below share the one callback.
    let send = std::cell::RefCell::new(send);
    let send = |p: Piece| (send.borrow_mut())(p);
    let send_all = |ds: Vec<Delta>| ds.into_iter().all(|d| send(Piece::Delta(d)));
    let format = inner
        .template
        .tool_call_format()
        .unwrap_or(ToolCallFormat::Xml);
    // Calls decoded under the tool-call grammar cannot turn out malformed: they are
    // streamed as they are written (see `submit` for when the grammar applies).
    let constrained = inner.tool_vocab.is_some() && prompt.tools.is_some();
    let mut split = Splitter {
        parser: prompt.chat.then(|| {
            ToolCallParser::new(
                format,
                prompt.tools.as_ref(),
                prompt_opens_reasoning(&prompt.text),
            )
            .streaming_calls(constrained)
        }),
        tool_calls: 0,
        cut_call: false,
    };
    let started = Instant::now();
    let mut last: Option<Instant> = None;
    let (mut detokenizer, mut generated, mut shown, mut text) =
        (inner.tokenizer.text_stream(), 0, 0, String::new());
    loop {
        if let Some((at, limit)) = deadline
            && Instant::now() >= at
        {
            // Returning drops the stream, which cancels the request.
            send(Piece::Error(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "the request ran past the server's limit of {:.1} s (--request-timeout)",
                    limit.as_secs_f64()
                ),
            )));
            return;
        }
        if inner.lifecycle.cancelling() {
            send(Piece::Error(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server shut down before the request finished (--shutdown-timeout)",
            )));
            return;
        }
        let event = match stream.poll(CLIENT_CHECK) {
            Polled::Event(e) => e,
            Polled::Pending if wanted() => continue,
            // The client left: returning drops the stream, which cancels the request.
            Polled::Pending => return,
            Polled::Ended => break,
        };
        match event {
            Event::Alive => {}
            Event::Token { .. } if !wanted() => return,
            Event::Token { id: t, logprob } => {
                let now = Instant::now();
                match last {
                    None => inner.metrics.ttft((now - started).as_secs_f64()),
                    Some(l) => inner.metrics.inter_token((now - l).as_secs_f64()),
                }
                last = Some(now);
                generated += 1;
                if inner.eos.contains(&t) {
                    continue;
                }
                if let Some(lp) = logprob
                    && !send(Piece::Logprob(LogprobEntry::new(&inner.tokenizer, &lp)))
                {
                    return;
                }
                // Nothing new while a character is still incomplete.
                match detokenizer.push(t) {
                    Ok(Some(piece)) => text.push_str(&piece),
                    Ok(None) => continue,
                    Err(e) => {
                        send(Piece::Error(e.into()));
                        return;
                    }
                }
                let (end, hit) = stop_cut(&text, shown, stops);
                if end > shown && !send_all(split.push(&text[shown..end])) {
                    return;
                }
                shown = end;
                if hit {
                    // Leaving the loop drops the stream: the engine cancels the request.
                    let mut deltas = split.finish();
                    let _ = send_all(std::mem::take(&mut deltas));
                    send(Piece::Done(Summary {
                        finish_reason: if split.tool_calls > 0 {
                            "tool_calls"
                        } else {
                            "stop"
                        },
                        prompt_tokens: prompt.ids.len(),
                        completion_tokens: generated,
                        cached_tokens: 0,
                        speculation: None,
                    }));
                    return;
                }
            }
            Event::Finished(Ok(out)) => {
                if let Some(rest) = text.get(shown..).filter(|r| !r.is_empty())
                    && !send_all(split.push(rest))
                {
                    return;
                }
                if !send_all(split.finish()) {
                    return;
                }
                if let Some(s) = out.speculation {
                    inner.metrics.speculation(s.drafted, s.accepted);
                }
                let finish_reason = match out.stop {
                    // A call cut by the token limit: the limit is what the client
                    // needs to know.
                    StopReason::Length | StopReason::Context if split.cut_call => "length",
                    _ if split.tool_calls > 0 => "tool_calls",
                    StopReason::Length | StopReason::Context => "length",
                    StopReason::Stop | StopReason::Cancelled => "stop",
                };
                send(Piece::Done(Summary {
                    finish_reason,
                    prompt_tokens: out.prompt_tokens,
                    completion_tokens: out.tokens.len(),
                    cached_tokens: out.cached_tokens,
                    speculation: out.speculation,
                }));
                return;
            }
            Event::Finished(Err(e)) => {
                send(Piece::Error(e.into()));
                return;
            }
        }
    }
    send(Piece::Error(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the engine stopped before the request finished",
    )));
}

#[cfg(test)]
mod tests {
    use super::stop_cut;

    #[test]
    fn stop_strings_cut_and_hold_back() {
        let stops = vec!["END".to_string()];
        assert_eq!(stop_cut("hello", 0, &stops), (5, false));
        assert_eq!(stop_cut("hello E", 0, &stops), (6, false));
        assert_eq!(stop_cut("hello EN", 6, &stops), (6, false));
        assert_eq!(stop_cut("hello END more", 6, &stops), (6, true));
        assert_eq!(stop_cut("héllo", 0, &[]), (6, false));
        assert_eq!(stop_cut("aé", 0, &["é!".to_string()]), (1, false));
    }
}
