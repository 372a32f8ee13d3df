//! One module per subcommand, plus shared helpers.

pub mod agentic;
pub mod bench;
pub mod bench_streams;
pub mod bench_verify;
pub mod bfcl;
pub mod engine_args;
pub mod generate;
pub mod inspect;
pub mod kernels;
pub mod quantize;
mod requests;
pub mod score;
pub mod serve;

use crate::cli_error::CliError;
use std::path::Path;

/// A progress bar over `len` items called `unit` (`turns`, `entries`), with elapsed
/// time, ETA and a message slot.
pub fn progress_bar(len: usize, unit: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    let template =
        format!("{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit} (eta {{eta}}) {{msg}}");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// Parses `--prompt-ids 1,2,3`: comma-separated token ids, spaces allowed around
/// them; an empty list or an empty entry (`1,,2`, a trailing comma) is an error.
pub fn parse_ids(text: &str) -> Result<Vec<u32>, CliError> {
    if text.trim().is_empty() {
        return Err(CliError::Usage("--prompt-ids holds no token ids".into()));
    }
    text.split(',')
        .enumerate()
        .map(|(i, s)| match s.trim() {
            "" => Err(CliError::Usage(format!(
                "`{text}`: entry {} of --prompt-ids is empty",
                i + 1
            ))),
            s => s
                .parse::<u32>()
                .map_err(|_| CliError::Usage(format!("`{s}` in --prompt-ids is not a token id"))),
        })
        .collect()
}

/// Writes `[rows, cols]` f32 logits as the safetensors tensor `logits`.
pub fn write_logits(path: &Path, logits: &[f32], rows: usize, cols: usize) -> Result<(), CliError> {
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![rows, cols], &bytes)
            .map_err(|e| CliError::Write {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
    safetensors::serialize_to_file([("logits", view)], None, path).map_err(|e| CliError::Write {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Reads a file of prompts, one line of comma-separated token ids each (blank lines
/// are skipped).
pub fn read_id_lines(path: &Path) -> Result<Vec<Vec<u32>>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
    let lines: Vec<Vec<u32>> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(parse_ids)
        .collect::<Result<_, _>>()?;
    if lines.is_empty() {
        return Err(CliError::Usage(format!(
            "{} holds no prompts",
            path.display()
        )));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_ids_are_token_ids_with_no_empty_entry() {
        assert_eq!(parse_ids("1, 2,3").unwrap(), vec![1, 2, 3]);
        for (bad, says) in [
            ("1,,2", "entry 2 of --prompt-ids is empty"),
            ("1,2,", "entry 3 of --prompt-ids is empty"),
            ("", "holds no token ids"),
            (" ", "holds no token ids"),
            ("1,x", "`x` in --prompt-ids is not a token id"),
            ("-1", "`-1` in --prompt-ids is not a token id"),
        ] {
            match parse_ids(bad) {
                Err(CliError::Usage(m)) => assert!(m.contains(says), "{bad}: {m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
