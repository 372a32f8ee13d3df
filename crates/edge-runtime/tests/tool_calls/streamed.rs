//! Calls streamed as they are written ([`ToolCallParser::streaming_calls`]): the head
//! as soon as the name is complete, the arguments in fragments that concatenate to the
//! call's arguments JSON, and the same reply as when calls are held back.

use crate::generate::*;
use edge_runtime::tool_calls::{
    Delta, ToolCall, ToolCallFormat, ToolCallHead, ToolCallParser, Warning, WarningKind,
    parse_complete,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What a streamed reply adds up to.
#[derive(Debug, Default, PartialEq)]
struct Streamed {
    content: String,
    reasoning: String,
    /// The complete calls (held back or ended).
    calls: Vec<ToolCall>,
    heads: Vec<ToolCallHead>,
    /// Each streamed call's arguments fragments, concatenated.
    arguments: BTreeMap<usize, String>,
    warnings: Vec<Warning>,
}

impl Streamed {
    /// Adds deltas, checking their order: a call's fragments and end come after its
    /// head, and nothing of a call after its end.
    fn add(&mut self, deltas: Vec<Delta>) -> Result<(), TestCaseError> {
        for d in deltas {
            let open = |s: &Self, i: usize| {
                s.heads.iter().any(|h| h.index == i) && !s.calls.iter().any(|c| c.index == i)
            };
            match d {
                Delta::Content(t) => self.content.push_str(&t),
                Delta::Reasoning(t) => self.reasoning.push_str(&t),
                Delta::ToolCall(c) => self.calls.push(c),
                Delta::ToolCallBegin(h) => {
                    prop_assert!(!self.heads.iter().any(|o| o.index == h.index));
                    self.heads.push(h);
                }
                Delta::ToolCallArguments { index, text } => {
                    prop_assert!(open(self, index), "fragment of call {} outside it", index);
                    prop_assert!(!text.is_empty());
                    self.arguments.entry(index).or_default().push_str(&text);
                }
                Delta::ToolCallEnd(c) => {
                    prop_assert!(open(self, c.index), "end of call {} not open", c.index);
                    self.calls.push(c);
                }
            }
        }
        Ok(())
    }
}

fn parser(format: ToolCallFormat, tools: Option<&Value>, in_reasoning: bool) -> ToolCallParser {
    ToolCallParser::new(format, tools, in_reasoning).streaming_calls(true)
}

/// Feeds `pieces` to a streaming parser; checks that every streamed call ended and
/// that its fragments are its arguments JSON.
fn stream(
    format: ToolCallFormat,
    tools: Option<&Value>,
    pieces: &[&str],
    in_reasoning: bool,
) -> Result<Streamed, TestCaseError> {
    let mut p = parser(format, tools, in_reasoning);
    let mut s = Streamed::default();
    for piece in pieces {
        s.add(p.push(piece))?;
    }
    let (rest, warnings) = p.finish();
    s.add(rest)?;
    s.warnings = warnings;
    for h in &s.heads {
        let call = s.calls.iter().find(|c| c.index == h.index);
        prop_assert!(call.is_some(), "call {} was never ended", h.index);
        let call = call.expect("checked");
        prop_assert_eq!((&call.id, &call.name), (&h.id, &h.name));
        let sent = s.arguments.get(&h.index).map_or("", String::as_str);
        prop_assert_eq!(sent, call.arguments_json());
    }
    Ok(s)
}

/// Streams `text` split at `cuts`, one character at a time and whole; all three agree.
fn stream_any_split(
    format: ToolCallFormat,
    tools: Option<&Value>,
    text: &str,
    in_reasoning: bool,
    cuts: &[f64],
) -> Result<Streamed, TestCaseError> {
    let whole = stream(format, tools, &[text], in_reasoning)?;
    let split = stream(format, tools, &split_at(text, cuts), in_reasoning)?;
    prop_assert_eq!(&split, &whole);
    let chars: Vec<&str> = text
        .char_indices()
        .map(|(i, c)| &text[i..i + c.len_utf8()])
        .collect();
    let by_char = stream(format, tools, &chars, in_reasoning)?;
    prop_assert_eq!(&by_char, &whole);
    Ok(whole)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    /// Well-formed generated replies: any split streams alike, every XML call is
    /// streamed (its head once `<function=NAME>` is complete, before the rest of the
    /// call), and the reply is the one the holding parser gives, warnings included.
    #[test]
    fn streamed_calls_are_the_held_calls(
        reply in reply_strategy(),
        cuts in prop::collection::vec(0.0..=1.0f64, 0..12),
    ) {
        prop_assume!(reply.malformed() == 0);
        let tools = schema_tools();
        let text = reply.text();
        let s = stream_any_split(reply.format, Some(&tools), &text, reply.in_reasoning, &cuts)?;
        let held = parse_complete(reply.format, Some(&tools), &text, reply.in_reasoning);
        prop_assert_eq!(&s.content, &held.content);
        prop_assert_eq!(&s.reasoning, &held.reasoning.clone().unwrap_or_default());
        prop_assert_eq!(&s.calls, &held.tool_calls);
        prop_assert_eq!(&s.warnings, &held.warnings);
        if reply.format == ToolCallFormat::Xml {
            prop_assert_eq!(s.heads.len(), s.calls.len());
            // Call n's head comes out of the text up to its name's `>`.
            for (n, (at, _)) in text.match_indices("<function=").enumerate() {
                let end = at + text[at..].find('>').expect("a name's end") + 1;
                let mut p = parser(reply.format, Some(&tools), reply.in_reasoning);
                let deltas = p.push(&text[..end]);
                let head = deltas.iter().any(
                    |d| matches!(d, Delta::ToolCallBegin(h) if h.index == n),
                );
                prop_assert!(head, "no head for call {} from {:?}", n, &text[..end]);
            }
        } else {
            prop_assert!(s.heads.is_empty());
        }
    }

    /// Any text, malformed calls included: never panics, any split streams alike,
    /// every streamed call ends with its fragments equal to its arguments JSON.
    #[test]
    fn any_text_streams_alike(
        text in prop_oneof![soup_strategy(), reply_strategy().prop_map(|r| r.text())],
        in_reasoning in any::<bool>(),
        cuts in prop::collection::vec(0.0..=1.0f64, 0..12),
    ) {
        let tools = schema_tools();
        for tools in [None, Some(&tools)] {
            stream_any_split(ToolCallFormat::Xml, tools, &text, in_reasoning, &cuts)?;
        }
    }
}

fn bash_tools() -> Value {
    json!([{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"]}}}])
}

/// Deltas of `pieces` fed in order, each piece's deltas apart.
fn deltas_per_piece(tools: &Value, pieces: &[&str]) -> Vec<Vec<Delta>> {
    let mut p = parser(ToolCallFormat::Xml, Some(tools), false);
    let mut out: Vec<Vec<Delta>> = pieces.iter().map(|t| p.push(t)).collect();
    out.push(p.finish().0);
    out
}

fn args(index: usize, text: &str) -> Delta {
    Delta::ToolCallArguments {
        index,
        text: text.to_string(),
    }
}

#[test]
fn a_string_value_streams_as_it_is_written() {
    let tools = bash_tools();
    let got = deltas_per_piece(
        &tools,
        &[
            "Let me look.\n<tool_call>\n<function=ba",
            "sh>\n<parameter=command>\ncd /te",
            "stbed && ls \"src\"\n",
            "</parameter>\n<parameter=timeout>\n3",
            "0\n</parameter>\n</function>\n</tool_call>",
        ],
    );
    let head = Delta::ToolCallBegin(ToolCallHead {
        index: 0,
        id: "call_0".into(),
        name: "bash".into(),
    });
    assert_eq!(got[0], [Delta::Content("Let me look.".into())]);
    assert_eq!(got[1], [head, args(0, "{\"command\":\"cd /te")]);
    // The value's last `\n` may belong to the format: held until `</parameter>`.
    assert_eq!(got[2], [args(0, "stbed && ls \\\"src\\\"")]);
    // A number is sent whole at its end.
    assert_eq!(got[3], [args(0, "\"")]);
    let end = &got[4];
    assert_eq!(end[0], args(0, ",\"timeout\":30}"));
    let Delta::ToolCallEnd(call) = &end[1] else {
        panic!("{end:?}")
    };
    assert_eq!(
        Value::Object(call.arguments.clone()),
        json!({"command": "cd /testbed && ls \"src\"", "timeout": 30})
    );
    assert!(got[5].is_empty());
}

#[test]
fn a_cut_call_keeps_what_was_written() {
    let tools = bash_tools();
    // Cut by the token limit inside a value.
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\nls -l src/ma";
    let s = stream(ToolCallFormat::Xml, Some(&tools), &[text], false).expect("streams");
    assert_eq!(s.content, "");
    assert_eq!(s.calls.len(), 1);
    assert_eq!(s.arguments[&0], r#"{"command":"ls -l src/ma"}"#);
    let kinds: Vec<_> = s.warnings.iter().map(|w| w.kind).collect();
    assert_eq!(kinds, [WarningKind::IncompleteCall]);
    // Cut inside a number: the number is dropped, and the call lacks a required value.
    let text = "<tool_call>\n<function=bash>\n<parameter=timeout>\n12";
    let s = stream(ToolCallFormat::Xml, Some(&tools), &[text], false).expect("streams");
    assert_eq!(s.arguments[&0], "{}");
    let kinds: Vec<_> = s.warnings.iter().map(|w| w.kind).collect();
    assert_eq!(
        kinds,
        [WarningKind::IncompleteCall, WarningKind::MissingRequired]
    );
    // Cut before the name is complete: nothing was announced, so the text is content.
    let text = "<tool_call>\n<function=ba";
    let s = stream(ToolCallFormat::Xml, Some(&tools), &[text], false).expect("streams");
    assert!(s.calls.is_empty() && s.heads.is_empty());
    assert_eq!(s.content, text);
    assert_eq!(s.warnings[0].kind, WarningKind::MalformedCall);
}

#[test]
fn a_repeated_parameter_keeps_its_first_value() {
    let tools = bash_tools();
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n\
                <parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>\nok";
    let s = stream(ToolCallFormat::Xml, Some(&tools), &[text], false).expect("streams");
    assert_eq!(s.arguments[&0], r#"{"command":"ls"}"#);
    assert_eq!(s.content, "ok");
    assert_eq!(s.warnings[0].kind, WarningKind::DuplicateParameter);
    assert_eq!(s.warnings[0].call, Some(0));
}

#[test]
fn text_outside_the_format_ends_the_call() {
    let tools = bash_tools();
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n\
                garbage\n</function>\n</tool_call>\n<tool_call>\n<function=bash>\n\
                <parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>";
    let s = stream(ToolCallFormat::Xml, Some(&tools), &[text], false).expect("streams");
    assert_eq!(s.content, "");
    assert_eq!(s.calls.len(), 2);
    assert_eq!(s.arguments[&0], r#"{"command":"ls"}"#);
    assert_eq!(s.arguments[&1], r#"{"command":"pwd"}"#);
    assert_eq!(s.warnings[0].kind, WarningKind::IncompleteCall);
    assert!(
        s.warnings[0].message.contains("garbage"),
        "{}",
        s.warnings[0]
    );
}

/// A JSON body is not streamed: it is held back and checked whole as usual.
#[test]
fn a_json_body_is_held_back() {
    let text =
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>";
    let got = deltas_per_piece(&bash_tools(), &[text]);
    assert!(matches!(&got[0][..], [Delta::ToolCall(c)] if c.name == "bash"));
}
