//! `edge-llm serve`: it starts on the embedded demo model, answers over HTTP, and
//! exits cleanly on SIGTERM.
#![cfg(unix)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

/// One HTTP/1.1 request with `Connection: close`; the whole response as text.
fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    let (mut child, addr) = support::spawn_serve(&["--queue", "4", "--max-sequences", "2"]);
    let health = http(&addr, "GET", "/health", "");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    assert!(health.contains("\"refcounts_ok\":true"), "{health}");
    let chat = http(
        &addr,
        "POST",
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0}"#,
    );
    assert!(chat.starts_with("HTTP/1.1 200"), "{chat}");
    assert!(chat.contains("\"chat.completion\""), "{chat}");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}

/// Starts a streamed chat that would never end by itself (`ignore_eos`, no
/// `max_tokens`) and reads its first bytes; the open connection.
fn endless_stream(addr: &str) -> TcpStream {
    let body = r#"{"messages":[{"role":"user","content":"Tell me a story."}],"stream":true,"ignore_eos":true}"#;
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 256];
    let n = s.read(&mut first).unwrap();
    let head = String::from_utf8_lossy(&first[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s
}

/// A server process killed when the test ends, so a failing test leaves none behind.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &std::process::Child, name: &str) {
    let sent = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits for the child to exit, for at most `limit`; how long it took.
fn exit_within(child: &mut std::process::Child, limit: Duration) -> Duration {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            return start.elapsed();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("the server did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM with `--shutdown-timeout 2` and an endless stream in flight: new requests
/// get 503 during the drain, the stream ends with an error event at the deadline, and
/// the process exits about then.
#[test]
fn sigterm_drains_then_cancels_an_endless_stream_and_exits() {
    let (child, addr) = support::spawn_serve(&["--shutdown-timeout", "2"]);
    let mut server = Server(child);
    let child = &mut server.0;
    let mut stream = endless_stream(&addr);
    signal(child, "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    let refused = http(&addr, "GET", "/health", "");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("shutting_down"), "{refused}");
    let took = exit_within(child, Duration::from_secs(10));
    assert!(
        took < Duration::from_secs(4),
        "exited {took:?} after the signal"
    );
    let mut rest = String::new();
    let _ = stream.read_to_string(&mut rest);
    assert!(rest.contains("\"shutting_down\""), "{rest}");
}

/// A second signal during a drain exits at once, long before the shutdown deadline.
#[test]
fn a_second_signal_exits_at_once() {
    let (child, addr) = support::spawn_serve(&["--shutdown-timeout", "60"]);
    let mut server = Server(child);
    let child = &mut server.0;
    let _stream = endless_stream(&addr);
    signal(child, "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    signal(child, "-INT");
    let took = exit_within(child, Duration::from_secs(10));
    assert!(
        took < Duration::from_secs(3),
        "exited {took:?} after the second signal"
    );
}
