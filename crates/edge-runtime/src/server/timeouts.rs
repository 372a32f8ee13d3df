//! How long the server waits for its clients (a request's head and body) and for its
//! own requests when it stops; the middleware that reads a body against its deadline
//! and refuses requests while the server drains.

use super::ServerState;
use super::errors::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// The server's timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// A request head must be complete within this long of its first byte; a slow or
    /// half-sent head has its connection closed. (A head sent while the previous
    /// response is still going out is bounded by `idle` only.)
    pub header: Duration,
    /// A connection waiting for a request (new, or kept alive after a response) is
    /// closed when no complete head has arrived this long after it began waiting.
    pub idle: Duration,
    /// A request body must arrive in full within this long of its head; past it the
    /// request is answered 408 and the connection closed.
    pub body: Duration,
    /// After SIGTERM or SIGINT: how long the requests in flight may finish while new
    /// ones get 503. Those still running then are cancelled (a stream ends with an
    /// error event) and the server exits.
    pub shutdown: Duration,
}

impl Default for Timeouts {
    /// 10 s for a head, 60 s idle between requests, 60 s for a body, 30 s to drain.
    fn default() -> Self {
        Timeouts {
            header: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            body: Duration::from_secs(60),
            shutdown: Duration::from_secs(30),
        }
    }
}

/// Refuses requests while the server drains (503 `shutting_down`, closing the
/// connection), and reads each request's body within [`Timeouts::body`] and the
/// body limit (408 or 413) before the handlers see it.
pub(crate) async fn read_body(
    State(state): State<ServerState>,
    req: Request,
    next: Next,
) -> Response {
    let inner = &state.inner;
    // Counted from before the drain check to its response (a generation keeps its
    // own count while it streams): a request past the check is one the drain waits
    // for.
    let _counted = inner.lifecycle.track();
    if inner.lifecycle.draining() {
        let refused = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down and takes no new requests",
        );
        return closing(refused);
    }
    let (parts, body) = req.into_parts();
    let limit = inner.body_limit;
    let read = tokio::time::timeout(inner.timeouts.body, axum::body::to_bytes(body, limit));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return closing(match too_large {
                true => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than the limit of {limit} bytes"),
                ),
                false => ApiError::bad_request(format!("cannot read the request body: {e}"), None),
            });
        }
        Err(_) => {
            let slow = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:.1} s (--body-timeout)",
                    inner.timeouts.body.as_secs_f64()
                ),
            );
            return closing(slow);
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// `e` as a response that closes its connection (whatever of the request is unread
/// cannot be skipped safely, and a draining server keeps no connection open).
fn closing(e: ApiError) -> Response {
    let mut res = e.into_response();
    res.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    res
}
