//! `logprobs` over HTTP: chat's and text completions' shapes, streamed and not, and
//! their errors.

use crate::support::*;
use serde_json::{Value, json};

/// Checks one chat entry: a log-probability, `bytes` that spell the token, and `top`
/// alternatives, most likely first, led by the chosen token (greedy decoding).
fn check_chat_entry(e: &Value, top: usize) {
    let token = e["token"].as_str().unwrap();
    let bytes: Vec<u8> = serde_json::from_value(e["bytes"].clone()).unwrap();
    assert_eq!(bytes, token.as_bytes());
    let lp = e["logprob"].as_f64().unwrap();
    assert!(lp <= 0.0, "{e}");
    let alts = e["top_logprobs"].as_array().unwrap();
    assert_eq!(alts.len(), top, "{e}");
    let values: Vec<f64> = alts
        .iter()
        .map(|a| a["logprob"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "{e}");
    assert!(values.iter().map(|v| v.exp()).sum::<f64>() <= 1.0 + 1e-4);
    assert!(
        (values[0] - lp).abs() < 1e-5,
        "greedy picks the most likely: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_logprobs_streamed_and_not_agree() {
    let base = start(16, 2, None).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let body = json!({
        "model": "demo", "temperature": 0, "max_tokens": 12,
        "logprobs": true, "top_logprobs": 3,
        "messages": [user("List the files in this directory.")],
    });
    let (status, whole) = post(&client, &url, body.clone()).await;
    assert_eq!(status, 200, "{whole}");
    let entries = whole["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap()
        .clone();
    let generated = whole["usage"]["completion_tokens"].as_u64().unwrap() as usize;
    // The end-of-turn token has no text, so it has no entry.
    let finished_by_eos = whole["choices"][0]["finish_reason"] != "length";
    assert_eq!(entries.len() + usize::from(finished_by_eos), generated);
    for e in &entries {
        check_chat_entry(e, 3);
    }

    let mut streamed_body = body;
    streamed_body["stream"] = json!(true);
    let (records, done) = post_sse(&client, &url, &streamed_body).await;
    assert!(done);
    let streamed: Vec<Value> = records
        .iter()
        .filter_map(|r| r["choices"][0]["logprobs"]["content"].as_array())
        .flatten()
        .cloned()
        .collect();
    assert_eq!(streamed, entries, "same tokens and figures when streamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_logprobs_spell_the_text() {
    let base = start(16, 2, None).await;
    let client = reqwest::Client::new();
    let (status, v) = post(
        &client,
        &format!("{base}/v1/completions"),
        json!({"model": "demo", "prompt": "def main():", "max_tokens": 10,
               "temperature": 0, "logprobs": 2}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let choice = &v["choices"][0];
    let lp = &choice["logprobs"];
    let tokens: Vec<String> = serde_json::from_value(lp["tokens"].clone()).unwrap();
    assert!(!tokens.is_empty());
    assert_eq!(tokens.concat(), choice["text"].as_str().unwrap());
    let mut offset = 0;
    for (i, t) in tokens.iter().enumerate() {
        assert_eq!(lp["text_offset"][i].as_u64().unwrap() as usize, offset);
        offset += t.len();
        let top = lp["top_logprobs"][i].as_object().unwrap();
        assert!(!top.is_empty() && top.len() <= 2, "{lp}");
        let chosen = lp["token_logprobs"][i].as_f64().unwrap();
        let best = top
            .values()
            .map(|x| x.as_f64().unwrap())
            .fold(f64::MIN, f64::max);
        assert!(
            (best - chosen).abs() < 1e-5,
            "greedy picks the most likely: {lp}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logprob_requests_out_of_range_are_400() {
    let base = start(16, 2, None).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let cases = [
        (
            json!({"logprobs": true, "top_logprobs": 21}),
            "top_logprobs",
        ),
        (json!({"top_logprobs": 2}), "top_logprobs"),
        (json!({"logprobs": "yes"}), "logprobs"),
    ];
    for (extra, param) in cases {
        let mut body = json!({"model": "demo", "messages": [user("hi")], "max_tokens": 2});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, v) = post(&client, &url, body).await;
        assert_error(status, &v, 400);
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    let (status, v) = post(
        &client,
        &format!("{base}/v1/completions"),
        json!({"model": "demo", "prompt": "x", "max_tokens": 2, "logprobs": 30}),
    )
    .await;
    assert_error(status, &v, 400);
}
