//! One HTTP/1.1 connection, served by hyper with two clocks on it: hyper's header-read
//! timer, set to the idle timeout (it runs whenever the connection waits for a
//! request, so it ends idle kept-alive connections), and our own header timeout,
//! which starts at the first byte of a request head (so a slow or half-sent head is
//! cut off long before an idle connection would be).

use super::Timeouts;
use axum::Router;
use axum::body::{Body, HttpBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// What one connection is doing, seen from its socket and its service.
#[derive(Debug)]
struct Watch {
    opened: Instant,
    /// Requests whose response has not been sent to its end.
    in_flight: AtomicUsize,
    /// When the head being read began (milliseconds since `opened`, plus one; 0: no
    /// head begun).
    head_began: AtomicU64,
}

impl Watch {
    fn now(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64 + 1
    }

    /// Bytes arrived: with no request in flight they begin a head.
    fn read_some(&self) {
        if self.in_flight.load(Ordering::Acquire) == 0 {
            let now = self.now();
            let _ = (self.head_began).compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// Whether a head began more than `limit` ago and is still not complete.
    fn head_overdue(&self, limit: Duration) -> bool {
        let began = self.head_began.load(Ordering::Acquire);
        began != 0 && self.now().saturating_sub(began) > limit.as_millis() as u64
    }
}

/// The socket, reporting what it reads to the [`Watch`].
struct WatchedIo {
    tcp: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for WatchedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.read_some();
        }
        polled
    }
}

impl AsyncWrite for WatchedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// A response body that counts its request as in flight until it is dropped (hyper
/// drops it once it has sent it, or when the connection goes).
struct CountedBody {
    body: Body,
    watch: Arc<Watch>,
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        self.watch.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HttpBody for CountedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves one connection's requests with `timeouts` (header and idle; the body's is
/// the router's). `closing` turning true shuts it down gracefully: at once when idle,
/// after the response in progress otherwise.
pub(super) async fn serve(
    tcp: TcpStream,
    app: Router,
    timeouts: Timeouts,
    mut closing: watch::Receiver<bool>,
) {
    let watch = Arc::new(Watch {
        opened: Instant::now(),
        in_flight: AtomicUsize::new(0),
        head_began: AtomicU64::new(0),
    });
    let io = WatchedIo {
        tcp,
        watch: watch.clone(),
    };
    let seen = watch.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        // The head is complete: its clock stops, and the request is in flight until
        // its response is sent.
        seen.head_began.store(0, Ordering::Release);
        seen.in_flight.fetch_add(1, Ordering::AcqRel);
        let watch = seen.clone();
        let call = tower_service::Service::call(&mut app.clone(), req);
        async move {
            let response = match call.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| Body::new(CountedBody { body, watch })))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(timeouts.idle)
        .keep_alive(true);
    let conn = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let tick = (timeouts.header / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut clock = tokio::time::interval(tick);
    let mut shutting = false;
    loop {
        tokio::select! {
            done = conn.as_mut() => {
                if let Err(e) = done {
                    tracing::debug!("connection: {e}");
                }
                return;
            }
            changed = closing.changed(), if !shutting =>
            {
                shutting = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = clock.tick() => {
                if watch.head_overdue(timeouts.header) {
                    // Dropping the connection closes the socket.
                    tracing::debug!("connection: a request head took longer than {:?}", timeouts.header);
                    return;
                }
            }
        }
    }
}
