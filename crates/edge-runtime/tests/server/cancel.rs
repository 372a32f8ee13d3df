//! Clients that leave at any stage: a request whose client disconnects during a long
//! prefill stops within a chunk, and queue slots of clients that left come back.

use super::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A number of `/health`.
async fn health(client: &reqwest::Client, base: &str, key: &str) -> u64 {
    let v: Value = (client.get(format!("{base}/health")).send().await.unwrap())
        .json()
        .await
        .unwrap();
    v[key].as_u64().unwrap()
}

/// Polls until `/health`'s `key` is `n`, for at most `limit`; how long it took.
async fn until(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    n: u64,
    limit: Duration,
) -> Duration {
    let start = Instant::now();
    while health(client, base, key).await != n {
        assert!(start.elapsed() < limit, "{key} never became {n}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    start.elapsed()
}

/// A streamed chat request on its own task: aborting the task closes the connection,
/// as a client that leaves does.
fn spawn_chat(base: &str, text: &str) -> tokio::task::JoinHandle<()> {
    let url = format!("{base}/v1/chat/completions");
    let body = json!({"messages": [user(text)], "max_tokens": 8, "stream": true});
    tokio::spawn(async move {
        let res = reqwest::Client::new().post(url).json(&body).send().await;
        if let Ok(res) = res {
            let _ = res.text().await;
        }
    })
}

/// One engine slot, one queue slot. A 40K-token prompt keeps the engine in prefill
/// (minutes on two cores with f32 activations); a short request waits in the queue,
/// so a third is refused. Once the queued client leaves, its slot comes back; once
/// the prefilling client leaves, the engine is idle within a chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_that_leave_free_their_slot_and_their_prefill() {
    let base = start(1, 1, None).await;
    let client = reqwest::Client::new();
    let long = spawn_chat(&base, &"word ".repeat(8000));
    until(&client, &base, "in_flight", 1, Duration::from_secs(60)).await;
    let queued = spawn_chat(&base, "hi");
    until(&client, &base, "queued", 1, Duration::from_secs(60)).await;
    // Refused at once while the queued request holds the one queue slot.
    let chat = format!("{base}/v1/chat/completions");
    let short = json!({"messages": [user("hi")], "max_tokens": 2});
    let refused = post(&client, &chat, short.clone());
    let (status, v) = tokio::time::timeout(Duration::from_secs(30), refused)
        .await
        .expect("a full queue answers at once");
    assert_error(status, &v, 429);

    // The queued client leaves: the engine drops its request and the slot comes back,
    // so a new request is queued in its place.
    queued.abort();
    until(&client, &base, "queued", 0, Duration::from_secs(20)).await;
    let taken = spawn_chat(&base, "hi");
    until(&client, &base, "queued", 1, Duration::from_secs(20)).await;
    taken.abort();

    // The prefilling client leaves: the engine stops within a chunk, far sooner than
    // the prefill would take.
    long.abort();
    let idle = until(&client, &base, "in_flight", 0, Duration::from_secs(30)).await;
    eprintln!("idle {idle:?} after the prefilling client left");
    until(&client, &base, "queued", 0, Duration::from_secs(20)).await;
    let v: Value = (client.get(format!("{base}/health")).send().await.unwrap())
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "ok", "{v}");
}

/// With a request timeout, a request that runs past it is cancelled and answered 504,
/// streamed or not (before its first token no stream has begun); the engine is idle
/// again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_past_the_timeout_is_cancelled_and_answered_504() {
    let base = start_with(|s| s.with_request_timeout(Duration::from_millis(800))).await;
    let client = reqwest::Client::new();
    let chat = format!("{base}/v1/chat/completions");
    let long = json!({"messages": [user(&"word ".repeat(8000))], "max_tokens": 8});
    let (status, v) = post(&client, &chat, long.clone()).await;
    assert_error(status, &v, 504);
    assert_eq!(v["error"]["code"], "request_timeout", "{v}");
    let mut streamed = long;
    streamed["stream"] = json!(true);
    let (status, v) = post(&client, &chat, streamed).await;
    assert_error(status, &v, 504);
    until(&client, &base, "in_flight", 0, Duration::from_secs(30)).await;
    // A short request still fits.
    let (status, v) = post(
        &client,
        &chat,
        json!({"messages": [user("hi")], "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
}
