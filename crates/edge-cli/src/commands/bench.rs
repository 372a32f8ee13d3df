//! `edge-llm bench`: end-to-end speed of prefill and decode, beside the memory
//! bandwidth bound; `bench synth` to write the random benchmark model; `bench agentic`
//! (in [`super::agentic`]) to replay the MLPerf Edge Agentic workload.

use super::bench_verify::{host_threads, median};
use super::engine_args::EngineArgs;
use crate::cli_error::CliError;
use clap::{Args, Subcommand};
use edge_core::read_bandwidth::ReadProbe;
use edge_core::rng::SeededRng;
use edge_core::simd::{SimdLevel, with_level};
use edge_model::synthetic::{
    SyntheticDType, bench_0p5b_config, qwen36_27b_config, write_predictable_checkpoint,
    write_random_checkpoint, write_random_nvfp4_checkpoint,
};
use edge_model::{ActivationMode, Backend, LoadOptions, Qwen35Model};
use edge_runtime::{Engine, GenerateRequest};
use std::path::PathBuf;
use std::sync::Arc;

/// `bench` subcommands.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Time a prompt prefill and greedy decode on a model.
    Decode(DecodeArgs),
    /// Write a random benchmark checkpoint: the ≈0.53B model (bf16) or a Qwen3.6-27B
    /// shape (NVFP4).
    Synth(SynthArgs),
    /// Time token-tree verification forwards against a one-token decode step.
    Verify(super::bench_verify::VerifyArgs),
    /// BFCL v4 single-turn function-calling accuracy (AST checker, MLPerf's scoring).
    Bfcl(super::bfcl::BfclArgs),
    /// Replay the MLPerf Edge Agentic conversations (single stream, in-process or
    /// against an endpoint): TTFT, TPOT, throughput, cache reuse, acceptance, IoU.
    Agentic(super::agentic::AgenticArgs),
}

/// Flags of `bench decode`.
#[derive(Args, Debug)]
pub struct DecodeArgs {
    /// Model directory.
    #[arg(long)]
    pub model: PathBuf,
    /// Prompt length: the prefill measurement, and the depth (cached tokens) decode
    /// starts at.
    #[arg(long, alias = "depth", default_value_t = 512)]
    pub prompt_tokens: usize,
    /// Tokens to decode.
    #[arg(long, default_value_t = 128)]
    pub decode_tokens: usize,
    /// Linear-layer activations: auto (the fastest mode documented for the checkpoint:
    /// W4A8 for NVFP4 layers, bf16 for the rest), none (f32, exact), bf16 (rounded to
    /// bf16; fast packed GEMM for prompts), nvfp4 (W4A4 emulation of NVFP4 layers) or
    /// int8 (W4A8: int8 activations for NVFP4 layers, bf16 for the rest).
    #[arg(long, default_value = "auto")]
    pub act_quant: ActivationMode,
    /// Engine and cache settings (the prefix cache is off here, so every run prefills
    /// its prompt, except for `--turn-tokens`' follow-up request).
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Timed runs (fresh sequence each), each followed by a read-bandwidth measurement
    /// (the fastest of one, four and eight read streams per thread over 1 GiB); the
    /// median of each figure is reported (the fraction of the bound is the median of
    /// each run's decode speed over its own bound), since a shared VM's speed drifts
    /// by ±10% between runs.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Requests decoding at once (continuous batching): with more than one, the
    /// figure is the aggregate steady-state decode speed of all of them (the bound and
    /// the single-stream fields are left out).
    #[arg(long, default_value_t = 1)]
    pub streams: usize,
    /// Run the CPU kernels at this SIMD level instead of the best one this CPU has
    /// (avx512, avx2, neon-i8mm, neon-dotprod, neon or portable; at most the detected
    /// level): to time the AVX2 kernels on an AVX-512 machine, or the plain NEON ones on
    /// an Arm CPU with i8mm.
    #[arg(long, value_parser = parse_simd_level)]
    pub simd_level: Option<SimdLevel>,
    /// Prompt tokens of a follow-up turn, the agentic case: after each timed run, a
    /// second request whose prompt is the first one plus this many new tokens takes
    /// the first prompt from the prefix cache (its KV pages and recurrent state) and
    /// prefills only the new tokens; reported as `turn_prefill_tokens_per_s`, the
    /// prefill speed of a turn at a depth of `--prompt-tokens`. One stream only.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub turn_tokens: Option<u64>,
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
    /// Seed of the random weights: a seed gives the same checkpoint on every machine.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Add an MTP head and make the continuation predictable (token t + 1 after t, for
    /// the target and the head alike), so speculation accepts its drafts: the cost of
    /// verification becomes measurable on a random model (bf16 only).
    #[arg(long)]
    pub predictable: bool,
    /// The shape: bench-0.5b (hidden 1024, 24 layers) or qwen3.6-27b.
    #[arg(long, value_enum, default_value_t = SynthShape::Bench0p5b)]
    pub shape: SynthShape,
    /// Weights: bf16, or nvfp4 (the linears ModelOpt quantizes, written directly as
    /// random NVFP4: no bf16 model is ever built).
    #[arg(long, value_enum, default_value_t = SynthWeights::Bf16)]
    pub weights: SynthWeights,
    /// Decoder layers, in place of the shape's own count (the layer pattern repeats):
    /// the same layers and vocabulary, written and read in a fraction of the time (the
    /// device check's 27B decode uses 8 of 64).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub layers: Option<u64>,
}

/// `bench synth --shape`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthShape {
    /// [`bench_0p5b_config`].
    #[value(name = "bench-0.5b")]
    Bench0p5b,
    /// [`qwen36_27b_config`].
    #[value(name = "qwen3.6-27b")]
    Qwen36_27b,
}

/// `bench synth --weights`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynthWeights {
    /// bfloat16 everywhere.
    Bf16,
    /// NVFP4 where ModelOpt's default recipe quantizes, bf16 elsewhere.
    Nvfp4,
}

/// Runs a `bench` subcommand.
pub fn run(cmd: BenchCommand) -> Result<(), CliError> {
    match cmd {
        BenchCommand::Synth(a) => {
            let mut config = match a.shape {
                SynthShape::Bench0p5b => bench_0p5b_config(),
                SynthShape::Qwen36_27b => qwen36_27b_config(),
            };
            if let Some(layers) = a.layers {
                config["num_hidden_layers"] = layers.into();
            }
            match (a.weights, a.predictable) {
                (SynthWeights::Bf16, false) => {
                    write_random_checkpoint(&a.out, &config, SyntheticDType::Bf16, a.seed)?
                }
                (SynthWeights::Bf16, true) => {
                    write_predictable_checkpoint(&a.out, &config, SyntheticDType::Bf16, a.seed)?
                }
                (SynthWeights::Nvfp4, false) => {
                    write_random_nvfp4_checkpoint(&a.out, &config, a.seed)?
                }
                (SynthWeights::Nvfp4, true) => {
                    return Err(CliError::Usage(
                        "--predictable writes bf16 weights; leave out --weights nvfp4".into(),
                    ));
                }
            }
            eprintln!("wrote {}", a.out.display());
            Ok(())
        }
        BenchCommand::Decode(a) => match a.simd_level {
            // The whole run, engine threads included, at the forced level.
            Some(level) => with_level(level, || decode(a))?,
            None => decode(a),
        },
        BenchCommand::Verify(a) => super::bench_verify::run(a),
        BenchCommand::Bfcl(a) => super::bfcl::command(a),
        BenchCommand::Agentic(a) => super::agentic::run(a),
    }
}

fn decode(a: DecodeArgs) -> Result<(), CliError> {
    let model = Qwen35Model::load_with(
        &a.model,
        LoadOptions {
            activations: a.engine.activations(a.act_quant),
        },
    )?;
    if a.turn_tokens.is_some() && a.streams > 1 {
        return Err(CliError::Usage(
            "--turn-tokens times one stream; leave out --streams".into(),
        ));
    }
    let vocab = model.config().vocab_size;
    // Random prompt tokens, the same on every run.
    let mut rng = SeededRng::from_seed(0);
    let prompt: Vec<u32> = (0..a.prompt_tokens.max(1))
        .map(|_| rng.below(vocab) as u32)
        .collect();
    let bytes_per_token = model.weight_bytes_per_token();
    let model = Arc::new(model);
    let builder = a
        .engine
        .builder(model.clone())
        .prefix_cache(a.turn_tokens.is_some());
    let config = builder.config_for(&model);
    // KV bytes a decode step reads, averaged over the decoded tokens: the decoder's
    // attention layers' rows up to the step's position (the MTP head's are not read).
    let mut spec = model.cache_spec(&config.cache);
    let mtp_layers = usize::from(model.mtp().is_some());
    spec.attention.truncate(spec.attention.len() - mtp_layers);
    let mean_rows = prompt.len() as f64 + a.decode_tokens as f64 / 2.0;
    let timing = Timing {
        a: &a,
        prompt,
        read_per_token: bytes_per_token as f64 + spec.row_bytes() as f64 * mean_rows,
        bytes_per_token,
    };
    let builder = builder.max_sequences(config.max_sequences.max(a.streams));
    drop(model);
    match a.engine.device.unwrap_or_default() {
        #[cfg(feature = "cuda")]
        edge_core::Device::Cuda(_) | edge_core::Device::CudaEmulated => {
            let engine = builder.build_cuda()?;
            let dev = engine.backend().device().clone();
            // 1 GiB: several times any GPU's L2.
            timing.run(engine, "copy", || Ok(dev.copy_bandwidth(1 << 30, 5)?))
        }
        _ => {
            // 1 GiB: several times any last-level cache here; 5 passes per read pattern.
            let reader = ReadProbe::new(1 << 30, 5);
            timing.run(builder.build()?, "read", || Ok(reader.bytes_per_s()))
        }
    }
}

/// `--simd-level`: a level by its name.
fn parse_simd_level(name: &str) -> Result<SimdLevel, String> {
    SimdLevel::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = SimdLevel::ALL.iter().map(|l| l.name()).collect();
        format!("unknown SIMD level `{name}` ({})", names.join(", "))
    })
}

/// What `bench decode` measures once its engine is built, on whichever backend.
struct Timing<'a> {
    a: &'a DecodeArgs,
    prompt: Vec<u32>,
    /// Weight and mean KV bytes a decode step reads.
    read_per_token: f64,
    bytes_per_token: usize,
}

impl Timing<'_> {
    /// Times the runs; `bandwidth` measures the memory bandwidth (bytes/s) the bound is
    /// taken from, by the method `method` names.
    fn run<B: Backend>(
        self,
        mut engine: Engine<B>,
        method: &str,
        bandwidth: impl Fn() -> Result<f64, CliError>,
    ) -> Result<(), CliError> {
        let Timing {
            a,
            prompt,
            read_per_token,
            bytes_per_token,
        } = self;
        let vocab = engine.model().config().vocab_size as u32;
        let device = a.engine.device.unwrap_or_default();
        if a.streams > 1 {
            let prompts: Vec<Vec<u32>> = (0..a.streams)
                .map(|s| {
                    let mut p = prompt.clone();
                    p[0] = (p[0] + s as u32) % vocab;
                    p
                })
                .collect();
            let mut rates = super::bench_streams::aggregate_decode(
                &mut engine,
                &prompts,
                a.decode_tokens,
                a.runs,
            )?;
            let v = serde_json::json!({
                "streams": a.streams,
                "prompt_tokens": prompt.len(),
                "decode_tokens": a.decode_tokens,
                "aggregate_decode_tokens_per_s": median(&mut rates),
                "runs": rates,
                "device": device.to_string(),
                "simd_level": edge_core::simd::level().name(),
                "threads": host_threads(device),
            });
            println!("{v}");
            return Ok(());
        }
        let depth = prompt.len();
        let request = GenerateRequest {
            prompt,
            max_new_tokens: a.decode_tokens + 1,
            // The follow-up turn restores the prompt from a snapshot at its end.
            reuse_points: a.turn_tokens.map(|_| vec![depth]).unwrap_or_default(),
            ..GenerateRequest::default()
        };
        let turn = a.turn_tokens.map(|n| {
            let mut rng = SeededRng::from_seed(1);
            let mut prompt = request.prompt.clone();
            prompt.extend((0..n).map(|_| rng.below(vocab as usize) as u32));
            // Marked at the same point, as a chat client marks its message ends: the
            // snapshot is then taken with this request's own cuts below it, and the
            // default (exact) reuse policy takes it.
            GenerateRequest {
                prompt,
                max_new_tokens: 1,
                reuse_points: vec![depth],
                ..GenerateRequest::default()
            }
        });
        // Warm up page cache, thread pool (or kernels) and the cache's pages.
        engine.generate(&GenerateRequest {
            prompt: request.prompt[..8.min(request.prompt.len())].to_vec(),
            max_new_tokens: 2,
            ..GenerateRequest::default()
        })?;
        // Each run's decode is paired with a bandwidth measurement taken right after
        // it: a shared VM's bandwidth drifts by a third within minutes, and one
        // measurement for all runs made the fraction of the bound swing with it.
        let (mut prefill_tps, mut decode_tps) = (Vec::new(), Vec::new());
        let (mut bandwidths, mut fractions) = (Vec::new(), Vec::new());
        let mut turn_tps = Vec::new();
        for _ in 0..a.runs.max(1) {
            // Every run prefills its whole prompt; only the follow-up turn reuses it.
            engine.clear_prefix_cache();
            let out = engine.generate(&request)?;
            prefill_tps.push(out.prompt_tokens as f64 / (out.prefill_ms / 1e3));
            let tps = out.decode_tokens_per_s();
            let bw = bandwidth()?;
            decode_tps.push(tps);
            bandwidths.push(bw);
            fractions.push(tps / (bw / read_per_token));
            if let Some(turn) = &turn {
                let out = engine.generate(turn)?;
                if out.cached_tokens != depth {
                    return Err(CliError::TurnNotCached {
                        cached: out.cached_tokens,
                        depth,
                    });
                }
                turn_tps.push(out.prefilled_tokens() as f64 / (out.prefill_ms / 1e3));
            }
        }
        let (prefill_tps, decode_tps) = (median(&mut prefill_tps), median(&mut decode_tps));
        let bw = median(&mut bandwidths);
        let kv_bytes_per_token = read_per_token - bytes_per_token as f64;
        let v = serde_json::json!({
            "prompt_tokens": request.prompt.len(),
            "prefill_tokens_per_s": prefill_tps,
            "decode_tokens": a.decode_tokens,
            "decode_tokens_per_s": decode_tps,
            "kv_dtype": engine.config().cache.kv_dtype.name(),
            "weight_bytes_per_token": bytes_per_token,
            "kv_bytes_per_token": kv_bytes_per_token.round(),
            "bandwidth_method": method,
            "read_bandwidth_gb_per_s": bw / 1e9,
            "bandwidth_bound_tokens_per_s": bw / read_per_token,
            "fraction_of_bound": median(&mut fractions),
            "turn_tokens": a.turn_tokens,
            "turn_prefill_tokens_per_s": (!turn_tps.is_empty()).then(|| median(&mut turn_tps)),
            "device": device.to_string(),
            "simd_level": edge_core::simd::level().name(),
            "cpu_features": edge_core::simd::detected().extras(),
            "threads": host_threads(device),
            "runs": a.runs.max(1),
        });
        if a.json {
            println!("{v}");
        } else {
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        Ok(())
    }
}
