//! Admission by pages over HTTP: requests without `max_tokens` are not refused for the
//! context they might use, and a budget too small for every request at once makes
//! some wait and some be preempted, but every one completes.

use super::support::*;
use edge_kvcache::CacheConfig;
use edge_runtime::EngineConfig;
use serde_json::{Value, json};
use std::time::Duration;

/// Posts `n` chat requests at once; their statuses and bodies.
async fn concurrent(base: &str, n: usize, body: impl Fn(usize) -> Value) -> Vec<(u16, Value)> {
    let url = format!("{base}/v1/chat/completions");
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (url, body) = (url.clone(), body(i));
            tokio::spawn(async move { post(&reqwest::Client::new(), &url, body).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

async fn health(base: &str) -> Value {
    (reqwest::get(format!("{base}/health")).await.unwrap())
        .json()
        .await
        .unwrap()
}

/// Eight requests without `max_tokens` on the default 4 GiB budget, where reserving
/// each one's whole 262K-token context up front would have held the 4th back with a
/// 400: all eight run and end with a stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_open_ended_requests_on_the_default_budget_all_complete() {
    // Greedy, so the replies (which end with a stop on the demo model) are the same
    // on every run; the timeout turns a regression into a failure, not a hang.
    let guard = Duration::from_secs(120);
    let base = start_sized(8, |s| s.with_request_timeout(guard)).await;
    let replies = concurrent(&base, 8, |i| {
        let text = format!("Say hello to friend number {i}.");
        json!({"messages": [user(&text)], "temperature": 0})
    })
    .await;
    for (status, v) in &replies {
        assert_eq!(*status, 200, "{v}");
        let finish = &v["choices"][0]["finish_reason"];
        assert!(finish == "stop" || finish == "tool_calls", "{v}");
    }
    let h = health(&base).await;
    assert_eq!(
        (h["in_flight"].as_u64(), h["sequences"].as_u64()),
        (Some(0), Some(0)),
        "{h}"
    );
}

/// A budget of 16 pages and 4 state slots, and eight requests of 108 prompt tokens and
/// 160 new ones (10 pages each), placed with 8 tokens reserved for decoding (5
/// pages): three are placed, the rest wait, and any two long ones running together
/// cannot both grow, so the newer is preempted and resumes. Every request is answered 200
/// with its full length, `/metrics` counts the preemptions, and every page comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_short_budget_preempts_and_every_request_completes() {
    let mut cache = CacheConfig::default();
    let spec = demo_cache_spec(&cache);
    cache.budget_bytes = 16 * spec.block_bytes() + 4 * spec.state_bytes();
    let config = EngineConfig {
        max_sequences: 4,
        cache,
        decode_reserve: 8,
        ..EngineConfig::default()
    };
    let guard = Duration::from_secs(120);
    let base = start_engine(16, config, |s| s.with_request_timeout(guard)).await;
    let body = |i: usize| {
        let text = format!("{i} {}", "the cat sat on the mat and ".repeat(3));
        // `ignore_eos`: every reply runs its full length, so replies overlap.
        json!({"messages": [user(&text)], "max_tokens": 160, "temperature": 0, "ignore_eos": true})
    };
    let replies = concurrent(&base, 8, body).await;
    for (status, v) in &replies {
        assert_eq!(*status, 200, "{v}");
    }
    // Each reply is the one the request gets alone, on a roomy server: a resumed
    // request neither repeats nor loses text.
    let roomy = start(16, 1, None).await;
    let client = reqwest::Client::new();
    for (i, (_, v)) in replies.iter().enumerate() {
        let (status, alone) = post(&client, &format!("{roomy}/v1/chat/completions"), body(i)).await;
        assert_eq!(status, 200, "{alone}");
        let text = |v: &Value| v["choices"][0]["message"].clone();
        assert_eq!(text(v), text(&alone), "request {i}");
    }
    let h = health(&base).await;
    assert!(h["preemptions"].as_u64().unwrap() > 0, "{h}");
    assert_eq!(
        (h["in_flight"].as_u64(), h["sequences"].as_u64()),
        (Some(0), Some(0)),
        "{h}"
    );
    assert_eq!(h["refcounts_ok"], true, "{h}");
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let preemptions = (metrics.lines())
        .find_map(|l| l.strip_prefix("edge_preemptions_total "))
        .expect("edge_preemptions_total");
    assert_eq!(preemptions, h["preemptions"].to_string());
    for (_, v) in &replies {
        assert_eq!(v["usage"]["completion_tokens"], 160, "{v}");
    }
}
