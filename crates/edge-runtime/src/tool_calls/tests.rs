//! Unit tests of the streaming parser and `parse_complete`.

use super::*;
use serde_json::json;

const XML: ToolCallFormat = ToolCallFormat::Xml;
const JSON: ToolCallFormat = ToolCallFormat::Json;

fn bash_tools() -> Value {
    json!([{"type": "function", "function": {
        "name": "bash",
        "description": "Run a bash command in the repository shell and return its output.",
        "parameters": {"type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to run"}},
            "required": ["command"]}
    }}])
}

/// Feeds `pieces` one by one; returns every delta (adjacent text of one kind merged)
/// and the warnings.
fn stream(
    format: ToolCallFormat,
    tools: Option<&Value>,
    pieces: &[&str],
    in_reasoning: bool,
) -> (Vec<Delta>, Vec<Warning>) {
    let mut p = ToolCallParser::new(format, tools, in_reasoning);
    let mut out = Vec::new();
    for piece in pieces {
        out.extend(p.push(piece));
    }
    let (rest, warnings) = p.finish();
    out.extend(rest);
    let mut merged: Vec<Delta> = Vec::new();
    for d in out {
        match (merged.last_mut(), d) {
            (Some(Delta::Content(a)), Delta::Content(b)) => a.push_str(&b),
            (Some(Delta::Reasoning(a)), Delta::Reasoning(b)) => a.push_str(&b),
            (_, d) => merged.push(d),
        }
    }
    (merged, warnings)
}

fn content(s: &str) -> Delta {
    Delta::Content(s.to_string())
}

#[test]
fn demo_model_output() {
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\ncd /testbed && ls src/datekit\n</parameter>\n</function>\n</tool_call>";
    let tools = bash_tools();
    let r = parse_complete(XML, Some(&tools), text, false);
    assert_eq!(r.content, "");
    assert_eq!(r.reasoning, None);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.tool_calls.len(), 1);
    let c = &r.tool_calls[0];
    assert_eq!(
        (c.index, c.id.as_str(), c.name.as_str()),
        (0, "call_0", "bash")
    );
    assert_eq!(
        Value::Object(c.arguments.clone()),
        json!({"command": "cd /testbed && ls src/datekit"})
    );
    assert_eq!(
        c.to_openai(),
        json!({"id": "call_0", "type": "function", "function": {"name": "bash",
            "arguments": "{\"command\":\"cd /testbed && ls src/datekit\"}"}})
    );
    assert_eq!(c.to_openai_delta()["index"], json!(0));
    let m = r.to_openai_message();
    assert_eq!(m["content"], Value::Null);
    assert!(m.get("reasoning_content").is_none());
}

#[test]
fn held_back_partial_tags() {
    let mut p = ToolCallParser::new(XML, None, false);
    assert_eq!(p.push("Hi <too"), vec![content("Hi")]);
    assert_eq!(p.push("l"), vec![]);
    assert_eq!(
        p.push("box> a < b <div>"),
        vec![content(" <toolbox> a < b <div>")]
    );
    assert_eq!(
        p.push("\n\n<tool_call>\n<function=f>\n</function>\n</tool"),
        vec![]
    );
    let d = p.push("_call>\nbye");
    assert!(matches!(&d[0], Delta::ToolCall(c) if c.name == "f"));
    assert_eq!(d[1], content("\nbye"));
    let (rest, w) = p.finish();
    assert!(rest.is_empty() && w.is_empty());
}

#[test]
fn reasoning_with_and_without_opening_tag() {
    let text = "<think>\nLet me see: a < b.\n</think>\n\nThe answer.";
    let r = parse_complete(XML, None, text, false);
    assert_eq!(r.reasoning.as_deref(), Some("Let me see: a < b."));
    assert_eq!(r.content, "The answer.");
    let r = parse_complete(XML, None, "Let me see.\n</think>\n\nThe answer.", true);
    assert_eq!(r.reasoning.as_deref(), Some("Let me see."));
    assert_eq!(r.content, "The answer.");
    // Thinking off: an empty think block gives no reasoning.
    let r = parse_complete(XML, None, "<think>\n\n</think>\n\nHi", false);
    assert_eq!((r.reasoning, r.content.as_str()), (None, "Hi"));
    // `</think>` split over deltas, and the partial `<think>` at the start.
    let (d, w) = stream(
        XML,
        None,
        &["\n<th", "ink>\nR </th", "inx </", "think>\nC"],
        false,
    );
    assert_eq!(d, vec![Delta::Reasoning("R </thinx".into()), content("C")]);
    assert!(w.is_empty());
    // Later think tags are plain content; `<tool_call>` inside reasoning is reasoning.
    let r = parse_complete(XML, None, "<think><tool_call>x</think>a <think> b", false);
    assert_eq!(r.reasoning.as_deref(), Some("<tool_call>x"));
    assert_eq!(r.content, "a <think> b");
    assert!(r.tool_calls.is_empty());
    // Ending inside the reasoning.
    let r = parse_complete(XML, None, "still thinking </thi", true);
    assert_eq!(r.reasoning.as_deref(), Some("still thinking </thi"));
    assert_eq!(r.warnings[0].kind, WarningKind::UnclosedReasoning);
}

#[test]
fn content_before_and_between_calls() {
    let text = "Let me look.\n\n<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=bash>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>\n";
    let tools = bash_tools();
    let r = parse_complete(XML, Some(&tools), text, false);
    assert_eq!(r.content, "Let me look.");
    let ids: Vec<_> = r.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["call_0", "call_1"]);
    assert_eq!(r.tool_calls[1].arguments["command"], json!("pwd"));
    let (d, _) = stream(XML, Some(&tools), &[text], false);
    assert_eq!(d.len(), 3);
}

#[test]
fn json_form() {
    let text = "<think>\nok\n</think>\n\n<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
    let r = parse_complete(JSON, None, text, false);
    assert_eq!(r.reasoning.as_deref(), Some("ok"));
    assert_eq!(r.content, "");
    assert_eq!(
        Value::Object(r.tool_calls[0].arguments.clone()),
        json!({"city": "Paris", "days": 3})
    );
    assert!(r.warnings.is_empty());
}

#[test]
fn malformed_calls_come_back_as_text() {
    for (text, want) in [
        (
            "a\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\n</tool_call> b",
            None,
        ),
        (
            "<tool_call>\n<parameter=x>\n1\n</parameter>\n</tool_call>",
            None,
        ),
        (
            "<tool_call>\n<function=f>\njunk\n</function>\n</tool_call>",
            None,
        ),
        (
            "x <tool_call>\n<function=f>\n<parameter=a>\n1\n",
            Some("x <tool_call>\n<function=f>\n<parameter=a>\n1"),
        ),
    ] {
        let r = parse_complete(XML, None, text, false);
        assert!(r.tool_calls.is_empty(), "{text:?}");
        assert_eq!(r.content, want.unwrap_or(text), "{text:?}");
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].kind, WarningKind::MalformedCall);
        assert_eq!(r.warnings[0].call, None);
    }
    let r = parse_complete(
        JSON,
        None,
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {]}\n</tool_call>",
        false,
    );
    assert!(r.tool_calls.is_empty());
    assert_eq!(r.warnings[0].kind, WarningKind::MalformedCall);
}

#[test]
fn an_unclosed_call_does_not_swallow_the_next() {
    let text = "<tool_call>\n<function=f>\n</function>\n<tool_call>\n<function=g>\n</function>\n</tool_call>";
    let r = parse_complete(XML, None, text, false);
    assert_eq!(r.content, "<tool_call>\n<function=f>\n</function>");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(
        (r.tool_calls[0].name.as_str(), r.tool_calls[0].index),
        ("g", 0)
    );
    assert_eq!(r.warnings[0].kind, WarningKind::MalformedCall);
}

#[test]
fn warnings_name_their_call() {
    let tools = bash_tools();
    let text = "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call><tool_call>\n<function=python>\n<parameter=code>\n1\n</parameter>\n</function>\n</tool_call>";
    let r = parse_complete(XML, Some(&tools), text, false);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.tool_calls[1].arguments["code"], json!(1));
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(
        (r.warnings[0].kind, r.warnings[0].call),
        (WarningKind::UnknownFunction, Some(1))
    );
    assert!(r.warnings[0].to_string().contains("python"));
}

#[test]
fn id_prefix_and_no_calls() {
    let mut p = ToolCallParser::new(XML, None, false).with_id_prefix("call_r7_");
    let d = p.push("<tool_call><function=f></function></tool_call>");
    assert!(matches!(&d[0], Delta::ToolCall(c) if c.id == "call_r7_0"));
    let r = parse_complete(
        XML,
        None,
        "  Just an answer, no tools: x<y, <b>ok</b>.\n",
        false,
    );
    assert_eq!(r.content, "Just an answer, no tools: x<y, <b>ok</b>.");
    assert!(r.tool_calls.is_empty() && r.warnings.is_empty());
    assert_eq!(parse_complete(XML, None, "", false), ParsedReply::default());
}

#[test]
fn prompt_reasoning_detection() {
    assert!(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    assert!(!prompt_opens_reasoning(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    ));
    assert!(!prompt_opens_reasoning("<|im_start|>assistant\n"));
}
