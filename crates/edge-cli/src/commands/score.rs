//! `edge-llm score`: teacher-forced logits for every prompt position, of the model and
//! of its MTP head.

use super::{parse_ids, write_logits};
use crate::cli_error::CliError;
use clap::Args;
use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Backend, LogitRows, Qwen35Model, Session};
use std::path::PathBuf;

/// Flags of `score`.
#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Token ids, comma-separated.
    #[arg(long)]
    pub prompt_ids: String,
    /// Output safetensors file with tensor `logits` `[T, vocab]`.
    #[arg(long)]
    pub logits_out: Option<PathBuf>,
    /// Output safetensors file with the MTP head's logits, tensor `logits` `[T − 1,
    /// vocab]`: row t predicts the token at t + 2 from the token at t + 1 and the
    /// target's final hidden state at t.
    #[arg(long)]
    pub mtp_logits_out: Option<PathBuf>,
    /// Linear-layer activations: none (f32, exact), bf16 (rounded to bf16; fast packed
    /// GEMM for prompts), nvfp4 (W4A4 emulation of NVFP4 layers) or int8 (W4A8: int8
    /// activations for NVFP4 layers, bf16 for the rest; the fastest CPU mode).
    #[arg(long, default_value = "none")]
    pub act_quant: ActivationMode,
    /// KV page element type: f32, bf16, or fp8 (E4M3 with the checkpoint's scales).
    #[arg(long, default_value = "f32")]
    pub kv_dtype: KvDType,
}

/// Runs `score`.
pub fn run(a: ScoreArgs) -> Result<(), CliError> {
    if a.logits_out.is_none() && a.mtp_logits_out.is_none() {
        return Err(CliError::Usage(
            "give --logits-out, --mtp-logits-out or both".into(),
        ));
    }
    let model = Qwen35Model::load(&a.model, a.act_quant)?;
    let ids = parse_ids(&a.prompt_ids)?;
    let (vocab, h) = (model.config().vocab_size, model.config().hidden_size);
    if a.mtp_logits_out.is_some() && model.mtp().is_none() {
        return Err(CliError::Usage(format!(
            "{} has no MTP head (mtp.* tensors) to score with",
            a.model.display()
        )));
    }
    if a.mtp_logits_out.is_some() && ids.len() < 2 {
        return Err(CliError::Usage(
            "MTP logits need at least 2 prompt tokens".into(),
        ));
    }
    let config = CacheConfig {
        kv_dtype: a.kv_dtype,
        ..CacheConfig::default()
    };
    let mut session = Session::new(&model, config)?;
    let out = session.forward(&ids, LogitRows::All)?;
    if let Some(path) = &a.logits_out {
        write_logits(path, &out.logits, ids.len(), vocab)?;
    }
    if let Some(path) = &a.mtp_logits_out {
        // Row t pairs the hidden state at t with the token at t + 1, at position t.
        let t = ids.len();
        let rows =
            session
                .backend_mut()
                .gather_rows(&out.hidden, h, &(0..t - 1).collect::<Vec<_>>())?;
        let mtp = session.mtp_forward(&ids[1..], &rows, 0, LogitRows::All)?;
        write_logits(path, &mtp.logits, t - 1, vocab)?;
    }
    Ok(())
}
