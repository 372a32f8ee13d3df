//! Calls held back until complete (the default): the demo model's template and output, and property
//! tests that streaming (any split of the text) equals parsing the whole reply, that
//! generated replies parse to what was generated, and that arbitrary text never panics
//! nor loses text.

use crate::generate::*;
use edge_runtime::ChatTemplate;
use edge_runtime::tool_calls::{
    Delta, ParsedReply, ToolCall, ToolCallFormat, ToolCallParser, Warning, WarningKind,
    parse_complete,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(rel: &str) -> Value {
    let text = std::fs::read_to_string(root().join(rel)).expect("readable");
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn demo_model_real_output() {
    let template = read_json("models/demo/tokenizer_config.json");
    let src = template["chat_template"].as_str().expect("template");
    let format = ToolCallFormat::from_template(src).expect("a tool-call template");
    assert_eq!(format, ToolCallFormat::Xml);
    let tools = read_json("models/demo/agent_defaults.json")["tools"].clone();
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\ncd /testbed && ls src/datekit\n</parameter>\n</function>\n</tool_call>";
    let r = parse_complete(format, Some(&tools), text, false);
    assert_eq!(r.content, "");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "bash");
    assert_eq!(r.tool_calls[0].id, "call_0");
    assert_eq!(
        r.tool_calls[0].arguments_json(),
        r#"{"command":"cd /testbed && ls src/datekit"}"#
    );
    // The same, streamed one character at a time, starting inside the reasoning as
    // the demo's generation prompt (`<think>\n`) leaves it.
    let full = format!("The user wants the files.\n</think>\n\n{text}");
    let (streamed, _) = feed_chars(format, Some(&tools), &full, true);
    let whole = parse_complete(format, Some(&tools), &full, true);
    assert_eq!(streamed.tool_calls, whole.tool_calls);
    assert_eq!(
        whole.reasoning.as_deref(),
        Some("The user wants the files.")
    );
}

/// A conversation rendered by the demo template parses back to its assistant turn.
#[test]
fn round_trip_through_demo_template() {
    let cfg =
        std::fs::read_to_string(root().join("models/demo/tokenizer_config.json")).expect("config");
    let template = ChatTemplate::from_tokenizer_config(&cfg).expect("template");
    let tools = json!([{"type": "function", "function": {"name": "run", "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string"}, "n": {"type": "integer"},
            "ratio": {"type": "number"}, "flags": {"type": "array"},
            "opts": {"type": "object"}, "dry": {"type": "boolean"}, "none": {"type": "null"}},
        "required": ["command"]}}}]);
    let args = json!({"command": "ls -l\n<x> && echo '{\"a\": 1}'", "n": 3, "ratio": 0.25,
        "flags": ["-a", 2], "opts": {"deep": {"k": [true]}}, "dry": false, "none": null});
    let messages = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "reasoning_content": "Plan: run it.", "content": "Running.",
         "tool_calls": [
            {"type": "function", "function": {"name": "run", "arguments": args}},
            {"type": "function", "function": {"name": "run", "arguments": {"command": "pwd"}}}]},
    ]);
    let text = template
        .render(&messages, Some(&tools), false, true)
        .expect("renders");
    let start = text
        .rfind("<|im_start|>assistant\n")
        .expect("assistant turn")
        + 22;
    let end = text[start..].find("<|im_end|>").expect("end") + start;
    let reply = &text[start..end];
    let r = parse_complete(ToolCallFormat::Xml, Some(&tools), reply, false);
    assert_eq!(r.reasoning.as_deref(), Some("Plan: run it."));
    assert_eq!(r.content, "Running.");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(Value::Object(r.tool_calls[0].arguments.clone()), args);
    assert_eq!(r.tool_calls[1].arguments["command"], json!("pwd"));
    assert_eq!(r.tool_calls[1].id, "call_1");
}

// ---------------------------------------------------------------- helpers

/// What a stream of deltas adds up to.
#[derive(Debug, Default, PartialEq)]
struct Collected {
    content: String,
    reasoning: String,
    tool_calls: Vec<ToolCall>,
}

fn collect(deltas: Vec<Delta>, into: &mut Collected, checked_text: &mut Vec<String>) {
    for d in deltas {
        match d {
            Delta::Content(t) => {
                into.content.push_str(&t);
                checked_text.push(t);
            }
            Delta::Reasoning(t) => {
                into.reasoning.push_str(&t);
                checked_text.push(t);
            }
            Delta::ToolCall(c) => into.tool_calls.push(c),
            other => panic!("a parser that holds calls back gave {other:?}"),
        }
    }
}

/// Feeds `pieces` in order; returns the sum, the text deltas and the warnings.
fn feed(
    format: ToolCallFormat,
    tools: Option<&Value>,
    pieces: &[&str],
    in_reasoning: bool,
) -> (Collected, Vec<String>, Vec<Warning>) {
    let mut p = ToolCallParser::new(format, tools, in_reasoning);
    let mut c = Collected::default();
    let mut texts = Vec::new();
    for piece in pieces {
        collect(p.push(piece), &mut c, &mut texts);
    }
    let (rest, warnings) = p.finish();
    collect(rest, &mut c, &mut texts);
    (c, texts, warnings)
}

fn feed_chars(
    format: ToolCallFormat,
    tools: Option<&Value>,
    text: &str,
    in_reasoning: bool,
) -> (Collected, Vec<Warning>) {
    let pieces: Vec<&str> = text
        .char_indices()
        .map(|(i, ch)| &text[i..i + ch.len_utf8()])
        .collect();
    let (c, _, w) = feed(format, tools, &pieces, in_reasoning);
    (c, w)
}

fn as_collected(r: &ParsedReply) -> Collected {
    Collected {
        content: r.content.clone(),
        reasoning: r.reasoning.clone().unwrap_or_default(),
        tool_calls: r.tool_calls.clone(),
    }
}

/// Streaming equals whole parsing, for a random split and for single characters.
fn check_streaming(
    format: ToolCallFormat,
    tools: Option<&Value>,
    text: &str,
    in_reasoning: bool,
    cuts: &[f64],
    check_tags: bool,
) -> Result<ParsedReply, TestCaseError> {
    let whole = parse_complete(format, tools, text, in_reasoning);
    let pieces = split_at(text, cuts);
    let (split, texts, warnings) = feed(format, tools, &pieces, in_reasoning);
    prop_assert_eq!(&split, &as_collected(&whole));
    prop_assert_eq!(&warnings, &whole.warnings);
    let (chars, char_warnings) = feed_chars(format, tools, text, in_reasoning);
    prop_assert_eq!(&chars, &as_collected(&whole));
    prop_assert_eq!(&char_warnings, &whole.warnings);
    if check_tags {
        for t in &texts {
            for tag in TAGS {
                prop_assert!(!t.contains(tag), "delta {:?} holds {:?}", t, tag);
            }
        }
    }
    Ok(whole)
}

// ---------------------------------------------------------------- generated replies

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Generated replies (reasoning with or without `<think>`, content with `<` and tag
    /// fragments, 0-3 calls of every schema type in either form, malformed calls): any
    /// split parses as the whole does, the whole parses to what was generated, no text
    /// delta holds a tag unless a malformed call was returned as text, and every
    /// malformed call gives one warning.
    #[test]
    fn streaming_equals_whole_on_generated_replies(
        reply in reply_strategy(),
        cuts in prop::collection::vec(0.0..=1.0f64, 0..12),
    ) {
        let tools = schema_tools();
        let text = reply.text();
        let whole = check_streaming(
            reply.format, Some(&tools), &text, reply.in_reasoning, &cuts, reply.malformed() == 0,
        )?;
        let (content, reasoning, calls) = reply.expected();
        prop_assert_eq!(&whole.content, &content);
        prop_assert_eq!(&whole.reasoning, &reasoning);
        let got: Vec<(String, Value)> = whole
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), Value::Object(c.arguments.clone())))
            .collect();
        prop_assert_eq!(got, calls);
        for (i, c) in whole.tool_calls.iter().enumerate() {
            prop_assert_eq!(c.index, i);
            prop_assert_eq!(&c.id, &format!("call_{i}"));
        }
        let malformed = whole.warnings.iter().filter(|w| w.kind == WarningKind::MalformedCall).count();
        prop_assert_eq!(malformed, reply.malformed());
    }
}

// ---------------------------------------------------------------- arbitrary text

/// The content and reasoning the rules give when no call is recognised.
fn without_calls(text: &str, in_reasoning: bool) -> (String, Option<String>) {
    let split = |r: &str| match r.find("</think>") {
        Some(at) => (
            Some(r[..at].to_string()),
            r[at + "</think>".len()..].to_string(),
        ),
        None => (Some(r.to_string()), String::new()),
    };
    let (reasoning, rest) = if in_reasoning {
        split(text)
    } else if let Some(r) = text.trim_start().strip_prefix("<think>") {
        split(r)
    } else {
        (None, text.to_string())
    };
    let reasoning = reasoning
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty());
    (rest.trim().to_string(), reasoning)
}

/// Whether the non-whitespace characters of `part` appear in order in `whole`.
fn is_subsequence(part: &str, whole: &str) -> bool {
    let mut it = whole.chars().filter(|c| !c.is_whitespace());
    part.chars()
        .filter(|c| !c.is_whitespace())
        .all(|c| it.any(|w| w == c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Arbitrary text (random tags and fragments, or any characters) never panics,
    /// streams exactly like the whole, loses no text when no call is recognised
    /// (content and reasoning are the input minus the think tags, trimmed), and never
    /// invents text (content and reasoning are drawn from the input in order).
    #[test]
    fn arbitrary_text_is_never_lost(
        text in soup_strategy(),
        in_reasoning in any::<bool>(),
        json_form in any::<bool>(),
        cuts in prop::collection::vec(0.0..=1.0f64, 0..12),
    ) {
        let format = if json_form { ToolCallFormat::Json } else { ToolCallFormat::Xml };
        let whole = check_streaming(format, None, &text, in_reasoning, &cuts, false)?;
        if whole.tool_calls.is_empty() {
            let (content, reasoning) = without_calls(&text, in_reasoning);
            prop_assert_eq!(&whole.content, &content);
            prop_assert_eq!(&whole.reasoning, &reasoning);
        }
        let reasoning = whole.reasoning.clone().unwrap_or_default();
        let said = reasoning + &whole.content;
        prop_assert!(is_subsequence(&said, &text));
        let opened = text.matches("<tool_call>").count();
        let malformed = whole.warnings.iter().filter(|w| w.kind == WarningKind::MalformedCall).count();
        prop_assert!(whole.tool_calls.len() + malformed <= opened);
    }
}
