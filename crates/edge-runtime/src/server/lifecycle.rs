//! Where the server stands on its way down: serving, draining (new requests get 503
//! while the ones in flight finish), or cancelling what is still in flight once the
//! shutdown deadline has passed. Also counts the requests and generations in flight,
//! so the drain knows when it is done.
//!
//! A request is counted before it looks at the drain flag, and the drain sets the
//! flag before it reads the count (both sequentially consistent): either the request
//! sees the drain and answers 503, or the drain sees the request and waits for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The server's shutdown state, shared by the accept loop, the middleware and the
/// generation workers.
#[derive(Debug, Default)]
pub(crate) struct Lifecycle {
    draining: AtomicBool,
    cancelling: AtomicBool,
    in_flight: AtomicUsize,
    idle: Notify,
}

impl Lifecycle {
    /// From now on new requests are refused with 503.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether new requests are refused.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The shutdown deadline has passed: generations in flight end now, with an error.
    pub fn cancel_all(&self) {
        self.cancelling.store(true, Ordering::Release);
    }

    /// Whether generations in flight must end.
    pub fn cancelling(&self) -> bool {
        self.cancelling.load(Ordering::Acquire)
    }

    /// Counts a request or generation in flight until the returned guard drops.
    pub fn track(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// Requests and generations in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Completes once nothing is in flight.
    pub async fn until_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the count is read, so a guard dropping in between
            // still wakes this waiter.
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A request or generation in flight; dropping it ends the count.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Lifecycle>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn idle_completes_when_the_last_generation_ends() {
        let life = Arc::new(Lifecycle::default());
        life.until_idle().await;
        let (a, b) = (life.track(), life.track());
        assert_eq!(life.in_flight(), 2);
        let waiter = {
            let life = life.clone();
            tokio::spawn(async move { life.until_idle().await })
        };
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "one generation is still in flight");
        drop(b);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("idle once both ended")
            .unwrap();
        assert!(!life.draining() && !life.cancelling());
        life.drain();
        life.cancel_all();
        assert!(life.draining() && life.cancelling());
    }
}
