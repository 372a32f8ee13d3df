//! `edge-llm inspect`: what a model directory holds.

use crate::cli_error::CliError;
use clap::Args;
use edge_model::{Checkpoint, LayerType, Qwen35Config};
use std::path::PathBuf;

/// Flags of `inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `inspect`.
pub fn run(a: InspectArgs) -> Result<(), CliError> {
    let c = Qwen35Config::from_dir(&a.model)?;
    let ckpt = Checkpoint::open(&a.model)?;
    let pattern: String = c
        .layer_types
        .iter()
        .map(|t| match t {
            LayerType::LinearAttention => 'L',
            LayerType::FullAttention => 'A',
        })
        .collect();
    let nvfp4 = ckpt
        .tensors()
        .filter(|t| t.name.ends_with(".weight_scale_2"))
        .count();
    let fp8 = ckpt
        .tensors()
        .filter(|t| t.name.ends_with(".weight") && t.dtype == edge_core::DType::F8E4M3)
        .count();
    let kv_scales = ckpt
        .tensors()
        .filter(|t| t.name.ends_with(".k_scale"))
        .count();
    let mtp = ckpt
        .tensors()
        .filter(|t| t.name.starts_with("mtp."))
        .count();
    let params: usize = ckpt.tensors().map(|t| t.elements()).sum();
    let v = serde_json::json!({
        "hidden_size": c.hidden_size,
        "layers": c.num_hidden_layers,
        "layer_pattern": pattern,
        "full_attention_layers": c.num_full_attention_layers(),
        "attention": {"heads": c.num_attention_heads, "kv_heads": c.num_key_value_heads, "head_dim": c.head_dim, "rotary_dim": c.rotary_dim()},
        "gated_deltanet": {"key_heads": c.linear_num_key_heads, "value_heads": c.linear_num_value_heads, "key_dim": c.linear_key_head_dim, "value_dim": c.linear_value_head_dim, "conv_kernel": c.linear_conv_kernel_dim},
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_position_embeddings,
        "tie_word_embeddings": c.tie_word_embeddings,
        "mtp_layers": c.mtp_num_hidden_layers,
        "mtp_tensors": mtp,
        "tensors": ckpt.tensors().count(),
        "stored_elements": params,
        "bytes_by_dtype": ckpt.bytes_by_dtype(),
        "quantization": {"nvfp4_linears": nvfp4, "fp8_linears": fp8, "fp8_kv_scales": kv_scales},
        "kv_bytes_per_token": {"bf16": c.kv_bytes_per_token(2), "fp8": c.kv_bytes_per_token(1)},
        "recurrent_state_bytes_per_sequence": c.recurrent_state_bytes(),
        "files": ckpt.files().len(),
    });
    if a.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    Ok(())
}
