//! Prometheus metrics: requests by status code, tokens, time to first token and
//! inter-token latency histograms, speculation counters; and what a load balancer or
//! an operator needs to place sessions: readiness, queue depth, requests in flight,
//! KV pages free, the hot-cache ratio.

use super::Readiness;
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

    /// The Prometheus text exposition: the server's counters, its `readiness`, and the
    /// engine's counters when it answered.
    pub fn render(&self, status: Option<&EngineStatus>, readiness: &Readiness) -> String {
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
        let flag = |b: bool| usize::from(b);
        let server_gauges = [
            (
                "edge_ready",
                "1 while the server takes new work (GET /ready answers 200), else 0.",
                flag(readiness.ready()),
            ),
            (
                "edge_draining",
                "1 while the server drains on its way down (new requests get 503).",
                flag(readiness.draining),
            ),
            (
                "edge_queue_depth",
                "Requests queued for the engine, not yet admitted.",
                readiness.queued,
            ),
            (
                "edge_queue_capacity",
                "Requests the engine queue holds (one more gets 429).",
                readiness.capacity,
            ),
            (
                "edge_ready_queue_limit",
                "Queue depth at which the server stops being ready.",
                readiness.queue_limit,
            ),
        ];
        for (name, help, v) in server_gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        if let Some(s) = status {
            let page = s.page_bytes.max(1);
            let c = &s.cache;
            let engine_gauges = [
                (
                    "edge_kv_page_bytes",
                    "Bytes of one KV page (the unit of the edge_kv_pages_* gauges).",
                    s.page_bytes,
                ),
                (
                    "edge_kv_pages_total",
                    "The cache budget, in pages (it holds pages, recurrent states and prefix snapshots).",
                    c.budget / page,
                ),
                (
                    "edge_kv_pages_free",
                    "Budget no live request pins, in pages: room for new requests (prefix snapshots in it are evicted as needed).",
                    c.budget.saturating_sub(c.pinned) / page,
                ),
                (
                    "edge_kv_pages_in_use",
                    "KV pages referenced by a live request or a prefix snapshot.",
                    c.pages_in_use / page,
                ),
                (
                    "edge_kv_pinned_bytes",
                    "Bytes live requests hold or have reserved (never evicted).",
                    c.pinned,
                ),
                (
                    "edge_kv_snapshot_bytes",
                    "Bytes of prefix snapshots (recurrent states, logits, hidden rows).",
                    c.snapshots,
                ),
                (
                    "edge_sequences",
                    "Live sequences in the cache.",
                    c.sequences,
                ),
                (
                    "edge_prefix_cache_entries",
                    "Prefix snapshots kept for reuse.",
                    c.entries,
                ),
            ];
            for (name, help, v) in engine_gauges {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
            }
            let _ = writeln!(
                out,
                "# HELP edge_hot_cache_ratio Prompt tokens restored from the prefix cache over all prompt tokens of finished requests.\n# TYPE edge_hot_cache_ratio gauge\nedge_hot_cache_ratio {}",
                s.stats.hot_cache_ratio()
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineStats;
    use edge_kvcache::CacheUsage;

    /// The value of the sample `name` in `text`, checking its HELP and TYPE lines.
    fn sample(text: &str, name: &str) -> f64 {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")));
        line.unwrap_or_else(|| panic!("{name}")).parse().unwrap()
    }

    #[test]
    fn placement_gauges() {
        let readiness = Readiness {
            draining: false,
            engine_running: true,
            queued: 5,
            capacity: 8,
            queue_limit: 6,
        };
        let status = EngineStatus {
            in_flight: 3,
            waiting: 1,
            stats: EngineStats {
                requests: 4,
                prompt_tokens: 1000,
                cached_tokens: 900,
                ..EngineStats::default()
            },
            cache: CacheUsage {
                budget: 100 * 64,
                pinned: 30 * 64 + 10,
                pages_in_use: 40 * 64,
                ..CacheUsage::default()
            },
            page_bytes: 64,
            refcounts_ok: true,
        };
        let text = Metrics::default().render(Some(&status), &readiness);
        for (name, v) in [
            ("edge_ready", 1.0),
            ("edge_draining", 0.0),
            ("edge_queue_depth", 5.0),
            ("edge_queue_capacity", 8.0),
            ("edge_ready_queue_limit", 6.0),
            ("edge_in_flight", 3.0),
            ("edge_waiting", 1.0),
            ("edge_kv_page_bytes", 64.0),
            ("edge_kv_pages_total", 100.0),
            // 30 pages and 10 bytes pinned: 69 whole pages left.
            ("edge_kv_pages_free", 69.0),
            ("edge_kv_pages_in_use", 40.0),
            ("edge_hot_cache_ratio", 0.9),
        ] {
            assert_eq!(sample(&text, name), v, "{name}");
        }
        // Without the engine's answer, the server's own gauges are still there.
        let full = Readiness {
            queued: 6,
            ..readiness
        };
        let text = Metrics::default().render(None, &full);
        assert_eq!(sample(&text, "edge_ready"), 0.0);
        assert!(!text.contains("edge_kv_pages_free"));
    }
}
