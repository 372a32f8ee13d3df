use super::*;
use crate::tool_calls::{ToolCallFormat, WarningKind, parse_complete};
use edge_core::rng::SeededRng;
use serde_json::json;
use std::sync::Arc;

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "convert_currency", "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string"},
                "to_currency": {"type": "string"},
                "round": {"type": "integer"},
                "strict": {"type": "boolean"},
                "mode": {"type": "string", "enum": ["fast", "exact", "fair"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "object"},
                "limit": {"type": ["integer", "null"]}
            },
            "required": ["amount", "from_currency", "to_currency"]
        }}},
        {"type": "function", "function": {"name": "convert_units", "parameters": {
            "type": "object", "properties": {"value": {"type": "number"}}, "required": []
        }}},
        {"type": "function", "function": {"name": "ping"}},
        {"type": "function", "function": {"name": "plan", "parameters": {
            "type": "object",
            "properties": {
                "rules": {"type": "array", "items": {"type": "object", "properties": {
                    "label": {"type": "string"},
                    "paid": {"type": "boolean"},
                    "tip": {"type": "number"},
                    "level": {"type": "string", "enum": ["low", "high"]}
                }, "required": ["label"]}},
                "address": {"type": "object", "properties": {
                    "street": {"type": "string"},
                    "zip": {"type": "integer"},
                    "geo": {"type": "array", "items": {"type": ["number", "null"]}}
                }, "required": ["street"], "additionalProperties": false},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "sizes": {"type": "array", "items": {"enum": [1, 10, "x"]}}
            },
            "required": []
        }}}
    ])
}

fn grammar() -> ToolCallGrammar {
    ToolCallGrammar::new(&tools()).unwrap()
}

fn call(name: &str, params: &[(&str, &str)]) -> String {
    let mut s = format!("<tool_call>\n<function={name}>\n");
    for (k, v) in params {
        s.push_str(&format!("<parameter={k}>\n{v}\n</parameter>\n"));
    }
    s + "</function>\n</tool_call>"
}

/// Accepted, and back outside a call at the end.
fn accepts(g: &ToolCallGrammar, text: &str) -> bool {
    g.accept(g.start(false, false), text.as_bytes())
        .is_some_and(|s| !s.in_call())
}

const REQUIRED: [(&str, &str); 3] = [
    ("amount", "20"),
    ("from_currency", "EUR"),
    ("to_currency", "JPY"),
];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    REQUIRED.iter().chain(extra).copied().collect()
}

#[test]
fn accepts_calls_of_every_value_type() {
    let g = grammar();
    let all = with(&[
        ("round", "-12"),
        ("strict", "true"),
        ("mode", "fair"),
        ("tags", r#"["a", "b\"c", "\u00e9"]"#),
        (
            "options",
            "{\"x\": [1, 2.5e-3, {\"y\": null}], \"z\": false}",
        ),
        ("limit", "null"),
        ("amount", "0.5"),
    ]);
    // `amount` twice is caught below; here a call without the repeat.
    let once: Vec<_> = all[1..].to_vec();
    assert!(accepts(&g, &call("convert_currency", &once)));
    assert!(accepts(&g, &call("convert_currency", &REQUIRED)));
    assert!(accepts(&g, &call("convert_units", &[])));
    assert!(accepts(&g, &call("ping", &[("anything", "at all")])));
    // Free text around calls, parallel calls, and a call-free reply.
    let two = format!(
        "Sure.\n{}\n{}",
        call("convert_units", &[("value", "3")]),
        call("ping", &[])
    );
    assert!(accepts(&g, &two));
    assert!(accepts(&g, "No tool needed <toolbox> </tool_call> here."));
    // An empty string value, and one holding tags of other kinds.
    let odd = with(&[("mode", "exact")]);
    let mut odd: Vec<_> = odd.into_iter().filter(|p| p.0 != "from_currency").collect();
    odd.push(("from_currency", ""));
    assert!(accepts(&g, &call("convert_currency", &odd)));
    let tagged = [
        ("amount", "1"),
        ("from_currency", "<b>x</b>\n</function>"),
        ("to_currency", "y"),
    ];
    assert!(accepts(&g, &call("convert_currency", &tagged)));
}

#[test]
fn nested_schemas_are_followed() {
    let g = grammar();
    let good = [
        (
            "rules",
            r#"[{"label": "q3", "paid": false, "tip": 8.5}, {"level":"low","label":"x"}]"#,
        ),
        ("rules", "[]"),
        (
            "address",
            r#"{"zip": 12345, "street": "Oak \"7\"", "geo": [1.5, null, -2]}"#,
        ),
        ("ids", "[1, 2, -30]"),
        ("sizes", r#"[10, 1, "x"]"#),
    ];
    for (k, v) in good {
        let text = call("plan", &[(k, v)]);
        assert!(accepts(&g, &text), "rejected:\n{text}");
    }
    let bad = [
        ("rules", r#"[{"paid": false}]"#), // a required key missing
        ("rules", r#"[{"label": "a", "label": "b"}]"#), // a key twice
        ("rules", r#"[{"label": "a", "colour": 1}]"#), // an undeclared key
        ("rules", r#"["a"]"#),             // items must be objects
        ("rules", r#"[{"label": 5}]"#),
        ("rules", r#"[{"label": "a", "level": "mid"}]"#),
        ("address", "{}"),
        ("address", r#"{"street": "a", "zip": "10"}"#),
        ("address", r#"{"street": "a", "geo": [true]}"#),
        ("ids", "[1.5]"),
        ("ids", r#"["1"]"#),
        ("sizes", "[100]"),
        ("sizes", r#"["y"]"#),
    ];
    for (k, v) in bad {
        let text = call("plan", &[(k, v)]);
        assert!(!accepts(&g, &text), "accepted:\n{text}");
    }
}

#[test]
fn rejects_what_the_schema_forbids() {
    let g = grammar();
    // One extra argument of convert_currency (beside the required ones) each.
    let bad_extra = [
        ("amount", "3"),   // repeated parameter
        ("colour", "red"), // undeclared parameter
        ("amount2", "1e999"),
        ("round", "5.5"),
        ("round", "05"),
        ("round", "-0"),
        ("round", "1234567890123456789"),
        ("strict", "yes"),
        ("strict", "True"),
        ("mode", "slow"),
        ("mode", "fas"),
        ("tags", "a, b"),
        ("tags", "[1,]"),
        ("tags", "[1] "),
        ("tags", "[\"<tool_call>\"]"),
        ("tags", "[\"</parameter>\"]"),
        ("options", "[]"),
        ("options", "{\"a\" 1}"),
        ("options", "{\"a\": \"\u{1}\"}"),
        ("limit", "nul"),
        ("limit", "1.5"),
    ];
    let mut bad: Vec<String> = (bad_extra.iter())
        .map(|&p| call("convert_currency", &with(&[p])))
        .collect();
    bad.push(call("convert_money", &REQUIRED)); // unknown function
    bad.push(call("convert_currency", &REQUIRED[..2])); // a required one missing
    for value in ["1e999", "abc", "1.", "x </tool_call>"] {
        bad.push(call("convert_units", &[("value", value)]));
    }
    for text in &bad {
        assert!(!accepts(&g, text), "accepted:\n{text}");
    }
    // A string value may not hold a call's tags, nor close without the format's `\n`.
    for value in ["a <tool_call> b", "a </tool_call> b"] {
        let text = call("ping", &[("x", value)]);
        assert!(!accepts(&g, &text), "accepted:\n{text}");
    }
    let glued = "<tool_call>\n<function=ping>\n<parameter=x>\nv</parameter>\n";
    assert!(g.accept(g.start(false, false), glued.as_bytes()).is_none());
    // Whitespace outside the canonical format.
    assert!(
        g.accept(g.start(false, false), b"<tool_call> <function=ping>")
            .is_none()
    );
}

#[test]
fn reasoning_is_free_and_the_call_open_is_tracked() {
    let g = grammar();
    let s = g
        .accept(
            g.start(true, false),
            b"I could write <tool_call>\n<function=nope> here",
        )
        .unwrap();
    assert!(!s.in_call());
    let s = g.accept(s, b"</think>\n\n<tool_call>").unwrap();
    assert!(s.in_call());
    // A reply that opens its own reasoning.
    let s = g
        .accept(g.start(false, false), b" <think>\n<tool_call>\n")
        .unwrap();
    assert!(!s.in_call());
    // Later, as for the parser, `<think>` is plain text and a call is a call.
    let s = g
        .accept(g.start(false, false), b"Sure. <think> <tool_call>")
        .unwrap();
    assert!(s.in_call());
    // A call cannot end before its required parameters; it can after them.
    let head = "<tool_call>\n<function=convert_currency>\n";
    let s = g.accept(g.start(false, false), head.as_bytes()).unwrap();
    assert!(g.accept(s, b"</function>").is_none());
    assert!(s.in_call());
    // A required call: only whitespace before it, and free text after it.
    assert!(g.accept(g.start(false, true), b"Sure").is_none());
    let s = g.accept(g.start(false, true), b"\n\n<tool_call>").unwrap();
    assert!(s.in_call());
    let after = format!("{}\nDone.", call("ping", &[]));
    let s = g.accept(g.start(false, true), after.as_bytes()).unwrap();
    assert!(!s.in_call());
    let s = g
        .accept(g.start(true, true), b"let me think</think>")
        .unwrap();
    assert!(s.in_call());
    assert!(g.accept(s, b"\n\nSure").is_none());
    assert_eq!(
        g.clone()
            .only("ping")
            .unwrap()
            .function_names()
            .collect::<Vec<_>>(),
        ["ping"]
    );
    assert!(matches!(
        g.clone().only("pong"),
        Err(crate::RuntimeError::UnknownTool { .. })
    ));
    assert!(matches!(
        ToolCallGrammar::new(&json!([])),
        Err(crate::RuntimeError::NoToolFunctions)
    ));
    assert!(matches!(
        ToolCallGrammar::new(&json!({"name": "x"})),
        Err(crate::RuntimeError::ToolsNotArray)
    ));
}

/// Whether `v` meets `schema` (the parts the grammar follows: types, enums, items,
/// properties, required, additionalProperties).
fn meets(v: &Value, schema: &Value) -> bool {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.contains(v);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    let typed = types.iter().any(|t| match *t {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => true,
    });
    let items_ok = match (v.as_array(), schema.get("items")) {
        (Some(items), Some(s)) => items.iter().all(|i| meets(i, s)),
        _ => true,
    };
    let props_ok = match (v.as_object(), schema.get("properties")) {
        (Some(o), Some(props)) => {
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            o.iter()
                .all(|(k, x)| props.get(k).is_some_and(|s| meets(x, s)))
                && required
                    .iter()
                    .all(|r| r.as_str().is_some_and(|r| o.contains_key(r)))
        }
        _ => true,
    };
    typed && items_ok && props_ok
}

/// Random replies drawn from the grammar alone (each step a random allowed piece of a
/// small vocabulary) always parse into calls that meet the schema.
#[test]
fn random_replies_the_grammar_allows_parse_cleanly() {
    let g = grammar();
    let tools = tools();
    let mut pieces: Vec<String> = [
        "<tool_call>",
        "\n",
        "<function=",
        "</function>",
        "</tool_call>",
    ]
    .iter()
    .chain(&[
        "<parameter=",
        "</parameter>",
        "\n</parameter>\n",
        ">",
        "[",
        "]",
        "{",
        "}",
    ])
    .chain(&[
        "\"", ",", ":", " ", "-", ".", "e", "true", "false", "null", "x", "é",
    ])
    .map(|s| s.to_string())
    .collect();
    pieces.extend((0..10).map(|d| d.to_string()));
    pieces.extend(g.function_names().map(str::to_string));
    for f in &g.functions {
        for p in f.params.iter().flatten() {
            pieces.push(String::from_utf8(p.name.clone()).unwrap());
        }
    }
    pieces.extend(["fast", "exact", "fair", "hello", "low", "high", "\"x\""].map(String::from));
    let keys = ["label", "paid", "tip", "level", "street", "zip", "geo"];
    pieces.extend(keys.map(|k| format!("\"{k}\"")));
    let long = pieces.len();
    // Every printable ASCII byte, so the walk cannot be stuck for want of a piece.
    pieces.extend(
        (b' '..=b'~')
            .chain([b'\n'])
            .map(|b| (b as char).to_string()),
    );
    // Seeded, so the walk is the same on every run.
    let mut rng = SeededRng::from_seed(1);
    let mut finished = 0;
    for _ in 0..400 {
        let mut text = String::from("ok ");
        let mut state = g.accept(g.start(false, false), b"ok <tool_call>").unwrap();
        text.push_str("<tool_call>");
        for _ in 0..300 {
            let allowed: Vec<&String> = (pieces.iter())
                .filter(|p| g.accept(state, p.as_bytes()).is_some())
                .collect();
            assert!(!allowed.is_empty(), "stuck after {text:?}");
            // Mostly the longer pieces, so most walks close their call.
            let long: Vec<&String> = (allowed.iter().copied())
                .filter(|p| pieces[..long].contains(p))
                .collect();
            let piece = match long.is_empty() || rng.below(4) == 0 {
                true => allowed[rng.below(allowed.len())],
                false => long[rng.below(long.len())],
            };
            state = g.accept(state, piece.as_bytes()).unwrap();
            text.push_str(piece);
            if !state.in_call() {
                break;
            }
        }
        if state.in_call() {
            continue;
        }
        finished += 1;
        let reply = parse_complete(ToolCallFormat::Xml, Some(&tools), &text, false);
        assert_eq!(reply.tool_calls.len(), 1, "{text:?}: {reply:?}");
        let serious: Vec<_> = (reply.warnings.iter())
            .filter(|w| w.kind != WarningKind::FormatMismatch)
            .collect();
        assert!(serious.is_empty(), "{text:?}: {serious:?}");
        let c = &reply.tool_calls[0];
        let tool = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == c.name);
        let params = &tool.unwrap()["function"]["parameters"];
        assert!(
            meets(&Value::Object(c.arguments.clone()), params),
            "{text:?}: {c:?}"
        );
    }
    assert!(finished > 100, "only {finished} walks closed their call");
}

#[test]
fn the_token_mask_follows_the_grammar() {
    let g = Arc::new(grammar());
    let words = [
        "<tool_call>",
        "\n",
        "<function=",
        "ping",
        "convert",
        "_units",
        ">",
        "<|im_end|>",
    ];
    let vocab = Arc::new(TokenBytes::new(words));
    assert_eq!(vocab.get(3), Some(&b"ping"[..]));
    assert_eq!(vocab.get(8), None);
    let c = ToolConstraint::new(g, vocab, false);
    let stop = [7];
    // Outside a call every token, a stop token too, is allowed.
    let mut logits = vec![0.0; 9];
    assert_eq!(c.mask(c.start(), &mut logits, &stop), 9);
    let s = c.accept(c.start(), 0, &stop).unwrap();
    let s = c.accept(s, 1, &stop).unwrap();
    let s = c.accept(s, 2, &stop).unwrap();
    // After `<function=`: a name's start, but not the stop token nor ids past the vocabulary.
    let mut logits = vec![0.0; 9];
    assert_eq!(c.mask(s, &mut logits, &stop), 2);
    let kept: Vec<usize> = (0..9).filter(|&i| logits[i] == 0.0).collect();
    assert_eq!(kept, [3, 4]);
}

/// The fast mask (first-byte buckets, plain tokens in strings) allows exactly the
/// tokens that trying each one allows, in every state along calls of each kind.
#[test]
fn the_fast_mask_equals_trying_every_token() {
    let g = Arc::new(grammar());
    let mut rng = SeededRng::from_seed(2);
    let alphabet = b"ab<>/\"\\\n :,{}[]0123456789-.etrufalsnpiy_=";
    let mut words: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"<tool_call>".to_vec(),
        b"\n</parameter>\n".to_vec(),
    ];
    words.extend(
        [
            "</function>\n</tool_call>",
            "\"label\"",
            "true",
            "plan",
            "convert",
            "<|im_end|>",
        ]
        .map(|w| w.as_bytes().to_vec()),
    );
    for _ in 0..600 {
        let len = 1 + rng.below(4);
        words.push(
            (0..len)
                .map(|_| alphabet[rng.below(alphabet.len())])
                .collect(),
        );
    }
    let n = words.len();
    let vocab = Arc::new(TokenBytes::new(&words));
    let free = ToolConstraint::new(g.clone(), vocab.clone(), false);
    let thinking = ToolConstraint::new(g.clone(), vocab, true);
    let stops = [9];
    let currency = call(
        "convert_currency",
        &with(&[
            ("tags", r#"["a\"b", "c"]"#),
            ("options", r#"{"k": [1, {"x": "y"}]}"#),
        ]),
    );
    let plan = call(
        "plan",
        &[
            ("rules", r#"[{"label": "q", "tip": 1.5}]"#),
            ("address", r#"{"street": "s <b>"}"#),
        ],
    );
    let ping = call("ping", &[("free", "some\ntext")]);
    // Outside calls, inside them, and in the reasoning.
    let calls = [
        (&free, format!("Hi <b> {currency} done")),
        (&free, plan),
        (&thinking, format!("a <tool_call> b</think>\n\n{ping}")),
    ];
    let mut checked = 0;
    for (c, text) in &calls {
        let mut s = c.start();
        for &b in text.as_bytes() {
            s = g.accept(s, &[b]).unwrap();
            // One more id than the vocabulary: ids past it are allowed outside calls only.
            let mut fast = vec![0.5f32; n + 1];
            let allowed = c.mask(s, &mut fast, &stops);
            let slow: Vec<bool> = (0..=n as u32)
                .map(|id| c.accept(s, id, &stops).is_some())
                .collect();
            let got: Vec<bool> = fast.iter().map(|&l| l == 0.5).collect();
            assert_eq!(got, slow, "state {s:?}");
            assert_eq!(allowed, slow.iter().filter(|&&a| a).count());
            checked += 1;
        }
    }
    assert!(checked > 200);
}

/// Only templates that write XML calls (or do not say) can be constrained.
#[test]
fn json_call_templates_are_refused() {
    let json_calls = r#"{%- for m in messages %}<tool_call>
{"name": "{{ m.name }}", "arguments": {{ m.arguments | tojson }}}</tool_call>{%- endfor %}"#;
    let xml_calls = "{%- for m in messages %}<tool_call>\n<function={{ m.name }}>{%- endfor %}";
    let refused = check_constrainable(&crate::ChatTemplate::new(json_calls).unwrap());
    assert!(refused.unwrap_err().to_string().contains("JSON calls"));
    assert!(check_constrainable(&crate::ChatTemplate::new(xml_calls).unwrap()).is_ok());
    assert!(check_constrainable(&crate::ChatTemplate::new("{{ messages }}").unwrap()).is_ok());
}
