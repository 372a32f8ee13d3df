//! Per-turn figures and their summaries, as the MLPerf harness defines them:
//! TTFT (first content, reasoning or tool-call chunk), TPOT ((completion − first
//! chunk) ÷ (output tokens − 1)), latency, output tokens per second.

use super::client::{ChatReply, ToolCall};
use serde::{Deserialize, Serialize};

/// p50, p90, p99 and mean of a figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
}

/// The `q`-th percentile (0..=100) of sorted `xs`, linearly interpolated between the
/// closest ranks (numpy's default).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let rank = q / 100.0 * (n - 1) as f64;
            let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

impl Dist {
    /// The summary of `values` (NaNs left out); `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Dist> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Dist {
            p50: percentile(&v, 50.0),
            p90: percentile(&v, 90.0),
            p99: percentile(&v, 99.0),
            mean: v.iter().sum::<f64>() / v.len() as f64,
        })
    }
}

/// One replayed turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The conversation's id.
    pub conversation: String,
    /// The client turn within it, from 0.
    pub turn: usize,
    /// Time to first token, ms (`None`: the reply carried nothing).
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms (`None` with fewer than 2 tokens).
    pub tpot_ms: Option<f64>,
    /// Issue to completion, ms.
    pub latency_ms: f64,
    /// Generated tokens (the server's `completion_tokens`).
    pub output_tokens: u64,
    /// Output tokens ÷ latency.
    pub output_tokens_per_s: f64,
    /// Prompt tokens (the server's count).
    pub prompt_tokens: u64,
    /// Prompt tokens the server took from its prefix cache, when it says.
    pub cached_tokens: Option<u64>,
    /// Target forwards that verified drafts, when the server reports speculation.
    pub target_forwards: Option<u64>,
    /// Drafts accepted, when the server reports speculation.
    pub accepted: Option<u64>,
    /// Tokens per target forward (accepted drafts plus one).
    pub mean_accepted: Option<f64>,
    /// Inline IoU against the recorded answer (`None`: not scored).
    pub iou: Option<f64>,
    /// How the reply ended.
    pub finish_reason: Option<String>,
    /// The tool calls the model made.
    pub tool_calls: Vec<ToolCall>,
}

impl TurnRecord {
    /// The figures of `reply` to turn `turn` of `conversation`, scored `iou`.
    pub fn new(conversation: &str, turn: usize, reply: &ChatReply, iou: Option<f64>) -> Self {
        let usage = reply.usage.unwrap_or_default();
        let out = usage.completion_tokens;
        let tpot_ms = match reply.ttft_ms {
            Some(first) if out > 1 => Some((reply.latency_ms - first) / (out - 1) as f64),
            _ => None,
        };
        let spec = usage.speculation;
        TurnRecord {
            conversation: conversation.to_string(),
            turn,
            ttft_ms: reply.ttft_ms,
            tpot_ms,
            latency_ms: reply.latency_ms,
            output_tokens: out,
            output_tokens_per_s: if reply.latency_ms > 0.0 {
                out as f64 / (reply.latency_ms / 1e3)
            } else {
                0.0
            },
            prompt_tokens: usage.prompt_tokens,
            cached_tokens: usage.cached_tokens,
            target_forwards: spec.map(|s| s.target_forwards),
            accepted: spec.map(|s| s.accepted),
            mean_accepted: spec.and_then(|s| s.mean_accepted()),
            iou,
            finish_reason: reply.finish_reason.clone(),
            tool_calls: reply.tool_calls.clone(),
        }
    }
}

/// Σ cached ÷ Σ prompt tokens over the turns whose cache count is known.
pub fn hot_cache_ratio(turns: &[TurnRecord]) -> Option<f64> {
    let (mut cached, mut prompt) = (0u64, 0u64);
    for t in turns {
        if let Some(c) = t.cached_tokens {
            cached += c;
            prompt += t.prompt_tokens;
        }
    }
    (prompt > 0).then(|| cached as f64 / prompt as f64)
}

/// Tokens per target forward over all speculated turns: Σ(accepted + forwards) ÷
/// Σ forwards.
pub fn mean_accepted(turns: &[TurnRecord]) -> Option<f64> {
    let (mut forwards, mut accepted) = (0u64, 0u64);
    for t in turns {
        if let (Some(f), Some(a)) = (t.target_forwards, t.accepted) {
            forwards += f;
            accepted += a;
        }
    }
    (forwards > 0).then(|| (accepted + forwards) as f64 / forwards as f64)
}

/// The mean IoU over the scored turns, and how many there were.
pub fn mean_iou(turns: &[TurnRecord]) -> (Option<f64>, usize) {
    let scores: Vec<f64> = turns.iter().filter_map(|t| t.iou).collect();
    let mean = (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64);
    (mean, scores.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::agentic::client::{Speculation, Usage};

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 5.5);
        assert!((percentile(&v, 90.0) - 9.1).abs() < 1e-12);
        assert!((percentile(&v, 99.0) - 9.91).abs() < 1e-12);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 100.0), 10.0);
        let d = Dist::of([3.0, f64::NAN, 1.0, 2.0]).unwrap();
        assert_eq!((d.p50, d.mean), (2.0, 2.0));
        assert_eq!(Dist::of([7.0]).unwrap().p99, 7.0);
        assert!(Dist::of([]).is_none());
    }

    fn reply(
        ttft: Option<f64>,
        latency: f64,
        out: u64,
        prompt: u64,
        cached: Option<u64>,
    ) -> ChatReply {
        ChatReply {
            ttft_ms: ttft,
            latency_ms: latency,
            usage: Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: out,
                cached_tokens: cached,
                speculation: Some(Speculation {
                    target_forwards: out / 2,
                    accepted: out / 2,
                }),
            }),
            ..ChatReply::default()
        }
    }

    #[test]
    fn turn_figures_and_totals() {
        let a = TurnRecord::new(
            "c",
            0,
            &reply(Some(100.0), 1100.0, 11, 1000, Some(0)),
            Some(1.0),
        );
        assert_eq!(a.tpot_ms, Some(100.0));
        assert_eq!(a.output_tokens_per_s, 10.0);
        assert_eq!(a.mean_accepted, Some(2.0));
        let b = TurnRecord::new("c", 1, &reply(Some(50.0), 50.0, 1, 3000, Some(2000)), None);
        assert_eq!(b.tpot_ms, None);
        let c = TurnRecord::new("c", 2, &reply(None, 10.0, 0, 500, None), Some(0.0));
        let turns = [a, b, c];
        assert_eq!(hot_cache_ratio(&turns), Some(0.5));
        // forwards 5 + 0 + 0, accepted 5: 10 / 5.
        assert_eq!(mean_accepted(&turns), Some(2.0));
        assert_eq!(mean_iou(&turns), (Some(0.5), 2));
    }
}
