//! Tool-call parsing end to end: the demo model's template and output, and property
//! tests that streaming (any split of the text) equals parsing the whole reply, that
//! generated replies parse to what was generated, and that arbitrary text never panics
//! nor loses text.

use edge_runtime::ChatTemplate;
use edge_runtime::tool_calls::{
    Delta, ParsedReply, ToolCall, ToolCallFormat, ToolCallParser, Warning, WarningKind,
    parse_complete,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// Strings that start a tag; generated content and reasoning never contain them.
const TAGS: [&str; 8] = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
];

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

/// `text` cut at the char boundaries nearest to `cuts` (fractions of its length).
fn split_at<'a>(text: &'a str, cuts: &[f64]) -> Vec<&'a str> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|f| {
            let mut i = ((text.len() as f64) * f) as usize;
            while i < text.len() && !text.is_char_boundary(i) {
                i += 1;
            }
            i.min(text.len())
        })
        .collect();
    at.sort_unstable();
    let mut pieces = Vec::new();
    let mut prev = 0;
    for i in at.into_iter().chain([text.len()]) {
        pieces.push(&text[prev..i]);
        prev = i;
    }
    pieces
}

fn as_collected(r: &ParsedReply) -> Collected {
    Collected {
        content: r.content.clone(),
        reasoning: r.reasoning.clone().unwrap_or_default(),
        tool_calls: r.tool_calls.clone(),
    }
}

/// Removes every tag from `text` (by dropping tags' last characters until none is left).
fn sanitize(mut text: String) -> String {
    while let Some((at, tag)) = TAGS.iter().find_map(|t| text.find(t).map(|at| (at, *t))) {
        text.remove(at + tag.len() - 1);
    }
    text
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

fn schema_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "t", "parameters": {"type": "object",
            "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
                "n": {"type": "number"}, "b": {"type": "boolean"}, "o": {"type": "object"},
                "a": {"type": "array"}, "z": {"type": "null"},
                "u": {"type": ["integer", "string"]}},
            "required": []}}},
        {"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
            "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    ])
}

/// Text with `<`, tag fragments, multi-byte characters and JSON-looking pieces.
fn text_strategy(max: usize) -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "a",
        "b c",
        " ",
        "  ",
        "\n",
        "\n\n",
        "<",
        ">",
        "/",
        "=",
        "<too",
        "<tool",
        "<tool_box>",
        "<tool_call",
        "</tool_cal",
        "<thi",
        "<think",
        "</thin",
        "</think",
        "<div>",
        "a < b",
        "é",
        "日本",
        "{\"x\": 1}",
        "[1, 2]",
        "123",
        "true",
        "null",
        "<functio",
        "<paramete",
        "</parameter",
        "<function=",
        "<parameter=x>",
        "\"",
        "\\",
    ]);
    prop::collection::vec(tokens, 0..max).prop_map(|t| sanitize(t.concat()))
}

fn leaf_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        (-400i32..400).prop_map(|n| Value::from(f64::from(n) / 8.0)),
        text_strategy(4).prop_map(Value::from),
    ]
}

fn json_strategy() -> impl Strategy<Value = Value> {
    leaf_strategy().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec(("[a-z]{1,3}", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A value for parameter `param` of `function`, fitting its schema type.
fn value_for(function: &str, param: &str) -> BoxedStrategy<Value> {
    match (function, param) {
        ("t", "s") | ("bash", "command") => text_strategy(8).prop_map(Value::from).boxed(),
        ("t", "i") => any::<i64>().prop_map(Value::from).boxed(),
        ("t", "n") => (-400i32..400)
            .prop_map(|n| Value::from(f64::from(n) / 8.0))
            .boxed(),
        ("t", "b") => any::<bool>().prop_map(Value::from).boxed(),
        ("t", "o") => prop::collection::vec(("[a-z]{1,3}", json_strategy()), 0..3)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()))
            .boxed(),
        ("t", "a") => prop::collection::vec(json_strategy(), 0..3)
            .prop_map(Value::from)
            .boxed(),
        ("t", "z") => Just(Value::Null).boxed(),
        ("t", "u") => prop_oneof![
            any::<i32>().prop_map(Value::from),
            text_strategy(4).prop_map(Value::from)
        ]
        .boxed(),
        _ => json_strategy().boxed(),
    }
}

/// The text an XML call writes for a value: strings plain, the rest as JSON.
fn xml_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the parser should make of `v` written in an XML call.
fn xml_expected(function: &str, param: &str, v: &Value) -> Value {
    let as_json_else_string = |text: String| match serde_json::from_str::<Value>(&text) {
        Ok(parsed) if !parsed.is_string() => parsed,
        _ => Value::String(text),
    };
    match (function, param, v) {
        ("t", "s", _) | ("bash", "command", _) => v.clone(),
        ("t", "u", Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(parsed) if parsed.is_i64() || parsed.is_u64() => parsed,
            _ => v.clone(),
        },
        ("t", "u", _) | ("t", "i" | "n" | "b" | "o" | "a" | "z", _) => v.clone(),
        _ => as_json_else_string(xml_text(v)),
    }
}

#[derive(Clone, Debug)]
struct GenCall {
    name: String,
    args: Vec<(String, Value)>,
}

#[derive(Clone, Debug)]
enum Part {
    Text(String),
    Call(GenCall),
    /// Text of a malformed call, as the model wrote it.
    Malformed(String),
}

fn call_strategy() -> impl Strategy<Value = GenCall> {
    let t_params =
        prop::sample::subsequence(vec!["s", "i", "n", "b", "o", "a", "z", "u", "extra"], 0..=9);
    prop_oneof![
        t_params.prop_map(|ps| ("t", ps)),
        Just(("bash", vec!["command"])),
        prop::sample::subsequence(vec!["p", "q"], 0..=2).prop_map(|ps| ("nope", ps)),
    ]
    .prop_flat_map(|(name, params)| {
        let values: Vec<BoxedStrategy<(String, Value)>> = params
            .into_iter()
            .map(|p| {
                value_for(name, p)
                    .prop_map(move |v| (p.to_string(), v))
                    .boxed()
            })
            .collect();
        values.prop_map(move |args| GenCall {
            name: name.to_string(),
            args,
        })
    })
}

fn render_call(format: ToolCallFormat, c: &GenCall) -> String {
    match format {
        ToolCallFormat::Xml => {
            let mut s = format!("<tool_call>\n<function={}>\n", c.name);
            for (k, v) in &c.args {
                s.push_str(&format!("<parameter={k}>\n{}\n</parameter>\n", xml_text(v)));
            }
            s + "</function>\n</tool_call>"
        }
        ToolCallFormat::Json => {
            let args: Map<String, Value> = c.args.iter().cloned().collect();
            format!(
                "<tool_call>\n{}\n</tool_call>",
                json!({"name": c.name, "arguments": args})
            )
        }
    }
}

fn malformed_strategy(format: ToolCallFormat) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<tool_call>\n{\"name\": \"t\", \"arguments\": {\n</tool_call>".to_string()),
        Just("<tool_call>\n<parameter=s>\nx\n</parameter>\n</tool_call>".to_string()),
        Just("<tool_call>\n<function=t>\ngarbage <b>\n</function>\n</tool_call>".to_string()),
        text_strategy(6).prop_map(|t| format!("<tool_call>\n{t}\n</tool_call>")),
        // A call cut before its `</tool_call>` (at the end of the reply, or followed
        // by more text and calls).
        (call_strategy(), 0.0..1.0f64).prop_map(move |(c, f)| {
            let full = render_call(format, &c);
            let max = full.len() - "</tool_call>".len();
            let mut at = "<tool_call>".len() + ((max - "<tool_call>".len()) as f64 * f) as usize;
            while !full.is_char_boundary(at) {
                at -= 1;
            }
            full[..at].to_string()
        }),
    ]
}

#[derive(Clone, Debug)]
struct GenReply {
    format: ToolCallFormat,
    in_reasoning: bool,
    think: Option<String>,
    parts: Vec<Part>,
}

fn reply_strategy() -> impl Strategy<Value = GenReply> {
    (
        prop_oneof![Just(ToolCallFormat::Xml), Just(ToolCallFormat::Json)],
        any::<bool>(),
        prop::option::of(text_strategy(10)),
    )
        .prop_flat_map(|(format, in_reasoning, think)| {
            let think = if in_reasoning {
                Some(think.unwrap_or_default())
            } else {
                think
            };
            let call = prop_oneof![
                4 => call_strategy().prop_map(Part::Call),
                1 => malformed_strategy(format).prop_map(Part::Malformed),
            ];
            (
                text_strategy(10),
                prop::collection::vec((call, text_strategy(4)), 0..=3),
            )
                .prop_map(move |(first, rest)| {
                    let mut parts = vec![Part::Text(first)];
                    for (c, t) in rest {
                        parts.push(c);
                        parts.push(Part::Text(t));
                    }
                    GenReply {
                        format,
                        in_reasoning,
                        think: think.clone(),
                        parts,
                    }
                })
        })
}

impl GenReply {
    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(r) = &self.think {
            if !self.in_reasoning {
                s.push_str("<think>");
            }
            s.push_str(r);
            s.push_str("</think>");
        }
        for p in &self.parts {
            match p {
                Part::Text(t) | Part::Malformed(t) => s.push_str(t),
                Part::Call(c) => s.push_str(&render_call(self.format, c)),
            }
        }
        s
    }

    /// The content, reasoning and (name, arguments) of the calls the rules give.
    fn expected(&self) -> (String, Option<String>, Vec<(String, Value)>) {
        let mut content = String::new();
        let mut calls = Vec::new();
        for p in &self.parts {
            match p {
                Part::Text(t) | Part::Malformed(t) => content.push_str(t),
                Part::Call(c) => {
                    content.truncate(content.trim_end().len());
                    let args: Map<String, Value> = c
                        .args
                        .iter()
                        .map(|(k, v)| {
                            let want = match self.format {
                                ToolCallFormat::Xml => xml_expected(&c.name, k, v),
                                ToolCallFormat::Json => v.clone(),
                            };
                            (k.clone(), want)
                        })
                        .collect();
                    calls.push((c.name.clone(), Value::Object(args)));
                }
            }
        }
        let reasoning = self
            .think
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        (content.trim().to_string(), reasoning, calls)
    }

    fn malformed(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Malformed(_)))
            .count()
    }
}

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

fn soup_strategy() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "<function=f>",
        "<function=",
        "</function>",
        "<parameter=p>",
        "</parameter>",
        "{\"name\": \"f\", \"arguments\": {}}",
        "{\"name\": \"f\"",
        "}",
        "\n",
        " ",
        "x",
        "1",
        "<",
        ">",
        "/",
        "<tool",
        "</thi",
        "é",
        "<tool_call>\n<function=f>\n<parameter=p>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>{\"name\": \"g\", \"arguments\": {\"a\": [1]}}</tool_call>",
    ]);
    prop_oneof![
        prop::collection::vec(tokens, 0..40).prop_map(|t| t.concat()),
        ".{0,80}",
    ]
}

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
