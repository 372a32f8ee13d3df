//! `edge-llm bench verify`: what verifying a token tree costs against a one-token
//! decode step, at a given depth.

use crate::cli_error::CliError;
use clap::Args;
use edge_core::Device;
use edge_kvcache::{CacheConfig, KvDType, PagedCache, SequenceCache};
use edge_model::{
    AcceptedPath, ActivationMode, Backend, Cpu, LoadOptions, LogitRows, Qwen35Model, StepBatch,
};
use std::path::PathBuf;
use std::time::Instant;

/// Flags of `bench verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Tokens in the cache before the measured forwards.
    #[arg(long, default_value_t = 512)]
    pub depth: usize,
    /// Tree sizes to time, comma-separated (nodes, root included).
    #[arg(long, value_delimiter = ',', default_value = "1,8,16,32")]
    pub nodes: Vec<usize>,
    /// Forwards timed per size and round.
    #[arg(long, default_value_t = 16)]
    pub steps: usize,
    /// Rounds: each times every size once, in turn (sizes alternate, so drift in the
    /// machine's speed reaches them alike); the median forward time is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Linear-layer activations (see `generate --act-quant`).
    #[arg(long, default_value = "auto")]
    pub act_quant: ActivationMode,
    /// KV page element type.
    #[arg(long, default_value = "f32")]
    pub kv_dtype: KvDType,
    /// The device: cpu (default), cuda:N (an NVIDIA GPU) or cuda-emu (the CUDA
    /// backend's kernels emulated on the CPU; not for timing). On both CUDA devices
    /// `--act-quant auto` means bf16 activations.
    #[arg(long, default_value = "cpu")]
    pub device: Device,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `bench verify`: per size, the median time of a target forward over a tree of
/// that many nodes (a bushy tree: node `i`'s parent is `(i − 1) / 3`, the shape top-k
/// drafting makes near the root) followed by a commit of its root, against the median
/// plain one-token decode step.
pub fn run(a: VerifyArgs) -> Result<(), CliError> {
    if a.nodes
        .iter()
        .any(|&n| n == 0 || n > edge_model::MAX_TREE_ROWS)
    {
        return Err(CliError::Usage(format!(
            "tree sizes must be 1 to {}",
            edge_model::MAX_TREE_ROWS
        )));
    }
    let activations = a.act_quant.on_device(a.device);
    let model = Qwen35Model::load_with(&a.model, LoadOptions { activations })?;
    let v = match a.device {
        Device::Cpu => time_trees(&model, &mut Cpu::new(), &a)?,
        #[cfg(feature = "cuda")]
        Device::Cuda(_) | Device::CudaEmulated => {
            let mut gpu = edge_model::cuda::CudaBackend::for_device(a.device)?;
            let on_gpu = model.to_backend(&mut gpu)?;
            drop(model);
            time_trees(&on_gpu, &mut gpu, &a)?
        }
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) | Device::CudaEmulated => {
            return Err(CliError::Usage(format!(
                "device {}: this build has no CUDA support (build with the `cuda` feature)",
                a.device
            )));
        }
    };
    if a.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    Ok(())
}

/// The timings of `run` on backend `be`, as JSON. Every timed forward downloads its
/// logits, which waits for a GPU's queued work, so the wall clock measures the device.
fn time_trees<B: Backend>(
    model: &Qwen35Model<B>,
    be: &mut B,
    a: &VerifyArgs,
) -> Result<serde_json::Value, CliError> {
    let vocab = model.config().vocab_size as u32;
    let config = CacheConfig {
        kv_dtype: a.kv_dtype,
        prefix_cache: false,
        ..CacheConfig::default()
    };
    let memory = be.cache_memory(&model.cache_spec(&config), &config)?;
    let mut cache = PagedCache::with_memory(memory, config)?;
    let seq = cache.new_sequence(a.depth + a.steps + 64)?;
    let prompt: Vec<u32> = (0..a.depth.max(1) as u32)
        .map(|i| (i * 7919 + 13) % vocab)
        .collect();
    let batch = StepBatch::single(seq, &prompt, 0, LogitRows::None);
    let out = model.forward(be, &batch, &mut cache)?;
    be.free(out.hidden);
    let base = cache.sequence(seq)?.len;
    let saved = cache.save_state(seq)?;
    let mut decode_ms = Vec::new();
    let mut tree_ms: Vec<Vec<f64>> = vec![Vec::new(); a.nodes.len()];
    for _ in 0..a.rounds.max(1) {
        for (k, &n) in std::iter::once(&0).chain(&a.nodes).enumerate() {
            for step in 0..a.steps.max(1) {
                let len = base + step;
                let tokens: Vec<u32> = (0..n.max(1) as u32)
                    .map(|i| (i * 31 + step as u32) % vocab)
                    .collect();
                let t = Instant::now();
                if n == 0 {
                    let b = StepBatch::single(seq, &tokens[..1], len, LogitRows::Last);
                    let out = model.forward(be, &b, &mut cache)?;
                    be.free(out.hidden);
                    decode_ms.push(t.elapsed().as_secs_f64() * 1e3);
                    continue;
                }
                let parents: Vec<Option<u32>> = (0..n as u32)
                    .map(|i| i.checked_sub(1).map(|p| p / 3))
                    .collect();
                let mut b = StepBatch::new();
                b.push_tree(seq, &tokens, &parents, len, LogitRows::All);
                let out = model.forward(be, &b, &mut cache)?;
                let kept = out.tree.expect("a tree pass keeps its inputs");
                model.commit_tree(be, kept, &[AcceptedPath { seq, rows: vec![0] }], &mut cache)?;
                be.free(out.hidden);
                tree_ms[k - 1].push(t.elapsed().as_secs_f64() * 1e3);
            }
            cache.truncate(seq, base)?;
            cache.restore_state(seq, &saved)?;
        }
    }
    let decode = median(&mut decode_ms);
    let sizes: Vec<serde_json::Value> = (a.nodes.iter().zip(&mut tree_ms))
        .map(|(&n, ms)| {
            let m = median(ms);
            serde_json::json!({"nodes": n, "ms_per_forward": m, "vs_decode_step": m / decode})
        })
        .collect();
    Ok(serde_json::json!({
        "device": a.device.to_string(),
        "depth": base,
        "decode_step_ms": decode,
        "trees": sizes,
        "threads": host_threads(a.device),
    }))
}

/// The CPU threads a benchmark ran its kernels on (rayon's pool), or null on a GPU,
/// where they only launch work.
pub fn host_threads(device: edge_core::Device) -> serde_json::Value {
    match device {
        edge_core::Device::Cpu => rayon::current_num_threads().into(),
        _ => serde_json::Value::Null,
    }
}

/// The median of a non-empty list.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
