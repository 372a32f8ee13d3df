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
