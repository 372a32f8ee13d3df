//! Constrained tool calls: a grammar of the Qwen3.5/3.6 XML call format, built from a
//! request's `tools`, that decoding can follow so every call the model writes names an
//! offered function, uses each of its declared parameters at most once, gives every
//! required one, and writes values of the declared types.
//!
//! The grammar is *lazy*, as llama.cpp's tool-call grammars and vLLM's structured
//! outputs for tools are: outside a call the model writes freely (reasoning, content,
//! or no call at all); once it has written `<tool_call>`, the rest of that call must be
//!
//! ```text
//! <tool_call>
//! <function=NAME>
//! <parameter=ARG>
//! VALUE
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! with `NAME` an offered function, each `ARG` a declared property not used before in
//! this call, `</function>` only after the required properties, and `VALUE` by type:
//!
//! - `string` (and schemas not understood, and unions with `string`): any text without
//!   `</parameter>`, `<tool_call>` or `</tool_call>`;
//! - `integer` / `number`: a JSON integer / number;
//! - `boolean`, `null` and `enum`: one of the allowed texts (strings raw, others JSON);
//! - `array` / `object` (and unions of non-string types): a syntactically valid JSON
//!   array / object / value. Item and property schemas inside it are not followed.
//!
//! A function whose schema declares no `properties` takes any parameter names, with
//! text values. Only the first 64 properties (in name order) of a function are tracked
//! for repeats and requirement. Inside `<think>…</think>` nothing is constrained.
//!
//! The grammar works on bytes. [`ToolConstraint`] applies it to a tokenizer's
//! vocabulary: the engine masks the logits of the tokens whose bytes the grammar
//! rejects, while a call is open.

mod json;
mod lexers;
mod nodes;
mod policy;
mod rules;
#[cfg(test)]
mod tests;
mod vocab;

pub use policy::ToolCallPolicy;
pub use vocab::{PathFilter, TokenBytes, ToolConstraint};

use super::ToolCallFormat;
use crate::{ChatTemplate, Result, RuntimeError};
use json::{Json, JsonStep};
use lexers::Number;
use nodes::Nodes;
use rules::{FunctionRule, Prefix, TRACKED_PARAMS, ValueRule};
use serde_json::Value;

const CALL_OPEN: &[u8] = b"<tool_call>";
const CALL_CLOSE: &[u8] = b"</tool_call>";
const THINK_OPEN: &[u8] = b"<think>";
const THINK_CLOSE: &[u8] = b"</think>";
const PARAM_OPEN: &[u8] = b"<parameter=";
const PARAM_CLOSE_TAG: &[u8] = b"</parameter>";
/// The end of a string value: the format's `\n`, then the close tag.
const TEXT_END: &[u8] = b"\n</parameter>";
const CALL_END: &[u8] = b"</function>\n</tool_call>";

/// The fixed stretches of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fixed {
    /// After `<tool_call>`.
    CallHead,
    /// After the function name's `>`.
    NameEnd,
    /// After a parameter name's `>`.
    ValueHead,
    /// After a value.
    ParamClose,
}

impl Fixed {
    fn text(self) -> &'static [u8] {
        match self {
            Fixed::CallHead => b"\n<function=",
            Fixed::NameEnd | Fixed::ValueHead => b"\n",
            Fixed::ParamClose => b"\n</parameter>\n",
        }
    }
}

/// Checks that `template` writes tool calls in the XML format the grammar follows
/// (a template that does not say is taken to, as the parser takes it).
pub fn check_constrainable(template: &ChatTemplate) -> Result<()> {
    match template.tool_call_format() {
        Some(ToolCallFormat::Json) => Err(RuntimeError::InvalidConfig {
            reason: "constrained tool calls follow the XML call format (Qwen3.5/3.6); this \
                     chat template writes JSON calls"
                .into(),
        }),
        Some(ToolCallFormat::Xml) | None => Ok(()),
    }
}

/// Whether `bytes` are plain text to the grammar: no `<` (which may begin a tag), no
/// `\n` (which may begin a string's end), no `"` or `\\` and no control character
/// (which end or escape a JSON string).
pub fn is_plain(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b >= 0x20 && b != 0x7f && !matches!(b, b'<' | b'"' | b'\\'))
}

/// Progress into a pattern whose first byte occurs nowhere else in it, so a mismatch
/// restarts at 0, or at 1 when the byte is the first one.
fn progress(pattern: &[u8], at: u8, b: u8) -> u8 {
    if pattern[at as usize] == b {
        at + 1
    } else {
        u8::from(pattern[0] == b)
    }
}

/// Progress that has died (no longer a possible match).
const DEAD: u8 = u8::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Inside the reasoning: progress into `</think>`.
    Reasoning {
        close: u8,
    },
    /// Outside calls: progress into `<tool_call>`, and into a `<think>` that opens the
    /// reply ([`DEAD`] once anything else came first).
    Free {
        call: u8,
        think: u8,
    },
    /// A call must come (OpenAI's `tool_choice` `required` or a named function):
    /// whitespace, then `<tool_call>` (progress into it).
    Must {
        call: u8,
    },
    Fixed {
        text: Fixed,
        pos: u8,
    },
    FunctionName(Prefix),
    /// After `>\n` of the name or a parameter's close: progress into `<parameter=` and
    /// into the call's end ([`DEAD`] when no longer possible).
    Next {
        open: u8,
        end: u8,
    },
    ParamName(Prefix),
    /// A name of a function without declared properties: its length so far.
    AnyParamName {
        len: u16,
    },
    /// A string value: progress into [`TEXT_END`], and the tags it may not hold.
    Text {
        end: u8,
        tags: Tags,
    },
    Number {
        n: Number,
        integer: bool,
    },
    OneOf(Prefix),
    Json(Json, Tags),
}

/// Progress into the tags a value may not hold, since the parser ends the value or the
/// call at the first of them: `</parameter>` (a string's own end, [`TEXT_END`], is
/// matched before it), `<tool_call>` and `</tool_call>`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tags {
    param_close: u8,
    call_open: u8,
    call_close: u8,
}

impl Tags {
    fn step(self, b: u8) -> Option<Tags> {
        let t = Tags {
            param_close: progress(PARAM_CLOSE_TAG, self.param_close, b),
            call_open: progress(CALL_OPEN, self.call_open, b),
            call_close: progress(CALL_CLOSE, self.call_close, b),
        };
        let done = |p: u8, tag: &[u8]| p as usize == tag.len();
        let any = done(t.param_close, PARAM_CLOSE_TAG)
            || done(t.call_open, CALL_OPEN)
            || done(t.call_close, CALL_CLOSE);
        (!any).then_some(t)
    }
}

/// Where decoding stands in the grammar: cheap to copy, so a token can be tried on a
/// copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrammarState {
    phase: Phase,
    /// The called function (index into the grammar's sorted functions).
    function: u16,
    /// The parameter whose value is being written.
    param: u16,
    /// Parameters of the call already given (bit per tracked parameter).
    used: u64,
    /// Whether the reply must still open a call.
    must_call: bool,
}

impl GrammarState {
    /// Whether the grammar constrains the next bytes: a call is open, or must open.
    pub fn in_call(&self) -> bool {
        !matches!(self.phase, Phase::Free { .. } | Phase::Reasoning { .. })
    }
}

/// The call grammar of one request's tools.
#[derive(Clone, Debug)]
pub struct ToolCallGrammar {
    /// Sorted by name, names unique.
    functions: Vec<FunctionRule>,
    /// The schemas of array, object and union parameters.
    nodes: Nodes,
}

impl ToolCallGrammar {
    /// Compiles OpenAI `tools` (`[{"type": "function", "function": {"name",
    /// "parameters"}}]`; entries without the `function` wrapper are read too).
    /// Errors when `tools` is not an array, or names no function; entries without a
    /// name are skipped, and of a repeated name the first entry counts.
    pub fn new(tools: &Value) -> Result<ToolCallGrammar> {
        let list = tools.as_array().ok_or(RuntimeError::ToolsNotArray)?;
        let mut nodes = Nodes::default();
        let mut functions: Vec<FunctionRule> = list
            .iter()
            .filter_map(|t| FunctionRule::of(t, &mut nodes))
            .collect();
        // A stable sort keeps the first of equal names first, and dedup keeps it.
        functions.sort_by(|a, b| a.name.cmp(&b.name));
        functions.dedup_by(|later, first| later.name == first.name);
        if functions.is_empty() {
            return Err(RuntimeError::NoToolFunctions);
        }
        if functions.len() > u16::MAX as usize {
            return Err(RuntimeError::TooManyTools {
                count: functions.len(),
                max: u16::MAX as usize,
            });
        }
        Ok(ToolCallGrammar { functions, nodes })
    }

    /// Restricts calls to the function `name` (OpenAI's named `tool_choice`).
    pub fn only(mut self, name: &str) -> Result<ToolCallGrammar> {
        self.functions.retain(|f| f.name == name.as_bytes());
        if self.functions.is_empty() {
            return Err(RuntimeError::UnknownTool {
                name: name.to_string(),
            });
        }
        Ok(self)
    }

    /// The offered functions' names, sorted.
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        (self.functions.iter()).map(|f| std::str::from_utf8(&f.name).unwrap_or("?"))
    }

    /// The state before the reply's first byte; `in_reasoning` when the prompt leaves
    /// the reply inside `<think>` (see [`super::prompt_opens_reasoning`]). With
    /// `must_call` the reply (after the reasoning) must open with a call: only
    /// whitespace may come before it.
    pub fn start(&self, in_reasoning: bool, must_call: bool) -> GrammarState {
        let phase = match (in_reasoning, must_call) {
            (true, _) => Phase::Reasoning { close: 0 },
            (false, true) => Phase::Must { call: 0 },
            (false, false) => Phase::Free { call: 0, think: 0 },
        };
        GrammarState {
            phase,
            function: 0,
            param: 0,
            used: 0,
            must_call,
        }
    }

    /// Whether every run of plain bytes (see [`is_plain`]) is accepted from `state`:
    /// inside a string value with no tag begun (the run leaves the state as it is), in
    /// the reasoning, or outside calls with no `<tool_call>` begun. The token mask
    /// allows plain tokens there without reading them.
    pub fn accepts_plain(&self, state: GrammarState) -> bool {
        let fresh = Tags::default();
        match state.phase {
            Phase::Text { end, tags } => end == 0 && tags == fresh,
            Phase::Json(j, tags) => tags == fresh && j.in_plain_string(),
            Phase::Reasoning { .. } => true,
            Phase::Free { call, .. } => call == 0,
            _ => false,
        }
    }

    /// The state after `bytes`, or `None` when the grammar rejects them.
    pub fn accept(&self, mut state: GrammarState, bytes: &[u8]) -> Option<GrammarState> {
        for &b in bytes {
            state = self.step(state, b)?;
        }
        Some(state)
    }

    fn params(&self, s: &GrammarState) -> Option<&[rules::ParamRule]> {
        self.functions[s.function as usize].params.as_deref()
    }

    fn is_used(s: &GrammarState, i: usize) -> bool {
        i < TRACKED_PARAMS && s.used & (1 << i) != 0
    }

    fn with(s: GrammarState, phase: Phase) -> Option<GrammarState> {
        Some(GrammarState { phase, ..s })
    }

    /// After a fixed stretch ends.
    fn after_fixed(&self, s: GrammarState, text: Fixed) -> Option<GrammarState> {
        let phase = match text {
            Fixed::CallHead => Phase::FunctionName(Prefix::all(self.functions.len())),
            Fixed::NameEnd | Fixed::ParamClose => Phase::Next { open: 0, end: 0 },
            Fixed::ValueHead => {
                let rule = self.params(&s).map(|p| &p[s.param as usize].value);
                match rule.unwrap_or(&ValueRule::Text) {
                    ValueRule::Text => Phase::Text {
                        end: 0,
                        tags: Tags::default(),
                    },
                    ValueRule::Integer | ValueRule::Number => Phase::Number {
                        n: Number::START,
                        integer: matches!(rule, Some(ValueRule::Integer)),
                    },
                    ValueRule::OneOf(list) => Phase::OneOf(Prefix::all(list.len())),
                    ValueRule::Json(node) => Phase::Json(Json::new(*node), Tags::default()),
                }
            }
        };
        Self::with(s, phase)
    }

    /// The value's end: the rest of `\n</parameter>\n` after its first `\n`.
    fn close_value(s: GrammarState) -> Option<GrammarState> {
        let text = Fixed::ParamClose;
        Self::with(s, Phase::Fixed { text, pos: 1 })
    }

    fn step(&self, s: GrammarState, b: u8) -> Option<GrammarState> {
        match s.phase {
            Phase::Reasoning { close } => {
                let close = progress(THINK_CLOSE, close, b);
                match (close as usize == THINK_CLOSE.len(), s.must_call) {
                    (true, true) => Self::with(s, Phase::Must { call: 0 }),
                    (true, false) => Self::with(
                        s,
                        Phase::Free {
                            call: 0,
                            think: DEAD,
                        },
                    ),
                    (false, _) => Self::with(s, Phase::Reasoning { close }),
                }
            }
            Phase::Must { call } => {
                if call == 0 && b.is_ascii_whitespace() {
                    return Some(s);
                }
                if CALL_OPEN[call as usize] != b {
                    return None;
                }
                if call as usize + 1 < CALL_OPEN.len() {
                    return Self::with(s, Phase::Must { call: call + 1 });
                }
                let s = GrammarState {
                    must_call: false,
                    ..s
                };
                let text = Fixed::CallHead;
                Self::with(s, Phase::Fixed { text, pos: 0 })
            }
            Phase::Free { call, think } => {
                // Reasoning opens only at the reply's start, after whitespace at most (as
                // the parser reads it); later a `<think>` is plain text.
                let think = match think {
                    DEAD => DEAD,
                    _ if THINK_OPEN[think as usize] == b => think + 1,
                    0 if b.is_ascii_whitespace() => 0,
                    _ => DEAD,
                };
                let call = progress(CALL_OPEN, call, b);
                if call as usize == CALL_OPEN.len() {
                    let text = Fixed::CallHead;
                    Self::with(s, Phase::Fixed { text, pos: 0 })
                } else if think as usize == THINK_OPEN.len() {
                    Self::with(s, Phase::Reasoning { close: 0 })
                } else {
                    Self::with(s, Phase::Free { call, think })
                }
            }
            Phase::Fixed { text, pos } => {
                let t = text.text();
                if t[pos as usize] != b {
                    return None;
                }
                match pos as usize + 1 == t.len() {
                    true => self.after_fixed(s, text),
                    false => Self::with(s, Phase::Fixed { text, pos: pos + 1 }),
                }
            }
            Phase::FunctionName(p) => {
                if b == b'>'
                    && let Some(i) = p.exact(&self.functions)
                {
                    let s = GrammarState {
                        function: i as u16,
                        used: 0,
                        ..s
                    };
                    let text = Fixed::NameEnd;
                    return Self::with(s, Phase::Fixed { text, pos: 0 });
                }
                Self::with(s, Phase::FunctionName(p.step(&self.functions, b)?))
            }
            Phase::Next { open, end } => self.next_element(s, open, end, b),
            Phase::ParamName(p) => self.param_name(s, p, b),
            Phase::AnyParamName { len } => match b {
                b'>' if len > 0 => {
                    let s = GrammarState { param: 0, ..s };
                    let text = Fixed::ValueHead;
                    Self::with(s, Phase::Fixed { text, pos: 0 })
                }
                b'>' | b'<' | b'\n' => None,
                _ => Self::with(
                    s,
                    Phase::AnyParamName {
                        len: len.saturating_add(1),
                    },
                ),
            },
            Phase::Text { end, tags } => {
                let end = progress(TEXT_END, end, b);
                if end as usize == TEXT_END.len() {
                    let text = Fixed::ParamClose;
                    let pos = (Fixed::ParamClose.text().len() - 1) as u8;
                    return Self::with(s, Phase::Fixed { text, pos });
                }
                let tags = tags.step(b)?;
                Self::with(s, Phase::Text { end, tags })
            }
            Phase::Number { n, integer } => match b {
                b'\n' if n.complete() => Self::close_value(s),
                _ => Self::with(
                    s,
                    Phase::Number {
                        n: n.step(b, integer)?,
                        integer,
                    },
                ),
            },
            Phase::OneOf(p) => {
                let Some(ValueRule::OneOf(list)) =
                    self.params(&s).map(|ps| &ps[s.param as usize].value)
                else {
                    return None;
                };
                if b == b'\n' && p.exact(list).is_some() {
                    return Self::close_value(s);
                }
                Self::with(s, Phase::OneOf(p.step(list, b)?))
            }
            Phase::Json(j, tags) => match j.step(b, &self.nodes) {
                JsonStep::More(j) => Self::with(s, Phase::Json(j, tags.step(b)?)),
                JsonStep::End => Self::close_value(s),
                JsonStep::Reject => None,
            },
        }
    }

    /// After a function name or a parameter: another `<parameter=` (while a declared
    /// one is unused) or the call's end (once the required ones are given).
    fn next_element(&self, s: GrammarState, open: u8, end: u8, b: u8) -> Option<GrammarState> {
        let params = self.params(&s);
        let may_open = match params {
            None => true,
            Some(ps) => (0..ps.len()).any(|i| !Self::is_used(&s, i)),
        };
        let required = self.functions[s.function as usize].required;
        let may_end = s.used & required == required;
        let advance =
            |p: u8, allowed: bool, text: &[u8]| match p != DEAD && allowed && text[p as usize] == b
            {
                true => p + 1,
                false => DEAD,
            };
        let (open, end) = (
            advance(open, may_open, PARAM_OPEN),
            advance(end, may_end, CALL_END),
        );
        if open as usize == PARAM_OPEN.len() {
            let phase = match params {
                Some(ps) => Phase::ParamName(Prefix::all(ps.len())),
                None => Phase::AnyParamName { len: 0 },
            };
            return Self::with(s, phase);
        }
        if end as usize == CALL_END.len() {
            return Self::with(
                s,
                Phase::Free {
                    call: 0,
                    think: DEAD,
                },
            );
        }
        let phase = Phase::Next { open, end };
        (open != DEAD || end != DEAD).then_some(GrammarState { phase, ..s })
    }

    /// A byte of a declared parameter's name (or the `>` after it).
    fn param_name(&self, s: GrammarState, p: Prefix, b: u8) -> Option<GrammarState> {
        let params = self.params(&s)?;
        if b == b'>'
            && let Some(i) = p.exact(params)
            && !Self::is_used(&s, i)
        {
            let used = match i < TRACKED_PARAMS {
                true => s.used | (1 << i),
                false => s.used,
            };
            let s = GrammarState {
                param: i as u16,
                used,
                ..s
            };
            let text = Fixed::ValueHead;
            return Self::with(s, Phase::Fixed { text, pos: 0 });
        }
        let next = p.step(params, b)?;
        // Some name it may still become must be unused.
        let open = (next.lo as usize..next.hi as usize).any(|i| !Self::is_used(&s, i));
        let phase = Phase::ParamName(next);
        open.then_some(GrammarState { phase, ..s })
    }
}
