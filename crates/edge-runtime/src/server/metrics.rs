//! Prometheus metrics: requests by status code, tokens, time to first token and
//! inter-token latency histograms, speculation counters.

use crate::EngineStatus;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Bucket bounds of the time-to-first-token histogram, seconds.
const TTFT_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Bucket bounds of the inter-token latency histogram, seconds.
const ITL_BOUNDS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// A fixed-bucket histogram.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

#[derive(Debug)]
struct Inner {
    by_status: BTreeMap<u16, u64>,
    ttft: Histogram,
    itl: Histogram,
    drafted: u64,
    accepted: u64,
}

/// The server's metrics (shared by all requests).
#[derive(Debug)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            inner: Mutex::new(Inner {
                by_status: BTreeMap::new(),
                ttft: Histogram::new(TTFT_BOUNDS),
                itl: Histogram::new(ITL_BOUNDS),
                drafted: 0,
                accepted: 0,
            }),
        }
    }
}

impl Metrics {
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// Counts a response.
    pub fn response(&self, status: u16) {
        self.with(|m| *m.by_status.entry(status).or_default() += 1);
    }

    /// Records a time to first token.
    pub fn ttft(&self, seconds: f64) {
        self.with(|m| m.ttft.observe(seconds));
    }

    /// Records the time between two tokens.
    pub fn inter_token(&self, seconds: f64) {
        self.with(|m| m.itl.observe(seconds));
    }

    /// Adds a request's speculation counters.
    pub fn speculation(&self, drafted: usize, accepted: usize) {
        self.with(|m| {
            m.drafted += drafted as u64;
            m.accepted += accepted as u64;
        });
    }

    /// The Prometheus text exposition, with the engine's counters when it answered.
    pub fn render(&self, status: Option<&EngineStatus>) -> String {
        let mut out = String::new();
        self.with(|m| {
            out.push_str(
                "# HELP edge_requests_total HTTP responses by status code.\n\
                 # TYPE edge_requests_total counter\n",
            );
            for (code, n) in &m.by_status {
                let _ = writeln!(out, "edge_requests_total{{code=\"{code}\"}} {n}");
            }
            m.ttft.render(
                &mut out,
                "edge_time_to_first_token_seconds",
                "Time from a generation request to its first token.",
            );
            m.itl.render(
                &mut out,
                "edge_inter_token_latency_seconds",
                "Time between consecutive tokens of a request.",
            );
            let counters = [
                (
                    "edge_spec_drafted_tokens_total",
                    "Speculative draft tokens proposed.",
                    m.drafted,
                ),
                (
                    "edge_spec_accepted_tokens_total",
                    "Speculative draft tokens accepted.",
                    m.accepted,
                ),
            ];
            for (name, help, v) in counters {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
                );
            }
        });
        if let Some(s) = status {
            let _ = writeln!(
                out,
                "# HELP edge_in_flight Requests prefilling, decoding or waiting in the engine for cache room.\n# TYPE edge_in_flight gauge\nedge_in_flight {}",
                s.in_flight
            );
            let _ = writeln!(
                out,
                "# HELP edge_waiting Requests waiting in the engine for cache room (new or preempted).\n# TYPE edge_waiting gauge\nedge_waiting {}",
                s.waiting
            );
            let counters = [
                (
                    "edge_prompt_tokens_total",
                    "Prompt tokens of finished requests.",
                    s.stats.prompt_tokens,
                ),
                (
                    "edge_cached_tokens_total",
                    "Prompt tokens restored from the prefix cache.",
                    s.stats.cached_tokens,
                ),
                (
                    "edge_generated_tokens_total",
                    "Tokens generated.",
                    s.stats.generated_tokens,
                ),
                (
                    "edge_engine_requests_total",
                    "Requests the engine finished.",
                    s.stats.requests,
                ),
                (
                    "edge_preemptions_total",
                    "Times a running request gave its pages back for another to grow (it resumes by recomputation).",
                    s.stats.preemptions,
                ),
            ];
            for (name, help, v) in counters {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
                );
            }
        }
        out
    }
}
