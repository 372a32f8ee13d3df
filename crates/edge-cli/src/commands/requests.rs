//! `generate --requests FILE.jsonl`: every line a request, run in order through one
//! engine, one JSON object printed per line as it finishes.

use super::generate::{Constrainer, PromptBuilder, reply_text};
use crate::cli_error::CliError;
use edge_model::Backend;
use edge_runtime::{Engine, GenerateOutput, GenerateRequest, Tokenizer};
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::Path;

/// What every line of a requests file is run with.
pub struct RequestsJob<'a> {
    /// The request each line fills in.
    pub base: &'a GenerateRequest,
    /// Renders text prompts.
    pub prompts: &'a PromptBuilder<'a>,
    /// Decodes replies (and prompts, for constraints).
    pub tokenizer: Option<&'a Tokenizer>,
    /// Keeps tool calls inside the offered tools' schemas (`--tool-calls`).
    pub constrainer: Option<&'a Constrainer>,
}

/// One parsed line.
fn parse_line(line: &str, job: &RequestsJob<'_>) -> Result<GenerateRequest, String> {
    let (base, prompts) = (job.base, job.prompts);
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let obj = v.as_object().ok_or("not a JSON object")?;
    let ids = |key: &str| -> Result<Option<Vec<usize>>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|x| {
                    (x.as_u64())
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| format!("`{key}` holds {x}, not a non-negative integer"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!("`{key}` must be an array of integers, not {other}")),
        }
    };
    let tools = match obj.get("tools") {
        None | Some(Value::Null) => prompts.tools(),
        // An empty list offers no tools, as in the server.
        Some(Value::Array(t)) if t.is_empty() => None,
        Some(t @ Value::Array(_)) => Some(t),
        Some(other) => return Err(format!("`tools` must be an array, not {other}")),
    };
    let (prompt, marks) = match (ids("prompt_ids")?, obj.get("prompt")) {
        (Some(_), Some(_)) => return Err("give `prompt_ids` or `prompt`, not both".into()),
        (Some(p), None) => {
            let p = (p.into_iter())
                .map(|t| u32::try_from(t).map_err(|_| format!("token id {t} is too large")))
                .collect::<Result<Vec<_>, _>>()?;
            (p, Vec::new())
        }
        (None, Some(Value::String(text))) => {
            (prompts.build_with(text, tools)).map_err(|e| e.to_string())?
        }
        (None, Some(other)) => return Err(format!("`prompt` must be a string, not {other}")),
        (None, None) => return Err("needs `prompt_ids` or `prompt`".into()),
    };
    let max_new_tokens = match obj.get("max_new_tokens") {
        None | Some(Value::Null) => base.max_new_tokens,
        Some(x) => (x.as_u64())
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("`max_new_tokens` must be a non-negative integer, not {x}"))?,
    };
    let mut reuse_points = marks;
    reuse_points.extend(ids("reuse_points")?.unwrap_or_default());
    for key in obj.keys() {
        let known = [
            "prompt_ids",
            "prompt",
            "max_new_tokens",
            "reuse_points",
            "tools",
        ];
        if !known.contains(&key.as_str()) {
            return Err(format!("unknown field `{key}`"));
        }
    }
    let tool_constraint = match (job.constrainer, job.tokenizer) {
        (Some(c), Some(t)) => c.constraint(tools, &prompt, t).map_err(|e| e.to_string())?,
        _ => None,
    };
    Ok(GenerateRequest {
        prompt,
        reuse_points,
        max_new_tokens,
        tool_constraint,
        ..base.clone()
    })
}

/// The JSON object a finished request prints.
pub fn output_json(out: &GenerateOutput, text: Option<&str>) -> Value {
    // Without speculation every decode forward emits one token (the first token comes
    // from the prefill).
    let (target_forwards, accepted, mean) = match out.speculation {
        Some(s) => (s.target_forwards, s.accepted, s.mean_accepted()),
        None => (out.tokens.len().saturating_sub(1), 0, 1.0),
    };
    json!({
        "tokens": out.tokens,
        "text": text,
        "prompt_tokens": out.prompt_tokens,
        "cached_tokens": out.cached_tokens,
        "generated_tokens": out.tokens.len(),
        "prefill_ms": out.prefill_ms,
        "decode_ms": out.decode_ms,
        "decode_tokens_per_s": out.decode_tokens_per_s(),
        "stop_reason": out.stop.name(),
        "target_forwards": target_forwards,
        "accepted_tokens": accepted,
        "mean_accepted": mean,
    })
}

/// Runs every request of `path` in order. A line that cannot run (not a valid request,
/// or one the engine refuses) prints `{"line": n, "error": "…"}` and the run goes on;
/// at the end such lines make [`CliError::RequestsFailed`], naming them. Reading the
/// file or writing the output failing stops the run.
pub fn run<B: Backend>(
    engine: &mut Engine<B>,
    path: &Path,
    job: &RequestsJob<'_>,
) -> Result<(), CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let stdout = std::io::stdout();
    let (mut lines, mut failed) = (0, Vec::new());
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let n = i + 1;
        let at =
            |reason: String| CliError::Usage(format!("{}: line {n}: {reason}", path.display()));
        let line = line.map_err(|e| at(e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        let ran = parse_line(&line, job).and_then(|req| {
            let out = engine.generate(&req).map_err(|e| e.to_string())?;
            let text = reply_text(job.tokenizer, &out).map_err(|e| e.to_string())?;
            Ok(output_json(&out, text.as_deref()))
        });
        let mut v = match ran {
            Ok(v) => v,
            Err(reason) => {
                eprintln!("{}: line {n}: {reason}", path.display());
                failed.push(n);
                json!({ "error": reason })
            }
        };
        v["line"] = json!(n);
        let mut lock = stdout.lock();
        writeln!(lock, "{v}")
            .and_then(|()| lock.flush())
            .map_err(|e| at(e.to_string()))?;
    }
    let s = engine.stats();
    let usage = engine.cache().usage();
    eprintln!(
        "{lines} requests: {} prompt tokens, {} cached ({:.1}%), {} prefilled; cache holds \
         {} snapshots, {} bytes of pages and {} of snapshots",
        s.prompt_tokens,
        s.cached_tokens,
        100.0 * s.hot_cache_ratio(),
        s.prefilled_tokens(),
        usage.entries,
        usage.pages_in_use + usage.pages_free,
        usage.snapshots,
    );
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::RequestsFailed {
            path: path.to_path_buf(),
            failed,
            total: lines,
        })
    }
}
