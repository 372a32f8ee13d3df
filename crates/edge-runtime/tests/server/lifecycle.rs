//! Timeouts and drain: slow heads, idle kept-alive connections and slow bodies are
//! cut off; on shutdown new requests get 503 while the one in flight goes on, and when
//! the deadline passes it ends with an error event and the server stops.

use super::support::*;
use edge_runtime::server::Timeouts;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn short(header_ms: u64, idle_ms: u64, body_ms: u64, shutdown_ms: u64) -> Timeouts {
    Timeouts {
        header: Duration::from_millis(header_ms),
        idle: Duration::from_millis(idle_ms),
        body: Duration::from_millis(body_ms),
        shutdown: Duration::from_millis(shutdown_ms),
    }
}

/// Reads until the server closes the connection (or `limit` passes: a failure); what
/// it sent, and how long that took.
async fn until_closed(s: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let read = tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    });
    read.await
        .expect("the server closed the connection in time");
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}

fn addr(base: &str) -> &str {
    base.trim_start_matches("http://")
}

/// With a 300 ms header timeout and a 2 s idle one: a connection that sends nothing
/// and a kept-alive one after its response are closed once idle for 2 s; one that
/// sends half a head is closed soon after its first byte, long before; a slow body
/// gets 408 with an OpenAI body. The four run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_idle_connections_and_slow_bodies_are_cut_off() {
    let base = start_with(|s| s.with_timeouts(short(300, 2000, 400, 1000))).await;
    let a = addr(&base);
    let idle = Duration::from_millis(1800);
    let silent = async {
        let mut silent = TcpStream::connect(a).await.unwrap();
        let (text, took) = until_closed(&mut silent, Duration::from_secs(20)).await;
        assert!(text.is_empty(), "{text}");
        assert!(
            took >= idle,
            "closed after {took:?}, before the idle timeout"
        );
    };
    let half = async {
        let mut half = TcpStream::connect(a).await.unwrap();
        half.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let (text, took) = until_closed(&mut half, Duration::from_secs(20)).await;
        assert!(!text.contains("200 OK"), "{text}");
        assert!(took < Duration::from_millis(1500), "closed after {took:?}");
    };
    let kept = async {
        let mut kept = TcpStream::connect(a).await.unwrap();
        kept.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let (text, took) = until_closed(&mut kept, Duration::from_secs(20)).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(
            took >= idle,
            "closed after {took:?}, before the idle timeout"
        );
    };
    let slow = async {
        let mut slow = TcpStream::connect(a).await.unwrap();
        let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                    Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"messages\":";
        slow.write_all(head.as_bytes()).await.unwrap();
        let (text, _) = until_closed(&mut slow, Duration::from_secs(20)).await;
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("\"body_timeout\""), "{text}");
    };
    tokio::join!(silent, half, kept, slow);

    // The server is still there for a prompt client.
    let (status, v) = post(
        &reqwest::Client::new(),
        &format!("{base}/v1/chat/completions"),
        json!({"messages": [user("hi")], "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
}

/// Shutdown with a stream in flight that would never end by itself: new requests get
/// 503 `shutting_down` while it goes on; at the deadline it ends with an error event
/// and the server stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drain_refuses_new_requests_then_cancels_what_runs_past_the_deadline() {
    let (base, stop, task) =
        start_stoppable(|s| s.with_timeouts(short(5000, 5000, 5000, 1500))).await;
    let client = reqwest::Client::new();
    let chat = format!("{base}/v1/chat/completions");
    let endless =
        json!({"messages": [user("Tell me a story.")], "stream": true, "ignore_eos": true});
    let mut res = client.post(&chat).json(&endless).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let first = res.chunk().await.unwrap().expect("a first event");
    assert!(!first.is_empty());
    let stopped_at = Instant::now();
    stop.send(()).unwrap();
    // The drain has begun once /health answers 503.
    let health = format!("{base}/health");
    let begun = async {
        while !reqwest::get(&health).await.is_ok_and(|r| r.status() == 503) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), begun)
        .await
        .expect("the drain begins");
    let (status, v) = post(
        &reqwest::Client::new(),
        &chat,
        json!({"messages": [user("hi")], "max_tokens": 2}),
    )
    .await;
    assert_error(status, &v, 503);
    assert_eq!(v["error"]["code"], "shutting_down", "{v}");
    let mut rest = Vec::new();
    while let Some(chunk) = res.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    let rest = String::from_utf8_lossy(&rest);
    let took = stopped_at.elapsed();
    assert!(
        took >= Duration::from_millis(1200),
        "ran until the deadline: {took:?}"
    );
    let (records, done) = sse_records(&rest);
    assert!(done, "the stream ends properly");
    let last = records.last().expect("events after the first");
    assert_eq!(last["error"]["code"], "shutting_down", "{last}");
    let served = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the server stops soon after the deadline");
    served.unwrap().unwrap();
    assert!(
        stopped_at.elapsed() < Duration::from_secs(4),
        "{:?}",
        stopped_at.elapsed()
    );
}

/// Shutdown with only idle connections open returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_with_nothing_in_flight_ends_at_once() {
    let (base, stop, task) =
        start_stoppable(|s| s.with_timeouts(short(30_000, 30_000, 5000, 30_000))).await;
    let mut kept = TcpStream::connect(addr(&base)).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(kept.read(&mut buf).await.unwrap() > 0);
    let started = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("no request in flight: the drain is over at once")
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let (_, _) = until_closed(&mut kept, Duration::from_secs(5)).await;
}
