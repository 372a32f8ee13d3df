//! Tool calls in model output: turning the text a Qwen model writes into the
//! `content`, `reasoning_content` and `tool_calls` of an OpenAI chat completion,
//! whole or while streaming.
//!
//! # The formats
//!
//! A call sits between `<tool_call>` and `</tool_call>`. Inside, one of two forms
//! ([`ToolCallFormat`], chosen from the chat template by
//! [`ToolCallFormat::from_template`]):
//!
//! - **XML** (Qwen3.5/3.6, the demo model):
//!   ```text
//!   <tool_call>
//!   <function=NAME>
//!   <parameter=ARG>
//!   VALUE
//!   </parameter>
//!   </function>
//!   </tool_call>
//!   ```
//!   A value runs to the first `</parameter>`; one `\n` after `<parameter=ARG>` and one
//!   before `</parameter>` belong to the format and are removed. Strings are written as
//!   plain text, other types as JSON: [`ToolSchemas`] turns each value into the type its
//!   parameter's schema declares.
//! - **JSON** (Qwen3, Hermes): `<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>`.
//!   `arguments` may also be a string holding a JSON object; a missing `arguments` is `{}`.
//!
//! A body in the other form than the one expected (a JSON object where XML was
//! expected, or the reverse) is accepted, with a [`WarningKind::FormatMismatch`] warning.
//! Several calls may follow each other. Calls are recognised only after the reasoning.
//! A call ends at the first `</tool_call>` and a value at the first `</parameter>`, so
//! neither can hold those strings (nor a call `<tool_call>`, see below).
//!
//! # Reasoning
//!
//! The reply may open with `<think>` (only whitespace before it, which is dropped);
//! then everything up to the first `</think>` is reasoning. When the prompt already
//! ends in `<think>` (the Qwen3.5 template adds it; see [`prompt_opens_reasoning`]),
//! the parser is created with `starts_in_reasoning` and the reply starts inside the
//! reasoning. After the reasoning, `<think>` and `</think>` are plain text; inside
//! it, `<tool_call>` is plain reasoning text. A reply that ends inside the reasoning
//! gives a [`WarningKind::UnclosedReasoning`] warning (its text is reasoning).
//!
//! # Whitespace
//!
//! Whitespace that touches the structure is formatting: the reasoning is trimmed at
//! both ends; the content is trimmed at both ends, and the whitespace just before each
//! recognised tool call is dropped (so whitespace-only content between calls
//! disappears). Everything else is kept byte for byte. In terms of the reply text:
//! `content = trim(c0 + c1 + …)` where `cᵢ` are the pieces of text outside calls and
//! reasoning, each piece followed by a recognised call cut with `trim_end`.
//!
//! # The hold-back rule
//!
//! [`ToolCallParser`] never emits part of a tag: text that could still become a tag
//! that matters where the parser is (`<think>` at the start, `</think>` in the
//! reasoning, `<tool_call>` in the content, `</tool_call>` or `<tool_call>` in a call)
//! is held until the next characters decide (`"<too"` is held, `"<tool"` followed by
//! `"box"` is released as `"<toolbox"`). Whitespace that may turn out to be formatting
//! is held the same way. So the deltas of any split of a reply concatenate to exactly
//! what the whole reply gives.
//!
//! # The malformed-call rule
//!
//! A `<tool_call>` whose body does not parse (bad JSON, no `<function=...>`, text
//! between the XML elements, a missing `</parameter>` or `</function>`), one still
//! open at the end of the reply, or one interrupted by another `<tool_call>` before its
//! `</tool_call>`, comes back as content, the text exactly as the model wrote it
//! (only the whitespace trimming above applies), with a [`WarningKind::MalformedCall`]
//! warning. Nothing panics and no text is lost.
//!
//! # Ids
//!
//! The `n`-th recognised call of a reply (from 0) has `index` `n` and id
//! `call_<n>` (the prefix can be changed with [`ToolCallParser::with_id_prefix`], e.g.
//! to make ids unique across a conversation). Malformed calls take no index.
//!
//! # Streaming
//!
//! By default a call is held back and [`Delta::ToolCall`] carries it complete, emitted
//! when its `</tool_call>` arrives: a call the model writes freely may still turn out
//! malformed, and then its text is content. In OpenAI's streaming form a server sends it
//! as one `tool_calls` chunk with `index`, `id`, `type`, `function.name` and the whole
//! `function.arguments` string ([`ToolCall::to_openai_delta`]).
//!
//! When decoding follows the tool-call grammar an opened call cannot turn out
//! malformed (only cut by the token limit), so a server streams it as it is written
//! ([`ToolCallParser::streaming_calls`]), as OpenAI and vLLM do:
//! [`Delta::ToolCallBegin`] (`index`, `id`, `type`, `function.name`, empty
//! `arguments`) once `<function=NAME>` is complete, then [`Delta::ToolCallArguments`]
//! fragments of `function.arguments` as the values are written (a string value piece
//! by piece, any other value whole at its `</parameter>`), then [`Delta::ToolCallEnd`]
//! with the whole call, which adds nothing to the stream: the fragments of a call
//! concatenate to exactly its [`ToolCall::arguments_json`]. [`Delta::to_openai`] gives
//! each delta's OpenAI form. A streamed call that leaves the format anyway ends with the
//! values written so far ([`WarningKind::IncompleteCall`]), and a parameter given twice
//! keeps its first value (it was already sent).

mod body;
mod format;
pub mod grammar;
mod schema;
mod stream;
mod stream_call;
#[cfg(test)]
mod tests;
mod types;

pub use format::ToolCallFormat;
pub use grammar::{
    GrammarState, PathFilter, TokenBytes, ToolCallGrammar, ToolCallPolicy, ToolConstraint,
    check_constrainable,
};
pub use schema::ToolSchemas;
pub use stream::ToolCallParser;

use serde_json::{Map, Value, json};

/// Opens a tool call.
pub const CALL_OPEN: &str = "<tool_call>";
/// Closes a tool call.
pub const CALL_CLOSE: &str = "</tool_call>";
/// Opens the reasoning.
pub const THINK_OPEN: &str = "<think>";
/// Closes the reasoning.
pub const THINK_CLOSE: &str = "</think>";

/// One recognised tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// Position among the reply's recognised calls, from 0.
    pub index: usize,
    /// `call_<index>` (or the parser's own prefix followed by the index).
    pub id: String,
    /// The function's name as the model wrote it (trimmed).
    pub name: String,
    /// The arguments, converted to their schema types.
    pub arguments: Map<String, Value>,
}

impl ToolCall {
    /// The arguments as the JSON string OpenAI's `function.arguments` carries.
    pub fn arguments_json(&self) -> String {
        Value::Object(self.arguments.clone()).to_string()
    }

    /// The call as an entry of an OpenAI message's `tool_calls`:
    /// `{"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}`.
    pub fn to_openai(&self) -> Value {
        json!({
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json()},
        })
    }

    /// [`ToolCall::to_openai`] plus `index`: an entry of a streaming chunk's
    /// `delta.tool_calls`, carrying the whole call at once.
    pub fn to_openai_delta(&self) -> Value {
        let mut v = self.to_openai();
        v["index"] = json!(self.index);
        v
    }
}

/// The head of a call streamed as it is written: what the first `tool_calls` delta of
/// the call carries.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallHead {
    /// Position among the reply's recognised calls, from 0.
    pub index: usize,
    /// As [`ToolCall::id`].
    pub id: String,
    /// The function's name as the model wrote it (trimmed).
    pub name: String,
}

/// One event of the streaming parser.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    /// Text of the answer (`content`).
    Content(String),
    /// Text of the reasoning (`reasoning_content`).
    Reasoning(String),
    /// A complete tool call held back until its `</tool_call>` arrived.
    ToolCall(ToolCall),
    /// A streamed call's head, as soon as its function name is complete.
    ToolCallBegin(ToolCallHead),
    /// The next piece of a streamed call's `function.arguments` JSON text.
    ToolCallArguments {
        /// The call's index.
        index: usize,
        /// The piece.
        text: String,
    },
    /// A streamed call is complete: the whole call, whose arguments JSON is the
    /// concatenation of its [`Delta::ToolCallArguments`]. It adds nothing to a stream.
    ToolCallEnd(ToolCall),
}

impl Delta {
    /// The delta as an OpenAI chat chunk's `delta` object: `{"content": ..}`,
    /// `{"reasoning_content": ..}` or `{"tool_calls": [..]}`; `None` for
    /// [`Delta::ToolCallEnd`], which the earlier deltas already sent.
    pub fn to_openai(&self) -> Option<Value> {
        Some(match self {
            Delta::Content(c) => json!({"content": c}),
            Delta::Reasoning(r) => json!({"reasoning_content": r}),
            Delta::ToolCall(call) => json!({"tool_calls": [call.to_openai_delta()]}),
            Delta::ToolCallBegin(h) => json!({"tool_calls": [{
                "index": h.index,
                "id": h.id,
                "type": "function",
                "function": {"name": h.name, "arguments": ""},
            }]}),
            Delta::ToolCallArguments { index, text } => json!({"tool_calls": [{
                "index": index,
                "function": {"arguments": text},
            }]}),
            Delta::ToolCallEnd(_) => return None,
        })
    }

    /// The complete call this delta finishes ([`Delta::ToolCall`] or
    /// [`Delta::ToolCallEnd`]): what a whole reply's `tool_calls` lists.
    pub fn completed_call(&self) -> Option<&ToolCall> {
        match self {
            Delta::ToolCall(c) | Delta::ToolCallEnd(c) => Some(c),
            _ => None,
        }
    }
}

/// What a [`Warning`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// A call that could not be parsed; its text was returned as content.
    MalformedCall,
    /// A call body in the other format than the expected one (accepted).
    FormatMismatch,
    /// A call of a function the request's `tools` do not list (kept).
    UnknownFunction,
    /// An argument the function's schema does not list (kept).
    UnknownParameter,
    /// A value that is not of its declared type (kept: as a string in XML calls).
    TypeMismatch,
    /// A required parameter the call does not give.
    MissingRequired,
    /// A parameter given twice in one XML call (the last value is kept).
    DuplicateParameter,
    /// The reply ended inside the reasoning.
    UnclosedReasoning,
    /// A streamed call whose text ended, or left the format, before it was complete:
    /// it keeps the values written so far.
    IncompleteCall,
}

/// A problem found in the model's output. Warnings are data: the reply is still
/// returned in full.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// What the warning is about.
    pub kind: WarningKind,
    /// The index of the recognised call it concerns, if any.
    pub call: Option<usize>,
    /// A human-readable description.
    pub message: String,
}

impl Warning {
    pub(crate) fn new(kind: WarningKind, message: impl Into<String>) -> Self {
        Warning {
            kind,
            call: None,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.call {
            Some(i) => write!(f, "{:?} (call {i}): {}", self.kind, self.message),
            None => write!(f, "{:?}: {}", self.kind, self.message),
        }
    }
}

/// A whole reply, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParsedReply {
    /// The answer text (empty when there is none).
    pub content: String,
    /// The reasoning, `None` when there is none or it is only whitespace.
    pub reasoning: Option<String>,
    /// The recognised calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Everything worth reporting about the output.
    pub warnings: Vec<Warning>,
}

impl ParsedReply {
    /// The reply as an OpenAI assistant message: `content` is `null` when empty,
    /// `reasoning_content` is present when there is reasoning, `tool_calls` when there
    /// are calls.
    pub fn to_openai_message(&self) -> Value {
        let mut m = json!({
            "role": "assistant",
            "content": if self.content.is_empty() { Value::Null } else { json!(self.content) },
        });
        if let Some(r) = &self.reasoning {
            m["reasoning_content"] = json!(r);
        }
        if !self.tool_calls.is_empty() {
            m["tool_calls"] =
                Value::Array(self.tool_calls.iter().map(ToolCall::to_openai).collect());
        }
        m
    }
}

/// Parses a whole reply: a [`ToolCallParser`] fed `text` at once.
pub fn parse_complete(
    format: ToolCallFormat,
    tools: Option<&Value>,
    text: &str,
    starts_in_reasoning: bool,
) -> ParsedReply {
    parse_with(
        ToolCallParser::new(format, tools, starts_in_reasoning),
        text,
    )
}

/// Parses a whole reply with `parser` (for a parser set up with
/// [`ToolCallParser::streaming_calls`] or its own id prefix).
pub fn parse_with(mut parser: ToolCallParser, text: &str) -> ParsedReply {
    let mut deltas = parser.push(text);
    let (rest, warnings) = parser.finish();
    deltas.extend(rest);
    let mut reply = ParsedReply {
        warnings,
        ..ParsedReply::default()
    };
    let mut reasoning = String::new();
    for d in deltas {
        match d {
            Delta::Content(t) => reply.content.push_str(&t),
            Delta::Reasoning(t) => reasoning.push_str(&t),
            Delta::ToolCall(c) | Delta::ToolCallEnd(c) => reply.tool_calls.push(c),
            Delta::ToolCallBegin(_) | Delta::ToolCallArguments { .. } => {}
        }
    }
    if !reasoning.is_empty() {
        reply.reasoning = Some(reasoning);
    }
    reply
}

/// Whether a rendered prompt leaves the model inside its reasoning: it ends in
/// `<think>` (and whitespace), as the Qwen3.5 template's generation prompt does with
/// thinking on. Pass the answer as `starts_in_reasoning`.
pub fn prompt_opens_reasoning(prompt: &str) -> bool {
    prompt.trim_end().ends_with(THINK_OPEN)
}
