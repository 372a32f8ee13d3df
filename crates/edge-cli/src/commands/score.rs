//! `edge-llm score`: teacher-forced logits for every prompt position.

use super::{parse_ids, write_logits};
use crate::cli_error::CliError;
use clap::Args;
use edge_model::{ActivationMode, KvCacheDType, LoadOptions, Logits, Qwen35Model};
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
    /// KV-cache precision: f32, or fp8 with the checkpoint's k/v scales.
    #[arg(long, default_value = "f32")]
    pub kv_cache: KvCacheDType,
}

/// Runs `score`.
pub fn run(a: ScoreArgs) -> Result<(), CliError> {
    let model = Qwen35Model::load_with(
        &a.model,
        LoadOptions {
            activations: a.act_quant,
            kv_cache: a.kv_cache,
        },
    )?;
    let ids = parse_ids(&a.prompt_ids)?;
    let mut state = model.new_state();
    let out = model.forward(&ids, &mut state, Logits::All)?;
    write_logits(
        &a.logits_out,
        &out.logits,
        ids.len(),
        model.config().vocab_size,
    )
}
