//! Generators of replies for the property tests: text with tag fragments, calls of
//! every schema type in either form, malformed calls, and arbitrary tag soup.

use edge_runtime::tool_calls::ToolCallFormat;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Strings that start a tag; generated content and reasoning never contain them.
pub const TAGS: [&str; 8] = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "<function=",
    "<parameter=",
    "</parameter>",
    "</function>",
];

/// `text` cut at the char boundaries nearest to `cuts` (fractions of its length).
pub fn split_at<'a>(text: &'a str, cuts: &[f64]) -> Vec<&'a str> {
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

/// Removes every tag from `text` (by dropping tags' last characters until none is left).
pub fn sanitize(mut text: String) -> String {
    while let Some((at, tag)) = TAGS.iter().find_map(|t| text.find(t).map(|at| (at, *t))) {
        text.remove(at + tag.len() - 1);
    }
    text
}

pub fn schema_tools() -> Value {
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
pub fn text_strategy(max: usize) -> impl Strategy<Value = String> {
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

pub fn leaf_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        (-400i32..400).prop_map(|n| Value::from(f64::from(n) / 8.0)),
        text_strategy(4).prop_map(Value::from),
    ]
}

pub fn json_strategy() -> impl Strategy<Value = Value> {
    leaf_strategy().prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec(("[a-z]{1,3}", inner), 0..3)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A value for parameter `param` of `function`, fitting its schema type.
pub fn value_for(function: &str, param: &str) -> BoxedStrategy<Value> {
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
pub fn xml_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What the parser should make of `v` written in an XML call.
pub fn xml_expected(function: &str, param: &str, v: &Value) -> Value {
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
pub struct GenCall {
    pub name: String,
    pub args: Vec<(String, Value)>,
}

#[derive(Clone, Debug)]
pub enum Part {
    Text(String),
    Call(GenCall),
    /// Text of a malformed call, as the model wrote it.
    Malformed(String),
}

pub fn call_strategy() -> impl Strategy<Value = GenCall> {
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

pub fn render_call(format: ToolCallFormat, c: &GenCall) -> String {
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

pub fn malformed_strategy(format: ToolCallFormat) -> impl Strategy<Value = String> {
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
pub struct GenReply {
    pub format: ToolCallFormat,
    pub in_reasoning: bool,
    pub think: Option<String>,
    pub parts: Vec<Part>,
}

pub fn reply_strategy() -> impl Strategy<Value = GenReply> {
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
    pub fn text(&self) -> String {
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
    pub fn expected(&self) -> (String, Option<String>, Vec<(String, Value)>) {
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

    pub fn malformed(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Malformed(_)))
            .count()
    }
}

pub fn soup_strategy() -> impl Strategy<Value = String> {
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
