//! The demo model's chat template rendered by edge-runtime equals transformers'
//! `apply_chat_template` output (cases made by
//! `tools/reference/make_chat_template_cases.py`).

use edge_runtime::ChatTemplate;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn demo_template_matches_transformers() {
    let cfg = std::fs::read_to_string(root().join("models/demo/tokenizer_config.json")).unwrap();
    let t = ChatTemplate::from_tokenizer_config(&cfg).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/chat-template/cases.json")).unwrap(),
    )
    .unwrap();
    assert!(cases.len() >= 10);
    for (i, c) in cases.iter().enumerate() {
        let tools = c.get("tools").filter(|t| !t.is_null());
        let gen_prompt = c
            .get("add_generation_prompt")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let think = c["enable_thinking"].as_bool().unwrap_or(true);
        let got = t.render(&c["messages"], tools, gen_prompt, think).unwrap();
        let want = c["expected"].as_str().unwrap();
        if got != want {
            let at = got
                .chars()
                .zip(want.chars())
                .take_while(|(a, b)| a == b)
                .count();
            let ctx: String = want.chars().skip(at.saturating_sub(40)).take(80).collect();
            let got_ctx: String = got.chars().skip(at.saturating_sub(40)).take(80).collect();
            panic!("case {i}: first difference at char {at}\nwant …{ctx:?}\ngot  …{got_ctx:?}");
        }
    }
}

/// Tool-call arguments in the OpenAI wire form (a JSON string) render exactly as the
/// object form transformers was given; arguments that are not a JSON object are errors
/// naming the call.
#[test]
fn string_arguments_render_as_objects() {
    let cfg = std::fs::read_to_string(root().join("models/demo/tokenizer_config.json")).unwrap();
    let t = ChatTemplate::from_tokenizer_config(&cfg).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/chat-template/cases.json")).unwrap(),
    )
    .unwrap();
    let mut converted = 0;
    for c in &cases {
        let mut messages = c["messages"].clone();
        for m in messages.as_array_mut().unwrap() {
            for call in m["tool_calls"].as_array_mut().into_iter().flatten() {
                let args = call["function"]["arguments"].to_string();
                call["function"]["arguments"] = serde_json::Value::String(args);
                converted += 1;
            }
        }
        let tools = c.get("tools").filter(|t| !t.is_null());
        let gen_prompt = c["add_generation_prompt"].as_bool().unwrap_or(false);
        let think = c["enable_thinking"].as_bool().unwrap_or(true);
        let got = t.render(&messages, tools, gen_prompt, think).unwrap();
        assert_eq!(got, c["expected"].as_str().unwrap());
    }
    assert!(converted > 0, "the cases have tool calls");
    for bad in ["{not json", "[1, 2]"] {
        let messages = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": bad}}
            ]}
        ]);
        let err = t
            .render(&messages, None, false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("messages[1].tool_calls[0]"), "{err}");
    }
}
