//! Room in the cache, before each step: running requests grow their reservations by
//! the rows the step writes, preempting the newest requests when the budget is short
//! (the way vLLM preempts by recomputation); then waiting requests are placed, oldest
//! first, while they fit.

use super::Engine;
use super::StopReason;
use super::active::{Active, Event, Phase};
use edge_kvcache::{KvCacheError, SequenceCache};
use edge_model::Backend;
use std::time::{Duration, Instant};

/// How often the callers of waiting requests are asked whether they are still there
/// ([`Event::Alive`]), so a request whose caller left stops waiting soon after.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(100);

impl<B: Backend> Engine<B> {
    /// Makes room for this step: grows what running requests write, then places
    /// waiting requests, and drops waiting ones whose callers left.
    pub(super) fn schedule(&mut self) {
        self.probe_waiting();
        self.grow();
        self.place_waiting();
    }

    /// The rows request `a` writes in the next step, when it decodes: its next token
    /// and, when it speculates, the draft rows past it (a prefill stays within the
    /// reservation it was placed with).
    fn rows_next_step(&self, a: &Active<B>) -> Option<usize> {
        if !matches!(a.phase, Phase::Decode { .. }) {
            return None;
        }
        let len = self.cache.sequence(a.seq?).ok()?.len;
        Some(len + 1 + self.lookahead(a.speculator.is_some()))
    }

    /// Grows each decoding request's reservation, oldest first, to cover the rows its
    /// next step writes. When the budget cannot, the newest request (maybe this one)
    /// is preempted and the oldest keep going; a request alone that still cannot grow
    /// ends with the cache's error (admission rules that out).
    fn grow(&mut self) {
        let mut i = 0;
        while i < self.active.len() {
            let (Some(rows), Some(seq)) =
                (self.rows_next_step(&self.active[i]), self.active[i].seq)
            else {
                i += 1;
                continue;
            };
            if let Err(e) = self.cache.reserve(seq, rows) {
                let live = |a: &Active<B>| !matches!(a.phase, Phase::Done);
                let victim = self.active.iter().rposition(live).unwrap_or(i);
                let others = self.active.iter().filter(|a| live(a)).count() > 1;
                match e {
                    KvCacheError::OverBudget { .. } if others => self.preempt(victim),
                    e => {
                        self.active[i].fail(e.into());
                        i += 1;
                    }
                }
            } else {
                i += 1;
            }
        }
    }

    /// Takes running request `at` out of the cache: its speculator ends, its pages go
    /// back, and it waits (ahead of every newer request) to be placed again.
    fn preempt(&mut self, at: usize) {
        let mut a = self.active.remove(at);
        self.stop_speculating(&mut a);
        if let Some(seq) = a.seq.take()
            && let Err(e) = self.cache.release(seq)
        {
            return self.finish(a, Err(e.into()));
        }
        a.phase = Phase::Waiting;
        self.stats.preemptions += 1;
        let at = self.waiting.partition_point(|w| w.id < a.id);
        self.waiting.insert(at, a);
    }

    /// Places waiting requests, oldest first, while fewer than `max_sequences` run and
    /// the cache holds the next one with a page to spare for each decoding request
    /// (so placing it does not preempt another at once). The oldest waits for room
    /// rather than letting newer ones pass it.
    pub(super) fn place_waiting(&mut self) {
        while self.active.len() < self.config.max_sequences {
            let Some(mut a) = self.waiting.pop_front() else {
                return;
            };
            let decoding = (self.active.iter())
                .filter(|a| matches!(a.phase, Phase::Decode { .. }))
                .count();
            let headroom = decoding * self.config.cache.block_size;
            match self.place(&mut a, headroom) {
                Ok(true) => {
                    let at = self.active.partition_point(|r| r.id < a.id);
                    self.active.insert(at, a);
                }
                Ok(false) => {
                    self.waiting.push_front(a);
                    return;
                }
                Err(e) => self.finish(a, Err(e)),
            }
        }
    }

    /// Drops the waiting requests whose callers left (at most every
    /// [`PROBE_INTERVAL`]).
    fn probe_waiting(&mut self) {
        if self.waiting.is_empty() || self.probed.elapsed() < PROBE_INTERVAL {
            return;
        }
        self.probed = Instant::now();
        let waiting = std::mem::take(&mut self.waiting);
        for mut a in waiting {
            if a.send(Event::Alive) {
                self.waiting.push_back(a);
            } else {
                a.end(StopReason::Cancelled);
                self.finish(a, Ok(()));
            }
        }
    }
}
