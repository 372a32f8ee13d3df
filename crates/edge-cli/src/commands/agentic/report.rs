//! The run's report: the JSON written with `--report` (top-level figures the MLPerf
//! harness reports, plus every turn), and the summary table printed at the end.

use super::metrics::{self, Dist, TurnRecord};
use crate::cli_error::CliError;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// A replay's results.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// `in-process` or `endpoint`.
    pub mode: String,
    /// The model name sent (endpoint) or served (in-process).
    pub model: String,
    /// The endpoint's URL, in endpoint mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The dataset file.
    pub dataset: String,
    /// Conversations replayed.
    pub conversations: usize,
    /// `max_completion_tokens` of every request.
    pub max_new_tokens: usize,
    /// Turns answered.
    pub turns_completed: usize,
    /// Turns selected for the run.
    pub turns_expected: usize,
    /// Wall time of the whole replay, seconds.
    pub duration_s: f64,
    /// Turns completed per second.
    pub qps: f64,
    /// Output tokens per second of the whole run.
    pub output_tokens_per_s: f64,
    /// Output tokens in all.
    pub output_tokens: u64,
    /// Σ cached ÷ Σ prompt tokens (`None`: the server reports no cache counts).
    pub hot_cache_ratio: Option<f64>,
    /// Prompt tokens in all.
    pub prompt_tokens: u64,
    /// Cached prompt tokens in all.
    pub cached_tokens: u64,
    /// Time to first token, ms.
    pub ttft_ms: Option<Dist>,
    /// Time per output token, ms.
    pub tpot_ms: Option<Dist>,
    /// Request latency, ms.
    pub latency_ms: Option<Dist>,
    /// Per-turn output tokens ÷ latency.
    pub turn_output_tokens_per_s: Option<Dist>,
    /// Tokens per target forward (`None`: no speculation reported).
    pub mean_accepted: Option<f64>,
    /// Mean inline IoU over the scored turns, the missing ones counting 0 (as the
    /// harness counts them).
    pub iou: Option<f64>,
    /// Turns with a recorded action, so scored (answered or missing).
    pub iou_scored_turns: usize,
    /// Connections reopened because the server closed one.
    pub reconnects: u64,
    /// The error that ended the run early, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Conversations cut short by a failed turn: `conversation`, `turn`, `reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<serde_json::Value>,
    /// Every turn.
    pub turns: Vec<TurnRecord>,
}

/// What a run was, besides its turns.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// `in-process` or `endpoint`.
    pub mode: String,
    /// The model name.
    pub model: String,
    /// The endpoint's URL, if any.
    pub endpoint: Option<String>,
    /// The dataset file.
    pub dataset: String,
    /// Conversations replayed.
    pub conversations: usize,
    /// `max_completion_tokens`.
    pub max_new_tokens: usize,
    /// Turns selected.
    pub turns_expected: usize,
}

impl Report {
    /// The report of `turns`, run in `duration_s` seconds.
    pub fn new(info: RunInfo, turns: Vec<TurnRecord>, duration_s: f64, reconnects: u64) -> Self {
        let output_tokens: u64 = turns.iter().map(|t| t.output_tokens).sum();
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        let (iou, iou_scored_turns) = metrics::mean_iou(&turns);
        Report {
            mode: info.mode,
            model: info.model,
            endpoint: info.endpoint,
            dataset: info.dataset,
            conversations: info.conversations,
            max_new_tokens: info.max_new_tokens,
            turns_completed: turns.len(),
            turns_expected: info.turns_expected,
            duration_s,
            qps: per_s(turns.len() as f64),
            output_tokens_per_s: per_s(output_tokens as f64),
            output_tokens,
            hot_cache_ratio: metrics::hot_cache_ratio(&turns),
            prompt_tokens: turns.iter().map(|t| t.prompt_tokens).sum(),
            cached_tokens: turns.iter().filter_map(|t| t.cached_tokens).sum(),
            ttft_ms: Dist::of(turns.iter().filter_map(|t| t.ttft_ms)),
            tpot_ms: Dist::of(turns.iter().filter_map(|t| t.tpot_ms)),
            latency_ms: Dist::of(turns.iter().map(|t| t.latency_ms)),
            turn_output_tokens_per_s: Dist::of(turns.iter().map(|t| t.output_tokens_per_s)),
            mean_accepted: metrics::mean_accepted(&turns),
            iou,
            iou_scored_turns,
            reconnects,
            error: None,
            dropped: Vec::new(),
            turns,
        }
    }

    /// Records conversations cut short: their missing scored turns count 0 in the IoU.
    pub fn drop_conversations(&mut self, dropped: &[super::replay::Dropped]) {
        let missing: usize = dropped.iter().map(|d| d.scored_turns).sum();
        if missing > 0 {
            let answered = self.iou_scored_turns;
            let total = answered + missing;
            self.iou = Some(self.iou.unwrap_or(0.0) * answered as f64 / total as f64);
            self.iou_scored_turns = total;
        }
        self.dropped = (dropped.iter())
            .map(|d| {
                serde_json::json!({"conversation": d.conversation, "turn": d.turn, "reason": d.reason})
            })
            .collect();
    }

    /// Reads a report written by [`Report::write`].
    pub fn read(path: &Path) -> Result<Report, CliError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| {
            CliError::Usage(format!(
                "{} is not a `bench agentic` report: {e}",
                path.display()
            ))
        })
    }

    /// Writes the report as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<(), CliError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| CliError::Write {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        std::fs::write(path, text + "\n").map_err(|e| CliError::Write {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }
}

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn dist_rows(
    rows: &mut Vec<(String, Vec<String>)>,
    name: &str,
    ds: &[Option<Dist>],
    digits: usize,
) {
    type Pick = fn(&Dist) -> f64;
    let picks: [(&str, Pick); 4] = [
        ("p50", |d| d.p50),
        ("p90", |d| d.p90),
        ("p99", |d| d.p99),
        ("mean", |d| d.mean),
    ];
    for (label, pick) in picks {
        let cells = ds
            .iter()
            .map(|d| opt(d.as_ref().map(pick), digits))
            .collect();
        rows.push((format!("{name} {label}"), cells));
    }
}

/// The summary table of one report, or of several side by side.
pub fn table(reports: &[(&str, &Report)]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&Report) -> String| {
        rows.push((
            name.to_string(),
            reports.iter().map(|(_, r)| f(r)).collect(),
        ));
    };
    row("mode", &|r| r.mode.clone());
    row("turns", &|r| {
        format!("{}/{}", r.turns_completed, r.turns_expected)
    });
    row("duration s", &|r| format!("{:.1}", r.duration_s));
    row("QPS", &|r| format!("{:.4}", r.qps));
    row("output tok/s", &|r| format!("{:.1}", r.output_tokens_per_s));
    row("prompt tokens", &|r| r.prompt_tokens.to_string());
    row("cached tokens", &|r| r.cached_tokens.to_string());
    row("hot-cache ratio", &|r| opt(r.hot_cache_ratio, 4));
    row("mean accepted", &|r| opt(r.mean_accepted, 3));
    row("IoU", &|r| {
        format!("{} ({} scored)", opt(r.iou, 4), r.iou_scored_turns)
    });
    row("reconnects", &|r| r.reconnects.to_string());
    let pick =
        |f: fn(&Report) -> Option<Dist>| reports.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    dist_rows(&mut rows, "TTFT ms", &pick(|r| r.ttft_ms), 1);
    dist_rows(&mut rows, "TPOT ms", &pick(|r| r.tpot_ms), 2);
    dist_rows(&mut rows, "latency ms", &pick(|r| r.latency_ms), 1);
    dist_rows(
        &mut rows,
        "turn tok/s",
        &pick(|r| r.turn_output_tokens_per_s),
        1,
    );
    let name_w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let col_w: Vec<usize> = (0..reports.len())
        .map(|i| {
            rows.iter()
                .map(|(_, c)| c[i].len())
                .chain([reports[i].0.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:name_w$}", "");
    for (i, (label, _)) in reports.iter().enumerate() {
        let _ = write!(out, "  {label:>w$}", w = col_w[i]);
    }
    out.push('\n');
    for (name, cells) in &rows {
        let _ = write!(out, "{name:name_w$}");
        for (i, c) in cells.iter().enumerate() {
            let _ = write!(out, "  {c:>w$}", w = col_w[i]);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_and_tabulate() {
        let turn = TurnRecord {
            conversation: "c".into(),
            ttft_ms: Some(10.0),
            latency_ms: 20.0,
            output_tokens: 3,
            prompt_tokens: 100,
            cached_tokens: Some(90),
            iou: Some(0.5),
            ..TurnRecord::default()
        };
        let info = RunInfo {
            mode: "in-process".into(),
            model: "demo".into(),
            endpoint: None,
            dataset: "d.jsonl".into(),
            conversations: 1,
            max_new_tokens: 8,
            turns_expected: 2,
        };
        let r = Report::new(info, vec![turn], 2.0, 0);
        assert_eq!((r.qps, r.output_tokens_per_s), (0.5, 1.5));
        assert_eq!(r.hot_cache_ratio, Some(0.9));
        let v = serde_json::to_value(&r).unwrap();
        for key in [
            "turns_completed",
            "turns_expected",
            "duration_s",
            "qps",
            "output_tokens_per_s",
            "hot_cache_ratio",
            "prompt_tokens",
            "cached_tokens",
            "mean_accepted",
            "iou",
            "reconnects",
            "mode",
            "turns",
        ] {
            assert!(v.get(key).is_some(), "{key}");
        }
        assert_eq!(v["ttft_ms"]["p50"], 10.0);
        assert!(v["tpot_ms"].is_null());
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back.turns, r.turns);
        let t = table(&[("a", &r), ("b", &back)]);
        assert!(t.contains("hot-cache ratio") && t.contains("0.9000"), "{t}");
        assert!(
            t.lines()
                .all(|l| l.len() == t.lines().next().unwrap().len()),
            "{t}"
        );
    }
}
