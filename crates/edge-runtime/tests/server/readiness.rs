//! Readiness for a load balancer: `/ready` answers 503 while the engine queue is at its
//! readiness limit (by default full, where the next request gets 429) and while the
//! server drains, 200 otherwise; it needs no API key; `/metrics` carries the queue
//! depth, readiness, KV pages free and the hot-cache ratio.

use super::support::*;
use edge_runtime::EngineConfig;
use edge_runtime::server::{AccessPolicy, Timeouts};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `/ready`'s status and body.
async fn ready(client: &reqwest::Client, base: &str) -> (u16, Value) {
    let res = client.get(format!("{base}/ready")).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

/// Polls `/ready` until it answers `status`, for at most `limit`; its last body.
async fn until_ready_is(
    client: &reqwest::Client,
    base: &str,
    status: u16,
    limit: Duration,
) -> Value {
    let start = Instant::now();
    loop {
        let (s, v) = ready(client, base).await;
        if s == status {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "/ready never answered {status}: {s} {v}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls `/health` until its `in_flight` is `n`, for at most `limit`.
async fn until_in_flight(client: &reqwest::Client, base: &str, n: u64) {
    let start = Instant::now();
    loop {
        let v: Value = (client.get(format!("{base}/health")).send().await.unwrap())
            .json()
            .await
            .unwrap();
        if v["in_flight"].as_u64() == Some(n) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "in_flight never became {n}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A sample of `/metrics`.
async fn metric(client: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = (client.get(format!("{base}/metrics")).send().await.unwrap())
        .text()
        .await
        .unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")));
    line.unwrap_or_else(|| panic!("{name} in {text}"))
        .parse()
        .unwrap()
}

/// A streamed chat request on its own task: aborting it closes the connection.
fn spawn_chat(base: &str, text: &str) -> tokio::task::JoinHandle<()> {
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"messages": [user(text)], "max_tokens": 8, "stream": true});
    tokio::spawn(async move {
        if let Ok(res) = reqwest::Client::new().post(url).json(&body).send().await {
            let _ = res.text().await;
        }
    })
}

/// A prompt that keeps the one engine slot in prefill for minutes (two cores, f32).
fn long_prompt() -> String {
    "word ".repeat(8000)
}

/// One engine slot, two queue slots: with the slot prefilling and both queue slots
/// taken, `/ready` answers 503 `queue_full` (and the next request 429) while `/health`
/// still answers 200; `/metrics` shows the queue. Once the queued clients leave it is
/// ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn not_ready_while_the_queue_is_full() {
    let base = start(2, 1, None).await;
    let client = reqwest::Client::new();
    let (status, v) = ready(&client, &base).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["status"].as_str(),
            v["queue_limit"].as_u64(),
            v["queue_capacity"].as_u64()
        ),
        (Some("ready"), Some(2), Some(2)),
        "{v}"
    );
    assert_eq!(metric(&client, &base, "edge_ready").await, 1.0);

    let long = spawn_chat(&base, &long_prompt());
    until_in_flight(&client, &base, 1).await;
    let queued = [spawn_chat(&base, "hi"), spawn_chat(&base, "hello")];
    let v = until_ready_is(&client, &base, 503, Duration::from_secs(60)).await;
    assert_eq!(
        (v["reason"].as_str(), v["queued"].as_u64()),
        (Some("queue_full"), Some(2)),
        "{v}"
    );
    let health: Value = (client.get(format!("{base}/health")).send().await.unwrap())
        .json()
        .await
        .unwrap();
    assert_eq!(
        (health["ready"].as_bool(), health["queued"].as_u64()),
        (Some(false), Some(2)),
        "{health}"
    );
    assert_eq!(metric(&client, &base, "edge_ready").await, 0.0);
    assert_eq!(metric(&client, &base, "edge_queue_depth").await, 2.0);
    assert_eq!(metric(&client, &base, "edge_queue_capacity").await, 2.0);
    assert!(metric(&client, &base, "edge_kv_pages_free").await > 0.0);
    let (status, v) = post(
        &client,
        &format!("{base}/v1/chat/completions"),
        json!({"messages": [user("hi")], "max_tokens": 2}),
    )
    .await;
    assert_error(status, &v, 429);

    for q in queued {
        q.abort();
    }
    let v = until_ready_is(&client, &base, 200, Duration::from_secs(20)).await;
    assert!(v["reason"].is_null(), "{v}");
    long.abort();
    until_in_flight(&client, &base, 0).await;
}

/// With a readiness limit below the queue's capacity, the server stops being ready
/// once that many requests wait, though it still queues more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lower_readiness_limit_stops_new_sessions_before_the_queue_is_full() {
    let config = EngineConfig {
        max_sequences: 1,
        ..EngineConfig::default()
    };
    let base = start_engine(16, config, |s| s.with_ready_max_queued(1)).await;
    let client = reqwest::Client::new();
    let (status, v) = ready(&client, &base).await;
    assert_eq!((status, v["queue_limit"].as_u64()), (200, Some(1)), "{v}");
    let long = spawn_chat(&base, &long_prompt());
    until_in_flight(&client, &base, 1).await;
    let queued = spawn_chat(&base, "hi");
    let v = until_ready_is(&client, &base, 503, Duration::from_secs(60)).await;
    assert_eq!(
        (v["reason"].as_str(), v["queue_capacity"].as_u64()),
        (Some("queue_full"), Some(16)),
        "{v}"
    );
    assert_eq!(metric(&client, &base, "edge_ready_queue_limit").await, 1.0);
    queued.abort();
    until_ready_is(&client, &base, 200, Duration::from_secs(20)).await;
    long.abort();
    until_in_flight(&client, &base, 0).await;
}

/// `/ready` is open without the API key (as `/health` is; `/metrics` is not), and
/// answers 503 from the moment the server drains (held open here by a request in
/// flight, until the shutdown deadline cancels it).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ready_needs_no_key_and_answers_503_while_draining() {
    let policy = AccessPolicy::default().with_api_key("s3cret").unwrap();
    let timeouts = Timeouts {
        shutdown: Duration::from_secs(2),
        ..Timeouts::default()
    };
    let (base, stop, task) =
        start_stoppable(|s| s.with_access(policy).with_timeouts(timeouts)).await;
    let client = reqwest::Client::new();
    let (status, v) = ready(&client, &base).await;
    assert_eq!(status, 200, "{v}");
    let res = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "edge_ready 1",
        "edge_draining 0",
        "edge_queue_depth 0",
        "edge_hot_cache_ratio 0",
    ] {
        assert!(metrics.lines().any(|l| l == name), "{name} in {metrics}");
    }

    let key = "Bearer s3cret";
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"messages": [user(&long_prompt())], "max_tokens": 8, "stream": true});
    let long = tokio::spawn(async move {
        let req = reqwest::Client::new()
            .post(url)
            .header("authorization", key);
        if let Ok(res) = req.json(&body).send().await {
            let _ = res.text().await;
        }
    });
    until_in_flight(&client, &base, 1).await;
    stop.send(()).unwrap();
    let v = until_ready_is(&client, &base, 503, Duration::from_secs(10)).await;
    assert_eq!(v["error"]["code"], "shutting_down", "{v}");
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the drain ends at the shutdown deadline")
        .unwrap()
        .unwrap();
    long.abort();
}
