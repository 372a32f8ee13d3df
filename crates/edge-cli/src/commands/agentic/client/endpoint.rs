//! [`Endpoint`]: any OpenAI-compatible server over HTTP/1.1 with keep-alive, the way
//! the MLPerf harness talks to it (`Accept: text/event-stream`, `X-Session-ID`,
//! usage requested with `stream_options.include_usage`).
//!
//! Servers that close the connection after each stream are handled: a response with
//! `Connection: close` means the next request opens a new connection, and a request
//! whose reused connection fails is sent once more on a fresh one. Both count as a
//! reconnect.

use super::sse::{ReadError, read_events};
use super::{ChatBackend, ChatReply, ClientError, ReplyBuilder};
use reqwest::blocking::Client;
use reqwest::header;
use serde_json::{Value, json};
use std::io::BufReader;
use std::time::{Duration, Instant};

/// The harness aborts a turn after 600 s.
const TURN_TIMEOUT: Duration = Duration::from_secs(600);

/// A chat endpoint.
#[derive(Debug)]
pub struct Endpoint {
    client: Client,
    base: String,
    url: String,
    reconnects: u64,
    /// The server said it closes the connection after the last response.
    closed: bool,
    /// A request has been answered (so a connection failure is a dropped connection,
    /// not an unreachable server).
    answered: bool,
    /// Sent as `Authorization: Bearer …` when set (a server started with an API key).
    api_key: Option<String>,
}

/// How one attempt failed.
enum Failure {
    /// The connection failed before a complete reply: worth one more try.
    Retry(ClientError),
    /// The server answered, with an error.
    Fatal(ClientError),
}

impl Endpoint {
    /// An endpoint at `base`: `http://host:port`, `…/v1`, or the full
    /// `…/v1/chat/completions` URL.
    pub fn new(base: &str) -> Result<Self, ClientError> {
        let trimmed = base.trim_end_matches('/');
        let root = trimmed
            .strip_suffix("/chat/completions")
            .or_else(|| trimmed.strip_suffix("/v1"))
            .unwrap_or(trimmed)
            .trim_end_matches("/v1");
        let client = Client::builder()
            .timeout(TURN_TIMEOUT)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            // A benchmark of a local server must not go through a proxy from the env.
            .no_proxy()
            .build()
            .map_err(|e| ClientError::Connect {
                url: base.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Endpoint {
            client,
            base: root.to_string(),
            url: format!("{root}/v1/chat/completions"),
            reconnects: 0,
            closed: false,
            answered: false,
            api_key: None,
        })
    }

    /// The same endpoint, sending `key` as a bearer token with every request.
    pub fn with_api_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.trim().to_string());
        self
    }

    /// `req` with the API key, if there is one.
    fn authorized(
        &self,
        req: reqwest::blocking::RequestBuilder,
    ) -> reqwest::blocking::RequestBuilder {
        match &self.api_key {
            Some(key) => req.bearer_auth(key),
            None => req,
        }
    }

    /// The chat completions URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The first model the server lists at `/v1/models`, if it answers.
    pub fn served_model(&self) -> Option<String> {
        let req = self.client.get(format!("{}/v1/models", self.base));
        let res = self.authorized(req).send().ok()?;
        let v: Value = serde_json::from_slice(&res.bytes().ok()?).ok()?;
        v.pointer("/data/0/id")?.as_str().map(str::to_string)
    }

    fn connect_error(&self, e: impl std::fmt::Display) -> ClientError {
        ClientError::Connect {
            url: self.url.clone(),
            reason: e.to_string(),
        }
    }

    fn attempt(
        &mut self,
        body: &[u8],
        session: Option<&str>,
        stream: bool,
    ) -> Result<ChatReply, Failure> {
        let req = self.client.post(&self.url);
        let mut req = self
            .authorized(req)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if stream {
            req = req.header(header::ACCEPT, "text/event-stream");
        }
        if let Some(s) = session {
            req = req.header("X-Session-ID", s);
        }
        let issued = Instant::now();
        let res = match req.send() {
            Ok(r) => r,
            Err(e) if self.answered && !e.is_timeout() => {
                return Err(Failure::Retry(self.connect_error(e)));
            }
            Err(e) => return Err(Failure::Fatal(self.connect_error(e))),
        };
        let status = res.status();
        self.closed = res
            .headers()
            .get(header::CONNECTION)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if !status.is_success() {
            let text = res.text().unwrap_or_default();
            return Err(Failure::Fatal(ClientError::Status {
                url: self.url.clone(),
                status: status.as_u16(),
                body: text.chars().take(500).collect(),
            }));
        }
        let is_sse = res
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut builder = ReplyBuilder::new(issued);
        if is_sse {
            match read_events(BufReader::new(res), &mut builder) {
                Ok(0) => {
                    return Err(Failure::Retry(ClientError::Protocol(
                        "the stream ended before any event".into(),
                    )));
                }
                Ok(_) => {}
                Err(ReadError::Io(e)) => return Err(Failure::Retry(self.connect_error(e))),
                Err(ReadError::Bad(m)) => return Err(Failure::Fatal(ClientError::Protocol(m))),
            }
        } else {
            let bytes = res
                .bytes()
                .map_err(|e| Failure::Retry(self.connect_error(e)))?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                Failure::Fatal(ClientError::Protocol(format!("the body is not JSON: {e}")))
            })?;
            builder.chunk(&v);
        }
        self.answered = true;
        Ok(builder.finish())
    }
}

impl ChatBackend for Endpoint {
    fn complete(&mut self, body: &Value, session: Option<&str>) -> Result<ChatReply, ClientError> {
        let mut body = body.clone();
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        if stream && body.get("stream_options").is_none() {
            body["stream_options"] = json!({"include_usage": true});
        }
        let bytes = serde_json::to_vec(&body).map_err(|e| ClientError::Protocol(e.to_string()))?;
        if std::mem::take(&mut self.closed) {
            self.reconnects += 1;
        }
        match self.attempt(&bytes, session, stream) {
            Ok(r) => Ok(r),
            Err(Failure::Fatal(e)) => Err(e),
            Err(Failure::Retry(_)) => {
                self.reconnects += 1;
                self.attempt(&bytes, session, stream).map_err(|f| match f {
                    Failure::Retry(e) | Failure::Fatal(e) => e,
                })
            }
        }
    }

    fn mode(&self) -> &'static str {
        "endpoint"
    }

    fn reconnects(&self) -> u64 {
        self.reconnects
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// Reads one HTTP request (headers and a Content-Length body) off `s`.
    fn read_request(s: &mut TcpStream) -> String {
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let (mut head, mut len) = (String::new(), 0);
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                return head;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        head + &String::from_utf8(body).unwrap()
    }

    const STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n",
        "data: [DONE]\n\n"
    );

    fn respond(s: &mut TcpStream, connection: &str) {
        write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: {connection}\r\n\
             Content-Length: {}\r\n\r\n{STREAM}",
            STREAM.len()
        )
        .unwrap();
    }

    /// A server that answers each request on a new connection and closes it, saying
    /// so or (`announce` false) not: both are reconnects, and no turn is lost.
    fn closing_server(announce: bool) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let (mut s, _) = listener.accept().unwrap();
                let req = read_request(&mut s);
                if req.is_empty() {
                    continue; // a probe connection closed without a request
                }
                seen.push(req);
                respond(&mut s, if announce { "close" } else { "keep-alive" });
                s.flush().unwrap();
                s.shutdown(std::net::Shutdown::Both).ok();
                if seen.len() == 2 {
                    break;
                }
            }
            seen
        });
        (format!("http://{addr}"), server)
    }

    #[test]
    fn connection_close_is_a_counted_reconnect() {
        for announce in [true, false] {
            let (base, server) = closing_server(announce);
            let mut e = Endpoint::new(&format!("{base}/v1"))
                .unwrap()
                .with_api_key("k3y");
            let body = json!({"model": "m", "messages": [], "stream": true});
            for _ in 0..2 {
                let r = e.complete(&body, Some("conv-1")).unwrap();
                assert_eq!(r.content, "ok");
                assert_eq!(r.usage.unwrap().prompt_tokens, 3);
            }
            let seen = server.join().unwrap();
            assert_eq!(seen.len(), 2);
            let first = seen[0].to_ascii_lowercase();
            assert!(
                first.starts_with("post /v1/chat/completions http/1.1"),
                "{first}"
            );
            assert!(first.contains("x-session-id: conv-1"), "{first}");
            assert!(first.contains("authorization: bearer k3y"), "{first}");
            assert!(first.contains("accept: text/event-stream"), "{first}");
            assert!(first.contains("\"include_usage\":true"), "{first}");
            if announce {
                assert_eq!(e.reconnects(), 1);
            }
        }
    }

    #[test]
    fn unreachable_servers_and_error_statuses_are_errors() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut e = Endpoint::new(&format!("http://127.0.0.1:{port}")).unwrap();
        let body = json!({"messages": [], "stream": true});
        assert!(matches!(
            e.complete(&body, None),
            Err(ClientError::Connect { .. })
        ));

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            read_request(&mut s);
            let body = r#"{"error":{"message":"bad"}}"#;
            write!(
                s,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        let mut e = Endpoint::new(&format!("http://{addr}/v1/chat/completions")).unwrap();
        let err = e.complete(&body, None).unwrap_err();
        assert!(
            matches!(err, ClientError::Status { status: 400, .. }),
            "{err}"
        );
        server.join().unwrap();
    }
}
