//! `edge-llm bench bfcl`: BFCL v4 single-turn function-calling accuracy, scored with
//! a reproduction of bfcl's AST checker the way MLPerf Edge's harness runs it.
//!
//! The runner is generic over how a request is answered ([`run`]); the command can
//! also score answers recorded elsewhere (`--answers`) or check the checker against
//! the data's own ground truth (`--self-check`).

pub mod checker;
mod convert;
pub mod data;
pub mod mismatch;
mod pyvalue;
pub mod report;
pub mod selfcheck;
pub mod tools;

pub use checker::{Mismatch, ModelCall, check};
pub use data::{Category, Entry, Selection, load};
pub use report::{BfclReport, SampleResult};
pub use tools::{RequestOptions, request_body};

use super::agentic::client::{BackendArgs, ClientError, OpenBackend};
use crate::cli_error::CliError;
use clap::Args;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;

/// What loading data or running the benchmark can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BfclError {
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A line of a data, ground-truth or answers file is not what bfcl writes.
    #[error("{path}:{line}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// `--categories` names no BFCL v4 single-turn category.
    #[error("unknown BFCL category `{0}` (expected one of: {list})", list = category_list())]
    UnknownCategory(String),
}

fn category_list() -> String {
    Category::ALL.map(Category::name).join(", ")
}

/// Flags of `bench bfcl`.
#[derive(Args, Debug)]
pub struct BfclArgs {
    /// The folder with the `BFCL_v4_*.json` files and `possible_answer/` (the
    /// `bfcl_eval/data` folder of the `bfcl-eval` wheel).
    #[arg(long)]
    pub data: PathBuf,
    /// Comma-separated categories (default: the 12 MLPerf scores, all but
    /// live_relevance).
    #[arg(long, value_delimiter = ',')]
    pub categories: Vec<String>,
    /// Run the first N entries of each category.
    #[arg(long, conflicts_with = "mlperf")]
    pub limit: Option<usize>,
    /// MLPerf Edge's accuracy subset: the first 62% of each non-live category, 10%
    /// of the live and irrelevance ones, categories of ≤25 whole (995 entries).
    #[arg(long)]
    pub mlperf: bool,
    /// The in-process engine (default: the embedded demo model) or the endpoint
    /// that answers.
    #[command(flatten)]
    pub backend: BackendArgs,
    /// `max_completion_tokens` of each request.
    #[arg(long, default_value_t = 1024)]
    pub max_new_tokens: u32,
    /// Score recorded answers instead of asking a model: JSON lines of
    /// `{"id": …, "tool_calls": [{"name": …, "arguments": "<JSON text>" or {…}}]}`.
    #[arg(long, conflicts_with_all = ["model", "endpoint"])]
    pub answers: Option<PathBuf>,
    /// Answer every entry with its own ground truth: 100% on every category with
    /// ground truth, but for 7 entries of bfcl-eval 2026.3.23 whose ground truth
    /// contradicts its schema (listed in docs/BFCL.md).
    #[arg(long, conflicts_with_all = ["model", "endpoint", "answers"])]
    pub self_check: bool,
    /// Write the JSON report (figures, per-category counts, per-sample verdicts).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Also write each entry's request body, as JSON lines of `{"id", "body"}` (to
    /// replay against a server by hand, or compare with the harness's).
    #[arg(long)]
    pub requests: Option<PathBuf>,
}

/// How a request is answered: given the entry and the request body MLPerf would
/// send, the calls the model made.
pub type Answer<'a, E> = dyn FnMut(&Entry, &Value) -> Result<Vec<ModelCall>, E> + 'a;

/// Asks `answer` for each entry's calls (given the entry and the request body MLPerf
/// would send) and checks them. A backend error is that entry's failure
/// ([`Mismatch::NoAnswer`]), not the run's.
pub fn run<E: std::fmt::Display>(
    entries: &[Entry],
    opts: &RequestOptions,
    answer: &mut Answer<'_, E>,
) -> BfclReport {
    let samples = entries
        .iter()
        .map(|entry| {
            let body = request_body(entry, opts);
            let (calls, mismatch) = match answer(entry, &body) {
                Ok(calls) => {
                    let verdict = check(entry, &calls).err();
                    (calls, verdict)
                }
                Err(e) => (Vec::new(), Some(Mismatch::NoAnswer(e.to_string()))),
            };
            SampleResult {
                id: entry.id.clone(),
                category: entry.category,
                mismatch,
                calls,
            }
        })
        .collect();
    BfclReport { samples }
}

/// The categories named on the command line, or the default set.
pub fn parse_categories(names: &[String]) -> Result<Vec<Category>, BfclError> {
    if names.is_empty() {
        return Ok(Category::SCORED.to_vec());
    }
    names
        .iter()
        .filter(|n| !n.trim().is_empty())
        .map(|n| Category::parse(n).ok_or_else(|| BfclError::UnknownCategory(n.clone())))
        .collect()
}

/// Reads recorded answers by id.
pub fn load_answers(path: &std::path::Path) -> Result<HashMap<String, Vec<ModelCall>>, BfclError> {
    let text = std::fs::read_to_string(path).map_err(|e| BfclError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let mut out = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let malformed = |reason: String| BfclError::Malformed {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let v: Value = serde_json::from_str(line).map_err(|e| malformed(e.to_string()))?;
        let id = v["id"]
            .as_str()
            .ok_or_else(|| malformed("no string `id`".into()))?;
        let calls = v["tool_calls"]
            .as_array()
            .ok_or_else(|| malformed("no `tool_calls` list".into()))?
            .iter()
            .map(|c| {
                let name = c["name"]
                    .as_str()
                    .ok_or_else(|| malformed("a call has no string `name`".into()))?;
                Ok(match &c["arguments"] {
                    Value::String(text) => ModelCall::from_wire(name, text),
                    args => ModelCall {
                        name: name.to_string(),
                        arguments: args.clone(),
                    },
                })
            })
            .collect::<Result<Vec<_>, BfclError>>()?;
        out.insert(id.to_string(), calls);
    }
    Ok(out)
}

/// Runs `bench bfcl`.
pub fn command(a: BfclArgs) -> Result<(), CliError> {
    let categories = parse_categories(&a.categories)?;
    let selection = match (a.limit, a.mlperf) {
        (Some(n), _) => Selection::Limit(n),
        (None, true) => Selection::MlPerf,
        (None, false) => Selection::All,
    };
    let entries = load(&a.data, &categories, selection)?;
    let mut opts = RequestOptions {
        model: (a.backend.model_name.clone()).unwrap_or_else(|| "edge-llm".into()),
        max_completion_tokens: a.max_new_tokens,
    };
    if let Some(path) = &a.requests {
        let lines: String = entries
            .iter()
            .map(|e| json!({"id": e.id, "body": request_body(e, &opts)}).to_string() + "\n")
            .collect();
        std::fs::write(path, lines).map_err(|e| CliError::Write {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    }
    let report = if a.self_check {
        run(&entries, &opts, &mut |entry, _| {
            Ok::<_, String>(selfcheck::ground_truth_calls(entry))
        })
    } else if let Some(path) = &a.answers {
        let answers = load_answers(path)?;
        run(&entries, &opts, &mut |entry, _| {
            answers
                .get(&entry.id)
                .cloned()
                .ok_or_else(|| format!("no recorded answer for `{}`", entry.id))
        })
    } else {
        let OpenBackend {
            mut backend, model, ..
        } = a.backend.open()?;
        opts.model = model;
        let bar = super::progress_bar(entries.len(), "entries");
        // A server that cannot be reached ends the run (its report would only say
        // 0%); any other failure is that entry's.
        let mut unreachable = None;
        let report = run(&entries, &opts, &mut |entry, body| {
            bar.inc(1);
            bar.set_message(entry.id.clone());
            if unreachable.is_some() {
                return Err("skipped: the endpoint cannot be reached".to_string());
            }
            match backend.complete(body, None) {
                // Only structured calls count: a call left as text in `content` is
                // none, as in the harness.
                Ok(reply) => Ok((reply.tool_calls.iter())
                    .map(|c| ModelCall::from_wire(c.name.clone(), &c.arguments))
                    .collect()),
                Err(e @ ClientError::Connect { .. }) => {
                    let text = e.to_string();
                    unreachable = Some(e);
                    Err(text)
                }
                Err(e) => Err(e.to_string()),
            }
        });
        bar.finish_and_clear();
        if let Some(e) = unreachable {
            return Err(e.into());
        }
        report
    };
    print!("{}", report.table());
    if let Some(path) = &a.report {
        let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
        std::fs::write(path, text).map_err(|e| CliError::Write {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
