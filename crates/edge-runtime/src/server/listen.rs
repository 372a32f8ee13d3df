//! The accept loop: each connection served by [`connection::serve`] with its
//! timeouts, and the drain on shutdown: new requests are answered 503 (not refused)
//! while the ones in flight finish, and cancelled when the deadline passes.

use super::{ServerConfig, ServerState, Timeouts, connection, router};
use crate::{Result, RuntimeError};
use axum::Router;
use std::future::Future;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long connections may take to write their last bytes (a final stream event, a
/// 503) once the drain is over.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// How long cancelled requests get to end after the shutdown deadline before their
/// connections are dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Serves `state` on `listener` until `shutdown` completes, then drains: new requests
/// get 503, requests in flight get [`super::Timeouts::shutdown`] to finish and are
/// cancelled after it (a stream ends with an error event); it returns once none is
/// left. On a loopback listener the `Host` header must name this machine (or a host
/// the access policy allows): the defence against DNS rebinding.
pub async fn serve_on(
    listener: TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
    let access = state.inner.access.clone().checking_host(loopback);
    let state = state.with_access(access);
    let (timeouts, lifecycle) = (state.inner.timeouts, state.inner.lifecycle.clone());
    let app = router(state);
    let (close, closing) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                accept(accepted, &mut connections, &app, timeouts, closing.clone()).await;
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    lifecycle.drain();
    tracing::info!(
        "draining: new requests get 503; {} in flight have {:.1} s to finish",
        lifecycle.in_flight(),
        timeouts.shutdown.as_secs_f64()
    );
    // Open connections stay: a request on one gets its 503 (and `Connection: close`)
    // rather than a closed socket. They are closed when the drain is over.
    let deadline = tokio::time::sleep(timeouts.shutdown);
    // Past the deadline the workers end within a poll; one blocked on a client that
    // stopped reading cannot, so the drain stops regardless a moment later (dropping
    // the connections unblocks it).
    let hard_stop = tokio::time::sleep(timeouts.shutdown + CANCEL_GRACE);
    let idle = lifecycle.until_idle();
    tokio::pin!(deadline, hard_stop, idle);
    loop {
        tokio::select! {
            () = &mut idle => break,
            () = &mut deadline, if !lifecycle.cancelling() => {
                tracing::warn!(
                    "shutdown deadline passed: cancelling {} requests in flight",
                    lifecycle.in_flight()
                );
                lifecycle.cancel_all();
            }
            () = &mut hard_stop => {
                tracing::warn!(
                    "{} requests still in flight after the deadline: closing their connections",
                    lifecycle.in_flight()
                );
                break;
            }
            // New connections are still answered (503) rather than refused.
            accepted = listener.accept() => {
                accept(accepted, &mut connections, &app, timeouts, closing.clone()).await;
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Idle connections close now, busy ones after their response.
    let _ = close.send(true);
    let finished = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(CLOSE_GRACE, finished).await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts serving an accepted connection (or, when accepting failed, e.g. out of file
/// descriptors, waits a moment so the loop does not spin).
async fn accept(
    accepted: std::io::Result<(TcpStream, std::net::SocketAddr)>,
    connections: &mut JoinSet<()>,
    app: &Router,
    timeouts: Timeouts,
    closing: watch::Receiver<bool>,
) {
    match accepted {
        Ok((tcp, _)) => {
            connections.spawn(connection::serve(tcp, app.clone(), timeouts, closing));
        }
        Err(e) => {
            tracing::warn!("cannot accept a connection: {e}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Binds `config.host:config.port` and serves until SIGINT or SIGTERM, then drains
/// ([`serve_on`]); a second signal ends it at once.
pub async fn serve(config: ServerConfig, state: ServerState) -> Result<()> {
    let addr = format!("{}:{}", config.host, config.port);
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|e| RuntimeError::Server(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| RuntimeError::Server(e.to_string()))?;
    tracing::info!("listening on http://{local}");
    let mut signals = Signals::new()?;
    let (first, first_seen) = tokio::sync::oneshot::channel();
    let watch_signals = async move {
        signals.next().await;
        let _ = first.send(());
        signals.next().await;
        tracing::warn!("second signal: stopping at once");
    };
    let shutdown = async {
        let _ = first_seen.await;
    };
    let state = state.with_body_limit(config.body_limit);
    tokio::select! {
        served = serve_on(listener, state, shutdown) => served,
        () = watch_signals => Ok(()),
    }
}

/// SIGINT (Ctrl-C) and SIGTERM, registered once so that a second one is seen too.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind| {
                signal(kind).map_err(|e| RuntimeError::Server(format!("cannot watch signals: {e}")))
            };
            Ok(Signals {
                term: listen(SignalKind::terminate())?,
                int: listen(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next signal.
    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {},
            _ = self.int.recv() => {},
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
