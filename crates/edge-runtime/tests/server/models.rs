//! Model names: a request may name the served model or one of its aliases (or none);
//! any other name is 404 `model_not_found`, on both endpoints.

use super::support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_models_are_404_and_aliases_are_served() {
    let base = start_with(|s| s.with_aliases(["Qwen3.6-27B-Q4_K_M"])).await;
    let client = reqwest::Client::new();
    let chat = format!("{base}/v1/chat/completions");
    let completions = format!("{base}/v1/completions");
    for model in [json!("demo"), json!("Qwen3.6-27B-Q4_K_M"), Value::Null] {
        let body = json!({"model": model, "messages": [user("hi")], "max_tokens": 2});
        let (status, v) = post(&client, &chat, body).await;
        assert_eq!(status, 200, "{model}: {v}");
    }
    let (status, v) = post(
        &client,
        &chat,
        json!({"model": "gpt-4o", "messages": [user("hi")], "max_tokens": 2}),
    )
    .await;
    assert_error(status, &v, 404);
    assert_eq!(v["error"]["code"], "model_not_found", "{v}");
    assert_eq!(v["error"]["param"], "model", "{v}");
    let (status, v) = post(
        &client,
        &completions,
        json!({"model": "other", "prompt": "hi", "max_tokens": 2}),
    )
    .await;
    assert_error(status, &v, 404);
    let (status, v) = post(
        &client,
        &completions,
        json!({"model": 7, "prompt": "hi", "max_tokens": 2}),
    )
    .await;
    assert_error(status, &v, 400);
    let models: Value = (client
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap())
    .json()
    .await
    .unwrap();
    let ids: Vec<&str> = (models["data"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["demo", "Qwen3.6-27B-Q4_K_M"]);
}
