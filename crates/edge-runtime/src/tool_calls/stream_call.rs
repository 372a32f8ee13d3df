//! One XML tool call streamed as it is written: the call's head ([`Delta::ToolCallBegin`])
//! as soon as `<function=NAME>` is complete, then its `function.arguments` JSON in
//! fragments ([`Delta::ToolCallArguments`]) as the values are written, then the whole
//! call ([`Delta::ToolCallEnd`]) at `</tool_call>`.
//!
//! The fragments of a call concatenate to exactly its [`ToolCall::arguments_json`]:
//! string values (a parameter whose schema declares `string` and nothing else) are
//! escaped and sent piece by piece, every other value whole at its `</parameter>`,
//! converted as [`ToolSchemas::convert_value`] converts it. A parameter given again is
//! skipped (its first value is kept and was already sent), with a
//! [`WarningKind::DuplicateParameter`] warning.
//!
//! Once announced, a call stays a call. If its text leaves the format (only a cut by
//! the token limit can, when decoding follows the tool-call grammar), the call ends
//! there with the values written so far, the value being written cut where the text
//! ended, and a [`WarningKind::IncompleteCall`] warning; the rest of its text is
//! dropped.

use super::body::preview;
use super::{Delta, ToolCall, ToolCallHead, ToolSchemas, Warning, WarningKind};

const FUNCTION_OPEN: &str = "<function=";
const FUNCTION_CLOSE: &str = "</function>";
const PARAM_OPEN: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";
/// A string value's end: the format's `\n`, then the close tag.
const VALUE_END: &str = "\n</parameter>";

/// Where the call's text is.
#[derive(Debug)]
enum Phase {
    /// Before `<function=NAME>` is complete.
    Head,
    /// Between elements: `<parameter=`, `</function>` or whitespace next.
    Between,
    /// After `<parameter=`, until its `>`.
    Key,
    /// Inside a value.
    Value(OpenValue),
    /// After `</function>`: only whitespace may follow.
    Tail,
    /// The call ended (complete or cut); the rest of its text is dropped.
    Done,
    /// The head is not `<function=NAME>`: nothing was announced, and the call is left
    /// to the whole-call parser.
    NotStreamed,
}

#[derive(Debug)]
struct OpenValue {
    key: String,
    /// Sent as it is written (a string value), else converted at its end.
    verbatim: bool,
    /// A repeat of an earlier parameter: read and dropped.
    skip: bool,
    /// Whether the format's leading `\n` has been looked for.
    started: bool,
    /// The value's text so far (without the format's leading `\n`).
    text: String,
}

/// The streaming state of one open call.
#[derive(Debug)]
pub(super) struct StreamedCall {
    index: usize,
    id: String,
    name: String,
    phase: Phase,
    /// Text of the call not yet decided (a possible tag beginning).
    buf: String,
    /// The finished parameters (name, text), in order.
    params: Vec<(String, String)>,
    /// Whether the arguments' `{` has been sent.
    opened: bool,
    /// Why the call ended early, once it has; its warnings wait for the end of its
    /// text, so that they name all the text dropped however the text was split.
    cut_reason: Option<&'static str>,
    /// The call's warnings, reported when its text ends.
    warnings: Vec<Warning>,
}

impl StreamedCall {
    /// A call opened by `<tool_call>`, to be the reply's call `index`.
    pub(super) fn new(index: usize, id: String) -> Self {
        StreamedCall {
            index,
            id,
            name: String::new(),
            phase: Phase::Head,
            buf: String::new(),
            params: Vec::new(),
            opened: false,
            cut_reason: None,
            warnings: Vec::new(),
        }
    }

    /// Whether the call's head has been sent (from then on it ends as a call).
    pub(super) fn announced(&self) -> bool {
        !matches!(self.phase, Phase::Head | Phase::NotStreamed)
    }

    /// Takes more of the call's text (never part of `</tool_call>` or `<tool_call>`).
    pub(super) fn push(&mut self, text: &str, schemas: &ToolSchemas, out: &mut Vec<Delta>) {
        match self.phase {
            Phase::NotStreamed => {}
            // After a cut, the rest of the call's text is kept for the warning.
            Phase::Done => self.buf.push_str(text),
            _ => {
                self.buf.push_str(text);
                while self.step(schemas, out) {}
            }
        }
    }

    /// The call's text has ended: at its `</tool_call>` (`closed`), or cut (the reply
    /// ended, or another `<tool_call>` began). An announced call ends here, complete
    /// or cut.
    pub(super) fn end(
        &mut self,
        closed: bool,
        schemas: &ToolSchemas,
        out: &mut Vec<Delta>,
        warnings: &mut Vec<Warning>,
    ) {
        match self.phase {
            Phase::Tail if closed && self.buf.trim().is_empty() => self.finish(schemas, out),
            Phase::Head | Phase::NotStreamed | Phase::Done => {}
            _ => self.cut(
                match closed {
                    true => "</tool_call> came before the call was complete",
                    false => "its text ended before </tool_call>",
                },
                schemas,
                out,
            ),
        }
        if let Some(why) = self.cut_reason {
            let dropped = std::mem::take(&mut self.buf);
            warnings.push(Warning {
                call: Some(self.index),
                ..Warning::new(
                    WarningKind::IncompleteCall,
                    format!(
                        "the streamed call to {} ended early ({why}); it keeps the values \
                         written so far{}",
                        self.name,
                        match dropped.trim() {
                            "" => String::new(),
                            d => format!(", and {:?} was dropped", preview(d)),
                        }
                    ),
                )
            });
        }
        warnings.append(&mut self.warnings);
        self.phase = Phase::Done;
    }

    /// Advances over `buf` once; false when it needs more text.
    fn step(&mut self, schemas: &ToolSchemas, out: &mut Vec<Delta>) -> bool {
        match &mut self.phase {
            Phase::Head => {
                let head = self.buf.trim_start();
                let Some(rest) = head.strip_prefix(FUNCTION_OPEN) else {
                    if !FUNCTION_OPEN.starts_with(head) {
                        self.phase = Phase::NotStreamed;
                    }
                    return false;
                };
                match tag_name(rest) {
                    Tag::Incomplete => false,
                    Tag::Bad => {
                        self.phase = Phase::NotStreamed;
                        false
                    }
                    Tag::Name(name, used) => {
                        self.name = name;
                        let cut = self.buf.len() - rest.len() + used;
                        self.buf.drain(..cut);
                        out.push(Delta::ToolCallBegin(ToolCallHead {
                            index: self.index,
                            id: self.id.clone(),
                            name: self.name.clone(),
                        }));
                        self.phase = Phase::Between;
                        true
                    }
                }
            }
            Phase::Between => {
                let rest = self.buf.trim_start();
                let skipped = self.buf.len() - rest.len();
                if rest.starts_with(PARAM_OPEN) {
                    self.buf.drain(..skipped + PARAM_OPEN.len());
                    self.phase = Phase::Key;
                    true
                } else if rest.starts_with(FUNCTION_CLOSE) {
                    self.buf.drain(..skipped + FUNCTION_CLOSE.len());
                    self.phase = Phase::Tail;
                    true
                } else if PARAM_OPEN.starts_with(rest) || FUNCTION_CLOSE.starts_with(rest) {
                    false
                } else {
                    self.cut("unexpected text between the elements", schemas, out);
                    false
                }
            }
            Phase::Key => match tag_name(&self.buf) {
                Tag::Incomplete => false,
                Tag::Bad => {
                    self.cut("a bad parameter name", schemas, out);
                    false
                }
                Tag::Name(key, used) => {
                    self.buf.drain(..used);
                    self.open_value(key, schemas, out);
                    true
                }
            },
            Phase::Value(v) => {
                if !v.started {
                    if self.buf.is_empty() {
                        return false;
                    }
                    if self.buf.starts_with('\n') {
                        self.buf.remove(0);
                    }
                    v.started = true;
                }
                if let Some(at) = self.buf.find(PARAM_CLOSE) {
                    let raw: String = self.buf.drain(..at + PARAM_CLOSE.len()).collect();
                    let text = &raw[..at];
                    self.write_value_text(text.strip_suffix('\n').unwrap_or(text), out);
                    self.close_value(schemas, out);
                    return true;
                }
                let decided = self.buf.len() - held_suffix(&self.buf);
                let text: String = self.buf.drain(..decided).collect();
                self.write_value_text(&text, out);
                false
            }
            Phase::Tail => {
                if !self.buf.trim().is_empty() {
                    self.cut("text after </function>", schemas, out);
                }
                false
            }
            Phase::Done | Phase::NotStreamed => false,
        }
    }

    /// `<parameter=KEY>` is complete.
    fn open_value(&mut self, key: String, schemas: &ToolSchemas, out: &mut Vec<Delta>) {
        let skip = self.params.iter().any(|(k, _)| *k == key);
        if skip {
            self.warnings.push(Warning {
                call: Some(self.index),
                ..Warning::new(
                    WarningKind::DuplicateParameter,
                    format!(
                        "{}.{key} is given more than once; the first value is kept (it was \
                         already streamed)",
                        self.name
                    ),
                )
            });
        }
        let verbatim = schemas.keeps_verbatim(&self.name, &key);
        if verbatim && !skip {
            let head = format!("{}:\"", self.separator_and_key(&key));
            self.send(head, out);
        }
        self.phase = Phase::Value(OpenValue {
            key,
            verbatim,
            skip,
            started: false,
            text: String::new(),
        });
    }

    /// Decided text of the open value: kept, and sent at once for a string value.
    fn write_value_text(&mut self, text: &str, out: &mut Vec<Delta>) {
        let Phase::Value(v) = &mut self.phase else {
            return;
        };
        if text.is_empty() {
            return;
        }
        v.text.push_str(text);
        if v.verbatim && !v.skip {
            let quoted = serde_json::Value::from(text).to_string();
            let escaped = quoted[1..quoted.len() - 1].to_string();
            self.send(escaped, out);
        }
    }

    /// The open value is complete: its end sent, its text kept.
    fn close_value(&mut self, schemas: &ToolSchemas, out: &mut Vec<Delta>) {
        let Phase::Value(v) = std::mem::replace(&mut self.phase, Phase::Between) else {
            return;
        };
        if v.skip {
            return;
        }
        if v.verbatim {
            self.send("\"".to_string(), out);
        } else {
            let (value, _) = schemas.convert_value(&self.name, &v.key, &v.text);
            let piece = format!("{}:{value}", self.separator_and_key(&v.key));
            self.send(piece, out);
        }
        self.params.push((v.key, v.text));
    }

    /// The call is complete: the arguments' end and the whole call.
    fn finish(&mut self, schemas: &ToolSchemas, out: &mut Vec<Delta>) {
        let close = if self.opened { "}" } else { "{}" };
        self.send(close.to_string(), out);
        let (arguments, found) = schemas.convert_xml_arguments(&self.name, &self.params);
        self.warnings.extend(found.into_iter().map(|w| Warning {
            call: Some(self.index),
            ..w
        }));
        out.push(Delta::ToolCallEnd(ToolCall {
            index: self.index,
            id: self.id.clone(),
            name: self.name.clone(),
            arguments,
        }));
        self.phase = Phase::Done;
    }

    /// The call's text left the format or ended early: the call ends with what was
    /// written (a string value being written is kept as far as it got; any other
    /// value being written is dropped), and the rest of its text is kept for the
    /// warning.
    fn cut(&mut self, why: &'static str, schemas: &ToolSchemas, out: &mut Vec<Delta>) {
        match &mut self.phase {
            Phase::Value(v) if v.verbatim && !v.skip => {
                let rest = std::mem::take(&mut self.buf);
                self.write_value_text(&rest, out);
                self.close_value(schemas, out);
            }
            Phase::Value(v) => self.buf.insert_str(0, &v.text),
            _ => {}
        }
        self.cut_reason = Some(why);
        self.finish(schemas, out);
    }

    /// `,"key"` (or `{"key"` for the first one).
    fn separator_and_key(&mut self, key: &str) -> String {
        let sep = if self.opened { "," } else { "{" };
        self.opened = true;
        format!("{sep}{}", serde_json::Value::from(key))
    }

    /// Sends an arguments fragment, merged into the last one when adjacent.
    fn send(&mut self, text: String, out: &mut Vec<Delta>) {
        if text.is_empty() {
            return;
        }
        match out.last_mut() {
            Some(Delta::ToolCallArguments { index, text: t }) if *index == self.index => {
                t.push_str(&text)
            }
            _ => out.push(Delta::ToolCallArguments {
                index: self.index,
                text,
            }),
        }
    }
}

/// A `NAME>` after `<function=` or `<parameter=`.
pub(super) enum Tag {
    /// The trimmed name and the bytes up to and including the `>`.
    Name(String, usize),
    /// No `>` yet, and nothing wrong so far.
    Incomplete,
    /// Empty, or spread over lines, or holding a `<`.
    Bad,
}

pub(super) fn tag_name(text: &str) -> Tag {
    match text.find('>') {
        Some(close) => {
            let name = text[..close].trim();
            if name.is_empty() || name.contains(['\n', '<']) {
                Tag::Bad
            } else {
                Tag::Name(name.to_string(), close + 1)
            }
        }
        None if text.contains(['\n', '<']) => Tag::Bad,
        None => Tag::Incomplete,
    }
}

/// The longest end of `buf` that may still become the end of a value (`\n</parameter>`
/// or `</parameter>`): it waits for the next text.
fn held_suffix(buf: &str) -> usize {
    (1..=buf.len().min(VALUE_END.len()))
        .rev()
        .filter(|&n| buf.is_char_boundary(buf.len() - n))
        .find(|&n| {
            let tail = &buf[buf.len() - n..];
            VALUE_END.starts_with(tail) || PARAM_CLOSE.starts_with(tail)
        })
        .unwrap_or(0)
}
