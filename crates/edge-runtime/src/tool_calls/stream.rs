//! The streaming parser: text deltas in, content, reasoning and complete tool calls
//! out, never part of a tag (see the module docs for the rules).

use super::body::parse_body;
use super::stream_call::StreamedCall;
use super::{
    CALL_CLOSE, CALL_OPEN, Delta, THINK_CLOSE, THINK_OPEN, ToolCall, ToolCallFormat, ToolSchemas,
    Warning, WarningKind,
};
use serde_json::Value;

/// Where the parser is in the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Nothing but whitespace yet: a `<think>` may still open the reasoning.
    Start,
    /// Inside the reasoning, until `</think>`.
    Reasoning,
    /// The answer: content, and `<tool_call>` opens a call.
    Content,
    /// Inside a `<tool_call>`, until `</tool_call>` (or another `<tool_call>`).
    Call,
}

/// One output channel's whitespace state: text is trimmed at its start, and trailing
/// whitespace is held until more text follows.
#[derive(Debug, Default)]
struct Channel {
    started: bool,
    held_ws: String,
}

impl Channel {
    /// The part of `text` that can be emitted now.
    fn feed(&mut self, text: &str) -> Option<String> {
        let text = if self.started {
            text
        } else {
            text.trim_start()
        };
        let body = text.trim_end();
        if body.is_empty() {
            self.held_ws.push_str(text);
            return None;
        }
        let mut out = std::mem::take(&mut self.held_ws);
        out.push_str(body);
        self.held_ws.push_str(&text[body.len()..]);
        self.started = true;
        Some(out)
    }
}

/// Where the first tag of `tags` is in `buf`.
enum Scan {
    /// A whole tag at this byte offset.
    Found(usize, &'static str),
    /// The text from this offset to the end could still grow into a tag.
    Partial(usize),
    /// No tag, and no beginning of one.
    Clear,
}

fn scan(buf: &str, tags: &[&'static str]) -> Scan {
    for (at, _) in buf.match_indices('<') {
        let rest = &buf[at..];
        if let Some(tag) = tags.iter().find(|t| rest.starts_with(**t)) {
            return Scan::Found(at, tag);
        }
        if tags
            .iter()
            .any(|t| t.len() > rest.len() && t.starts_with(rest))
        {
            return Scan::Partial(at);
        }
    }
    Scan::Clear
}

/// Splits one reply into content, reasoning and tool calls as its text arrives.
///
/// Feed every text delta to [`ToolCallParser::push`] and forward what it returns, then
/// call [`ToolCallParser::finish`] once at the end. Deltas of the same kind that come
/// out of one call are merged.
#[derive(Debug)]
pub struct ToolCallParser {
    format: ToolCallFormat,
    schemas: ToolSchemas,
    id_prefix: String,
    mode: Mode,
    /// Text not yet decided (a possible tag beginning).
    buf: String,
    content: Channel,
    reasoning: Channel,
    /// The open call's text so far, from its `<tool_call>`.
    call_raw: String,
    /// The whitespace before the open call: content if the call turns out malformed.
    call_lead_ws: String,
    /// Whether calls are streamed as they are written (see [`ToolCallParser::streaming_calls`]).
    streams_calls: bool,
    /// The open call's streaming state, when calls are streamed.
    streamed: Option<StreamedCall>,
    calls: usize,
    warnings: Vec<Warning>,
    out: Vec<Delta>,
}

impl ToolCallParser {
    /// A parser for one reply. `tools` are the request's OpenAI tools (for value types
    /// and name checks); `starts_in_reasoning` when the prompt ends inside `<think>`
    /// (see [`super::prompt_opens_reasoning`]).
    pub fn new(format: ToolCallFormat, tools: Option<&Value>, starts_in_reasoning: bool) -> Self {
        ToolCallParser {
            format,
            schemas: ToolSchemas::new(tools),
            id_prefix: "call_".to_string(),
            mode: if starts_in_reasoning {
                Mode::Reasoning
            } else {
                Mode::Start
            },
            buf: String::new(),
            content: Channel::default(),
            reasoning: Channel::default(),
            call_raw: String::new(),
            call_lead_ws: String::new(),
            streams_calls: false,
            streamed: None,
            calls: 0,
            warnings: Vec::new(),
            out: Vec::new(),
        }
    }

    /// Uses `prefix` instead of `call_` for tool-call ids (`<prefix><index>`).
    pub fn with_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.id_prefix = prefix.into();
        self
    }

    /// Streams each XML call as it is written ([`Delta::ToolCallBegin`] once its name is
    /// complete, then [`Delta::ToolCallArguments`], then [`Delta::ToolCallEnd`]) instead
    /// of holding it back until its `</tool_call>` ([`Delta::ToolCall`]). Meant for
    /// decoding that follows the tool-call grammar, where an opened call cannot turn
    /// out malformed: a streamed call that leaves the format anyway (or is cut by the
    /// end of the reply) ends as a call with the values written so far, with a
    /// [`WarningKind::IncompleteCall`] warning, not as content. A call whose body is
    /// not `<function=NAME>` is held back as usual.
    pub fn streaming_calls(mut self, on: bool) -> Self {
        self.streams_calls = on;
        self
    }

    /// The warnings so far.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Takes the next piece of the model's text; returns what is decided.
    pub fn push(&mut self, text_delta: &str) -> Vec<Delta> {
        self.buf.push_str(text_delta);
        self.advance();
        std::mem::take(&mut self.out)
    }

    /// Ends the reply: releases held text, returns an unfinished call as content, and
    /// hands back the last deltas and every warning of the reply.
    pub fn finish(mut self) -> (Vec<Delta>, Vec<Warning>) {
        let rest = std::mem::take(&mut self.buf);
        match self.mode {
            Mode::Start | Mode::Content => self.emit_content(&rest),
            Mode::Reasoning => {
                self.emit_reasoning(&rest);
                self.warnings.push(Warning::new(
                    WarningKind::UnclosedReasoning,
                    "the reply ended inside the reasoning (no </think>)",
                ));
            }
            Mode::Call => {
                self.call_text(&rest);
                if !self.end_streamed_call(false) {
                    self.abandon_call("the reply ended before </tool_call>".into());
                }
            }
        }
        (self.out, self.warnings)
    }

    /// Consumes as much of `buf` as is decided.
    fn advance(&mut self) {
        loop {
            match self.mode {
                Mode::Start => {
                    let head = self.buf.trim_start();
                    if head.starts_with(THINK_OPEN) {
                        let cut = self.buf.len() - head.len() + THINK_OPEN.len();
                        self.buf.drain(..cut);
                        self.mode = Mode::Reasoning;
                    } else if THINK_OPEN.starts_with(head) {
                        return; // empty, or a beginning of `<think>`
                    } else {
                        self.mode = Mode::Content;
                    }
                }
                Mode::Reasoning => match scan(&self.buf, &[THINK_CLOSE]) {
                    Scan::Found(at, tag) => {
                        let text: String = self.buf.drain(..at + tag.len()).collect();
                        self.emit_reasoning(&text[..at]);
                        self.reasoning.held_ws.clear();
                        self.mode = Mode::Content;
                    }
                    Scan::Partial(at) => {
                        let text: String = self.buf.drain(..at).collect();
                        self.emit_reasoning(&text);
                        return;
                    }
                    Scan::Clear => {
                        let text = std::mem::take(&mut self.buf);
                        self.emit_reasoning(&text);
                        return;
                    }
                },
                Mode::Content => match scan(&self.buf, &[CALL_OPEN]) {
                    Scan::Found(at, tag) => {
                        let text: String = self.buf.drain(..at + tag.len()).collect();
                        self.emit_content(&text[..at]);
                        self.call_lead_ws = std::mem::take(&mut self.content.held_ws);
                        self.call_raw = text[at..].to_string();
                        self.mode = Mode::Call;
                        if self.streams_calls {
                            let id = format!("{}{}", self.id_prefix, self.calls);
                            self.streamed = Some(StreamedCall::new(self.calls, id));
                        }
                    }
                    Scan::Partial(at) => {
                        let text: String = self.buf.drain(..at).collect();
                        self.emit_content(&text);
                        return;
                    }
                    Scan::Clear => {
                        let text = std::mem::take(&mut self.buf);
                        self.emit_content(&text);
                        return;
                    }
                },
                Mode::Call => match scan(&self.buf, &[CALL_CLOSE, CALL_OPEN]) {
                    Scan::Found(at, tag) if tag == CALL_CLOSE => {
                        let text: String = self.buf.drain(..at).collect();
                        self.call_text(&text);
                        self.buf.drain(..tag.len());
                        self.call_raw.push_str(tag);
                        self.mode = Mode::Content;
                        if !self.end_streamed_call(true) {
                            self.close_call();
                        }
                    }
                    Scan::Found(at, _) => {
                        // Another `<tool_call>` before `</tool_call>`: this one is
                        // abandoned, the new one is read from the content mode.
                        let text: String = self.buf.drain(..at).collect();
                        self.call_text(&text);
                        self.mode = Mode::Content;
                        if !self.end_streamed_call(false) {
                            self.abandon_call("a new <tool_call> began before </tool_call>".into());
                        }
                    }
                    Scan::Partial(at) => {
                        let text: String = self.buf.drain(..at).collect();
                        self.call_text(&text);
                        return;
                    }
                    Scan::Clear => {
                        let text = std::mem::take(&mut self.buf);
                        self.call_text(&text);
                        return;
                    }
                },
            }
        }
    }

    /// Decided text of the open call (never part of a call tag).
    fn call_text(&mut self, text: &str) {
        self.call_raw.push_str(text);
        if let Some(call) = &mut self.streamed {
            call.push(text, &self.schemas, &mut self.out);
        }
    }

    /// Ends the open call if it was announced (streamed), at its `</tool_call>`
    /// (`closed`) or cut; false (changing nothing) when the call is not streamed.
    fn end_streamed_call(&mut self, closed: bool) -> bool {
        let Some(mut call) = self.streamed.take() else {
            return false;
        };
        if !call.announced() {
            return false;
        }
        call.end(closed, &self.schemas, &mut self.out, &mut self.warnings);
        self.calls += 1;
        self.call_raw.clear();
        self.call_lead_ws.clear();
        true
    }

    /// The open call's `</tool_call>` has arrived: a call, or content if malformed.
    fn close_call(&mut self) {
        let raw = &self.call_raw;
        let body = raw
            .get(CALL_OPEN.len()..raw.len().saturating_sub(CALL_CLOSE.len()))
            .unwrap_or_default();
        match parse_body(self.format, body, &self.schemas) {
            Ok(parsed) => {
                let index = self.calls;
                self.calls += 1;
                self.warnings
                    .extend(parsed.warnings.into_iter().map(|w| Warning {
                        call: Some(index),
                        ..w
                    }));
                self.out.push(Delta::ToolCall(ToolCall {
                    index,
                    id: format!("{}{index}", self.id_prefix),
                    name: parsed.name,
                    arguments: parsed.arguments,
                }));
                self.call_raw.clear();
                self.call_lead_ws.clear();
            }
            Err(why) => self.abandon_call(why),
        }
    }

    /// The open call is malformed: its text (and the whitespace before it) is content.
    fn abandon_call(&mut self, why: String) {
        self.warnings.push(Warning::new(
            WarningKind::MalformedCall,
            format!("malformed tool call returned as content: {why}"),
        ));
        let mut text = std::mem::take(&mut self.call_lead_ws);
        text.push_str(&self.call_raw);
        self.call_raw.clear();
        self.emit_content(&text);
    }

    fn emit_content(&mut self, text: &str) {
        if let Some(t) = self.content.feed(text) {
            match self.out.last_mut() {
                Some(Delta::Content(s)) => s.push_str(&t),
                _ => self.out.push(Delta::Content(t)),
            }
        }
    }

    fn emit_reasoning(&mut self, text: &str) {
        if let Some(t) = self.reasoning.feed(text) {
            match self.out.last_mut() {
                Some(Delta::Reasoning(s)) => s.push_str(&t),
                _ => self.out.push(Delta::Reasoning(t)),
            }
        }
    }
}
