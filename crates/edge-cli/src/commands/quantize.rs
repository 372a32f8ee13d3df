//! `edge-llm quantize`: write a ModelOpt-layout NVFP4 or FP8 checkpoint.

use crate::cli_error::CliError;
use clap::Args;
use edge_model::export::{ExportOptions, QuantFormat, quantize_checkpoint};
use std::path::PathBuf;

/// Flags of `quantize`.
#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// Source model directory (bf16/f32 safetensors).
    #[arg(long)]
    pub model: PathBuf,
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Weight format: nvfp4 or fp8.
    #[arg(long)]
    pub format: QuantFormat,
    /// A file of calibration prompts, one line of comma-separated token ids each; sets
    /// `input_scale` (and FP8 KV scales) from the observed activation maxima.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Largest output shard, in MiB.
    #[arg(long, default_value_t = 4096)]
    pub max_shard_mib: usize,
}

/// Runs `quantize`.
pub fn run(a: QuantizeArgs) -> Result<(), CliError> {
    let calibration = match &a.calibration {
        Some(path) => {
            let prompts = super::read_id_lines(path)?;
            Some(edge_model::export::calibrate(&a.model, &prompts)?)
        }
        None => None,
    };
    let opts = ExportOptions {
        format: a.format,
        calibration,
        max_shard_bytes: a.max_shard_mib.saturating_mul(1 << 20),
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} tensors ({eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("quantizing");
    let report = quantize_checkpoint(&a.model, &a.out, &opts, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    eprintln!(
        "quantized {} linears, copied {} tensors into {} file(s) in {}",
        report.quantized,
        report.copied,
        report.files.len(),
        a.out.display()
    );
    Ok(())
}
