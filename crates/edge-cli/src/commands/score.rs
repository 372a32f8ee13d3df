//! `edge-llm score`: teacher-forced logits for every prompt position, of the model and
//! of its MTP head.

use super::{parse_ids, write_logits};
use crate::cli_error::CliError;
use clap::Args;
use edge_core::Device;
use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Backend, Cpu, LogitRows, Qwen35Model, Session};
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
    /// Where to run: cpu, cuda:N (a `--features cuda` build and a GPU) or cuda-emu (the
    /// CUDA backend's kernels emulated on the CPU, for verification; docs/CUDA.md).
    #[arg(long, default_value = "cpu")]
    pub device: Device,
}

/// Runs `score`.
pub fn run(a: ScoreArgs) -> Result<(), CliError> {
    if a.logits_out.is_none() && a.mtp_logits_out.is_none() {
        return Err(CliError::Usage(
            "give --logits-out, --mtp-logits-out or both".into(),
        ));
    }
    let model = Qwen35Model::load(&a.model, a.act_quant.on_device(a.device))?;
    let ids = parse_ids(&a.prompt_ids)?;
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
    match a.device {
        Device::Cpu => score(&model, Cpu::new(), &a, &ids),
        #[cfg(feature = "cuda")]
        _ => {
            let mut gpu = edge_model::cuda::CudaBackend::for_device(a.device)?;
            let on_device = model.to_backend(&mut gpu)?;
            drop(model);
            score(&on_device, gpu, &a, &ids)
        }
        #[cfg(not(feature = "cuda"))]
        _ => Err(CliError::Usage(format!(
            "device {}: this build has no CUDA support (build with the `cuda` feature)",
            a.device
        ))),
    }
}

/// Writes the logits `a` asks for, of `model` on `backend`.
fn score<B: Backend>(
    model: &Qwen35Model<B>,
    backend: B,
    a: &ScoreArgs,
    ids: &[u32],
) -> Result<(), CliError> {
    let (vocab, h) = (model.config().vocab_size, model.config().hidden_size);
    let config = CacheConfig {
        kv_dtype: a.kv_dtype,
        ..CacheConfig::default()
    };
    let mut session = Session::with_backend(model, backend, config)?;
    let out = session.forward(ids, LogitRows::All)?;
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
