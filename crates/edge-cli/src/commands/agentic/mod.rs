//! `edge-llm bench agentic`: the MLPerf Edge Agentic replay. Recorded agent
//! conversations (MLCommons JSONL) are replayed turn by turn, single stream, exactly
//! as the harness sends them, in-process or against any OpenAI-compatible endpoint;
//! it reports TTFT, TPOT, latency, throughput, prompt-cache reuse, speculative
//! acceptance and the harness's inline IoU score, as a table, a JSON report and an
//! SVG chart. `--compare A.json B.json` draws two reports on one chart.

pub mod client;
mod iou;
mod metrics;
mod plot;
mod replay;
mod report;

use crate::cli_error::CliError;
use clap::Args;
use client::{BackendArgs, OpenBackend};
use edge_benches::agentic::read_trajectories;
use plot::Series;
use report::{Report, RunInfo};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Flags of `bench agentic`.
#[derive(Args, Debug)]
pub struct AgenticArgs {
    /// The conversations: MLCommons Edge Agentic JSONL
    /// (`examples/11_Edge_Agentic_Example/agentic_coding_2.5h.jsonl` of
    /// github.com/mlcommons/endpoints).
    #[arg(long, required_unless_present = "compare")]
    pub dataset: Option<PathBuf>,
    /// The in-process engine or the endpoint.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Conversations to replay, from the first (default: all).
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Client turns per conversation at most (default: all).
    #[arg(long)]
    pub max_turns: Option<usize>,
    /// `max_completion_tokens` of every request.
    #[arg(long, default_value_t = 1024)]
    pub max_new_tokens: usize,
    /// Write the JSON report here, and the chart beside it (same stem, `.svg`).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Compare two reports: print them side by side and draw them on one chart.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<PathBuf>>,
    /// Where to write the chart (default: beside the report; for `--compare`,
    /// `A_vs_B.svg` beside A).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Runs `bench agentic`.
pub fn run(a: AgenticArgs) -> Result<(), CliError> {
    if let Some(pair) = &a.compare {
        return compare(&pair[0], &pair[1], a.plot.as_deref());
    }
    let dataset = a
        .dataset
        .as_deref()
        .ok_or_else(|| CliError::Usage("--dataset is required".into()))?;
    if a.max_new_tokens == 0 {
        return Err(CliError::Usage(
            "--max-new-tokens must be at least 1".into(),
        ));
    }
    let all = read_trajectories(dataset)?;
    let count = a.conversations.unwrap_or(all.len()).min(all.len());
    let selected: Vec<_> = all[..count]
        .iter()
        .map(|t| (t, a.max_turns.unwrap_or(usize::MAX).min(t.turns())))
        .collect();
    let expected: usize = selected.iter().map(|(_, n)| n).sum();
    if expected == 0 {
        return Err(CliError::Usage(format!(
            "no turns to replay: {} holds {} conversations, and --conversations and \
             --max-turns select none of their turns",
            dataset.display(),
            all.len()
        )));
    }

    let OpenBackend {
        mut backend,
        model,
        endpoint_url,
    } = a.backend.open()?;

    let bar = super::progress_bar(expected, "turns");
    let started = Instant::now();
    let outcome = replay::replay(
        backend.as_mut(),
        &selected,
        &model,
        a.max_new_tokens,
        &mut |t| {
            bar.inc(1);
            let ttft = t.ttft_ms.map_or("-".into(), |v| format!("{v:.0} ms"));
            bar.set_message(format!("{} TTFT {ttft}", t.conversation));
        },
    );
    let duration = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    let info = RunInfo {
        mode: backend.mode().to_string(),
        model,
        endpoint: endpoint_url,
        dataset: dataset.display().to_string(),
        conversations: count,
        max_new_tokens: a.max_new_tokens,
        turns_expected: expected,
    };
    let mut report = Report::new(info, outcome.records, duration, backend.reconnects());
    report.error = outcome.fatal.as_ref().map(ToString::to_string);
    report.drop_conversations(&outcome.dropped);
    for d in &outcome.dropped {
        eprintln!(
            "warning: conversation {} stopped at turn {} ({}): its remaining turns are missing",
            d.conversation, d.turn, d.reason
        );
    }
    print(&report::table(&[(report.mode.as_str(), &report)]));
    if let Some(path) = &a.report {
        report.write(path)?;
        let svg = a.plot.clone().unwrap_or_else(|| path.with_extension("svg"));
        let series = [Series {
            label: &report.mode,
            turns: &report.turns,
        }];
        plot::write(&svg, &series)?;
        eprintln!("wrote {} and {}", path.display(), svg.display());
    } else if let Some(svg) = &a.plot {
        plot::write(
            svg,
            &[Series {
                label: &report.mode,
                turns: &report.turns,
            }],
        )?;
        eprintln!("wrote {}", svg.display());
    }
    match outcome.fatal {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Prints the table; a closed stdout (`| head`) is not an error worth a panic.
fn print(table: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{table}");
}

/// `--compare A B`: both reports side by side, and on one chart.
fn compare(a: &Path, b: &Path, plot_path: Option<&Path>) -> Result<(), CliError> {
    let (ra, rb) = (Report::read(a)?, Report::read(b)?);
    let stem = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (mut la, mut lb) = (stem(a), stem(b));
    if la == lb {
        la = format!("A {la}");
        lb = format!("B {lb}");
    }
    print(&report::table(&[(&la, &ra), (&lb, &rb)]));
    let svg = plot_path
        .map(Path::to_path_buf)
        .unwrap_or_else(|| a.with_file_name(format!("{}_vs_{}.svg", stem(a), stem(b))));
    plot::write(
        &svg,
        &[
            Series {
                label: &la,
                turns: &ra.turns,
            },
            Series {
                label: &lb,
                turns: &rb.turns,
            },
        ],
    )?;
    eprintln!("wrote {}", svg.display());
    Ok(())
}
