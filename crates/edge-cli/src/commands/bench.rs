//! `edge-llm bench`: end-to-end speed of prefill and decode, beside the memory
//! bandwidth bound; and `bench synth` to write the random benchmark model.

use crate::cli_error::CliError;
use clap::{Args, Subcommand};
use edge_core::read_bandwidth::ReadProbe;
use edge_model::synthetic::{SyntheticDType, bench_0p5b_config, write_random_checkpoint};
use edge_model::{ActivationMode, KvCacheDType, LoadOptions, Logits, Qwen35Model, Scratch};
use std::path::PathBuf;
use std::time::Instant;

/// `bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Time a prompt prefill and greedy decode on a model.
    Decode(DecodeArgs),
    /// Write the ≈0.53B random benchmark checkpoint (bf16).
    Synth(SynthArgs),
}

/// Flags of `bench decode`.
#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Prompt length for the prefill measurement.
    #[arg(long, default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Tokens to decode.
    #[arg(long, default_value_t = 128)]
    pub decode_tokens: usize,
    /// Linear-layer activations: none (f32, exact), bf16 (rounded to bf16; fast packed
    /// GEMM for prompts), nvfp4 (W4A4 emulation of NVFP4 layers) or int8 (W4A8: int8
    /// activations for NVFP4 layers, bf16 for the rest; the fastest CPU mode).
    #[arg(long, default_value = "none")]
    pub act_quant: ActivationMode,
    /// KV-cache precision: f32, or fp8 with the checkpoint's k/v scales.
    #[arg(long, default_value = "f32")]
    pub kv_cache: KvCacheDType,
    /// Timed runs (fresh state each), each followed by a read-bandwidth measurement
    /// (the fastest of one, four and eight read streams per thread over 1 GiB); the median of each figure is reported (the fraction of the bound is the median
    /// of each run's decode speed over its own bound), since a shared VM's speed drifts
    /// by ±10% between runs.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `bench synth`.
#[derive(Args, Debug)]
pub struct SynthArgs {
    /// Output directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand) -> Result<(), CliError> {
    match cmd {
        BenchCommand::Synth(a) => {
            write_random_checkpoint(&a.out, &bench_0p5b_config(), SyntheticDType::Bf16, a.seed)?;
            eprintln!("wrote {}", a.out.display());
            Ok(())
        }
        BenchCommand::Decode(a) => decode(a),
    }
}

fn decode(a: DecodeArgs) -> Result<(), CliError> {
    let model = Qwen35Model::load_with(
        &a.model,
        LoadOptions {
            activations: a.act_quant,
            kv_cache: a.kv_cache,
        },
    )?;
    let vocab = model.config().vocab_size as u64;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let prompt: Vec<u32> = (0..a.prompt_tokens.max(1))
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % vocab) as u32
        })
        .collect();
    // Warm up page cache and thread pool.
    model.forward(
        &prompt[..8.min(prompt.len())],
        &mut model.new_state(),
        Logits::Last,
    )?;

    // Each run's decode is paired with a read-bandwidth measurement taken right after
    // it: a shared VM's bandwidth drifts by a third within minutes, and one measurement
    // for all runs made the fraction of the bound swing with it.
    let bytes_per_token = model.weight_bytes_per_token();
    // 1 GiB: several times any last-level cache here; 5 passes per read pattern.
    let reader = ReadProbe::new(1 << 30, 5);
    let (mut prefill_tps, mut decode_tps) = (Vec::new(), Vec::new());
    let (mut bandwidths, mut fractions) = (Vec::new(), Vec::new());
    for _ in 0..a.runs.max(1) {
        // A fresh state and work-buffer pool per run, as a new request gets.
        let (mut state, mut scratch) = (model.new_state(), Scratch::new());
        let t0 = Instant::now();
        let mut logits =
            (model.forward_with_scratch(&prompt, &mut state, Logits::Last, &mut scratch)?).logits;
        prefill_tps.push(prompt.len() as f64 / t0.elapsed().as_secs_f64());
        let t1 = Instant::now();
        for _ in 0..a.decode_tokens {
            let next = edge_runtime::argmax(&logits);
            logits =
                (model.forward_with_scratch(&[next], &mut state, Logits::Last, &mut scratch)?)
                    .logits;
        }
        let tps = a.decode_tokens as f64 / t1.elapsed().as_secs_f64();
        let bandwidth = reader.bytes_per_s();
        decode_tps.push(tps);
        bandwidths.push(bandwidth);
        fractions.push(tps / (bandwidth / bytes_per_token as f64));
    }
    let (prefill_tps, decode_tps) = (median(&mut prefill_tps), median(&mut decode_tps));
    let bandwidth = median(&mut bandwidths);
    let bound = bandwidth / bytes_per_token as f64;
    let v = serde_json::json!({
        "prompt_tokens": prompt.len(),
        "prefill_tokens_per_s": prefill_tps,
        "decode_tokens": a.decode_tokens,
        "decode_tokens_per_s": decode_tps,
        "weight_bytes_per_token": bytes_per_token,
        "read_bandwidth_gb_per_s": bandwidth / 1e9,
        "bandwidth_bound_tokens_per_s": bound,
        "fraction_of_bound": median(&mut fractions),
        "threads": rayon::current_num_threads(),
        "runs": a.runs.max(1),
    });
    if a.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    Ok(())
}

/// The median of a non-empty list.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
