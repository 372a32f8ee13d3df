//! `edge-llm score`: teacher-forced logits for every prompt position.

use super::{parse_ids, write_logits};
use crate::cli_error::CliError;
use clap::Args;
use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, LogitRows, Qwen35Model, Session};
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
    pub logits_out: PathBuf,
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
    let model = Qwen35Model::load(&a.model, a.act_quant)?;
    let ids = parse_ids(&a.prompt_ids)?;
    let config = CacheConfig {
        kv_dtype: a.kv_dtype,
        ..CacheConfig::default()
    };
    let out = Session::new(&model, config)?.forward(&ids, LogitRows::All)?;
    write_logits(
        &a.logits_out,
        &out.logits,
        ids.len(),
        model.config().vocab_size,
    )
}
