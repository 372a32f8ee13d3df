//! Readiness: whether the server should be sent new work. A load balancer or an
//! orchestrator asks `GET /ready` and stops placing new sessions on a server that
//! answers 503: one draining on its way down, one whose engine queue has reached the
//! readiness limit (by default its capacity, where the next request would get 429),
//! or one whose engine thread has stopped.
//!
//! The answer comes from counters only: it never waits for an engine step, so a
//! probe stays fast while a long prefill runs.

use serde_json::{Value, json};

/// Where the server stands for new work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The server is draining (shutting down): new requests get 503.
    pub draining: bool,
    /// The engine thread is running.
    pub engine_running: bool,
    /// Requests submitted to the engine and not yet admitted.
    pub queued: usize,
    /// The queue's capacity (one more request is refused with 429).
    pub capacity: usize,
    /// Not ready once this many requests are queued (at most `capacity`).
    pub queue_limit: usize,
}

impl Readiness {
    /// Why new work should go elsewhere; `None` when the server is ready.
    pub fn reason(&self) -> Option<&'static str> {
        if self.draining {
            Some("draining")
        } else if !self.engine_running {
            Some("engine_stopped")
        } else if self.queued >= self.queue_limit {
            Some("queue_full")
        } else {
            None
        }
    }

    /// Whether the server takes new work.
    pub fn ready(&self) -> bool {
        self.reason().is_none()
    }

    /// The body of `GET /ready`.
    pub fn body(&self) -> Value {
        json!({
            "status": if self.ready() { "ready" } else { "not_ready" },
            "reason": self.reason(),
            "draining": self.draining,
            "engine_running": self.engine_running,
            "queued": self.queued,
            "queue_limit": self.queue_limit,
            "queue_capacity": self.capacity,
        })
    }
}

/// The readiness limit for a queue of `capacity` under a requested `limit`: the
/// capacity when none was asked for, never more than it, never less than 1.
pub(crate) fn queue_limit(capacity: usize, limit: Option<usize>) -> usize {
    limit.unwrap_or(capacity).clamp(1, capacity.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(queued: usize) -> Readiness {
        Readiness {
            draining: false,
            engine_running: true,
            queued,
            capacity: 4,
            queue_limit: 3,
        }
    }

    #[test]
    fn ready_until_the_queue_reaches_its_limit_or_the_server_drains() {
        assert!(at(0).ready() && at(2).ready());
        assert_eq!(at(3).reason(), Some("queue_full"));
        assert_eq!(at(4).reason(), Some("queue_full"));
        let draining = Readiness {
            draining: true,
            ..at(0)
        };
        assert_eq!(draining.reason(), Some("draining"));
        let stopped = Readiness {
            engine_running: false,
            ..at(0)
        };
        assert_eq!(stopped.reason(), Some("engine_stopped"));
        assert_eq!(at(1).body()["status"], "ready");
        assert!(at(1).body()["reason"].is_null());
        let full = at(3).body();
        assert_eq!(
            (full["status"].as_str(), full["queued"].as_u64()),
            (Some("not_ready"), Some(3))
        );
    }

    #[test]
    fn the_limit_defaults_to_the_capacity_and_stays_within_it() {
        assert_eq!(queue_limit(64, None), 64);
        assert_eq!(queue_limit(64, Some(48)), 48);
        assert_eq!(queue_limit(64, Some(100)), 64);
        assert_eq!(queue_limit(64, Some(0)), 1);
    }
}
