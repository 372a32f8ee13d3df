//! A server started with constrained tool calls: a required or named `tool_choice`
//! gets a call of an offered function with arguments that meet its schema, even from
//! the demo model, which never saw these tools.

use super::support::*;
use serde_json::{Value, json};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "convert_currency", "parameters": {
            "type": "object", "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string"},
                "to_currency": {"type": "string"}
            }, "required": ["amount", "from_currency", "to_currency"]}}},
        {"type": "function", "function": {"name": "get_forecast", "parameters": {
            "type": "object", "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"}
            }, "required": ["city", "days"]}}}
    ])
}

/// The reply's one call: its name and parsed arguments.
fn only_call(v: &Value) -> (String, Value) {
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{v}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert!(!calls.is_empty(), "{v}");
    let f = &calls[0]["function"];
    let args = serde_json::from_str(f["arguments"].as_str().unwrap()).unwrap();
    (f["name"].as_str().unwrap().to_string(), args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_and_named_tool_choices_get_schema_valid_calls() {
    let base = start_constrained().await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let ask = |choice: Value| {
        json!({"model": "demo", "messages": [user("Hello! Who are you?")],
               "tools": tools(), "tool_choice": choice, "max_tokens": 400, "temperature": 0})
    };
    let (status, v) = post(&client, &url, ask(json!("required"))).await;
    assert_eq!(status, 200, "{v}");
    let (name, args) = only_call(&v);
    match name.as_str() {
        "convert_currency" => {
            assert!(args["amount"].is_number(), "{args}");
            assert!(args["from_currency"].is_string() && args["to_currency"].is_string());
        }
        "get_forecast" => assert!(args["city"].is_string() && args["days"].is_i64(), "{args}"),
        other => panic!("called {other}"),
    }
    let named = json!({"type": "function", "function": {"name": "get_forecast"}});
    let (status, v) = post(&client, &url, ask(named)).await;
    assert_eq!(status, 200, "{v}");
    let (name, args) = only_call(&v);
    assert_eq!(name, "get_forecast");
    assert!(args["city"].is_string() && args["days"].is_i64(), "{args}");
    let keys: Vec<&String> = args.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 2, "{args}");
}

/// A streamed reply's chunks merged as an OpenAI client merges them: texts
/// concatenated, tool-call deltas by `index` (the first brings id, type and name, the
/// rest append `arguments`). Returns the message, the finish reason and how many
/// chunks carried arguments text for call 0.
fn merge_chunks(records: &[Value]) -> (Value, Value, usize) {
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut calls: Vec<Value> = Vec::new();
    let (mut finish, mut fragments) = (Value::Null, 0);
    for r in records.iter().filter(|r| r.get("choices").is_some()) {
        let Some(choice) = r["choices"].get(0) else {
            continue; // the usage record
        };
        let d = &choice["delta"];
        content.push_str(d["content"].as_str().unwrap_or(""));
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or(""));
        for c in d["tool_calls"].as_array().into_iter().flatten() {
            let i = c["index"].as_u64().expect("an index") as usize;
            let args = c["function"]["arguments"].as_str().expect("arguments text");
            if i == calls.len() {
                assert!(c["id"].is_string() && c["type"] == "function", "{c}");
                assert!(c["function"]["name"].is_string(), "{c}");
                calls.push(json!({"id": c["id"], "type": "function",
                    "function": {"name": c["function"]["name"], "arguments": ""}}));
            }
            let merged = &mut calls[i]["function"]["arguments"];
            *merged = json!(format!("{}{args}", merged.as_str().unwrap()));
            fragments += usize::from(i == 0 && !args.is_empty());
        }
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
    }
    let mut message = json!({"role": "assistant", "content": content});
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    (message, finish, fragments)
}

/// Constrained calls are streamed as they are written (the head first, then the
/// arguments in pieces), and the merged stream is the non-streamed message, also when
/// the token limit cuts the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_calls_merge_to_the_whole_message() {
    let base = start_constrained().await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let ask = |max_tokens: u64, stream: bool| {
        json!({"model": "demo", "messages": [user("What will the weather be in Oslo?")],
               "tools": tools(), "tool_choice": "required", "max_tokens": max_tokens,
               "temperature": 0, "stream": stream})
    };
    let (status, whole) = post(&client, &url, ask(400, false)).await;
    assert_eq!(status, 200, "{whole}");
    only_call(&whole);
    let (records, done) = post_sse(&client, &url, &ask(400, true)).await;
    assert!(done);
    let (message, finish, fragments) = merge_chunks(&records);
    assert_eq!(message, whole["choices"][0]["message"]);
    assert_eq!(finish, "tool_calls");
    assert!(
        fragments > 1,
        "the arguments came in one piece: {records:?}"
    );
    // Cut a few tokens before the call's end: a call with the values written so far.
    let used = whole["usage"]["completion_tokens"].as_u64().unwrap();
    let (_, cut) = post(&client, &url, ask(used - 4, false)).await;
    let choice = &cut["choices"][0];
    assert_eq!(choice["finish_reason"], "length", "{cut}");
    let args = choice["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .expect("a call");
    assert!(serde_json::from_str::<Value>(args).unwrap().is_object());
    let (records, _) = post_sse(&client, &url, &ask(used - 4, true)).await;
    let (message, finish, _) = merge_chunks(&records);
    assert_eq!(message, choice["message"]);
    assert_eq!(finish, "length");
}
