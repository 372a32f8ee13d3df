//! Prefix reuse on real agentic traffic: replays recorded Edge Agentic conversations
//! (MLCommons JSONL, e.g. `../shared/data/agentic_coding_2.5h.jsonl`; the data is not
//! part of this repository) through one engine, turn by turn as the MLPerf harness
//! sends them (the whole recorded history plus the new tool result, rendered through
//! the model's chat template with every message end marked as a reuse point), and
//! reports how much of each prompt came from the prefix cache.
//!
//! ```sh
//! cargo run --release -p edge-examples --example agentic_prefix_reuse -- \
//!     --data ../shared/data/agentic_coding_2.5h.jsonl --conversations 3
//! ```
//!
//! The demo model in `models/demo` runs by default (a 1-token reply per turn: the
//! measurement is about prompts); any model directory with a tokenizer and a chat
//! template works with `--model`.

use clap::Parser;
use edge_benches::agentic::read_trajectories;
use edge_kvcache::{CacheConfig, KvDType};
use edge_model::{ActivationMode, Qwen35Model};
use edge_runtime::{ChatTemplate, Engine, EngineConfig, GenerateRequest, Tokenizer};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// The conversations (MLCommons Edge Agentic JSONL).
    #[arg(long, default_value = "../shared/data/agentic_coding_2.5h.jsonl")]
    data: PathBuf,
    /// Model directory (with tokenizer.json and a chat template).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Conversations to replay (from the first).
    #[arg(long, default_value_t = 3)]
    conversations: usize,
    /// Client turns per conversation at most.
    #[arg(long)]
    max_turns: Option<usize>,
    /// Tokens generated per turn.
    #[arg(long, default_value_t = 1)]
    max_new_tokens: usize,
    /// Linear-layer activations (none, bf16, int8): bf16, the fast prompt mode for bf16
    /// weights, by default.
    #[arg(long, default_value = "bf16")]
    act_quant: ActivationMode,
    /// KV page element type: f32, bf16 or fp8.
    #[arg(long, default_value = "f32")]
    kv_dtype: KvDType,
    /// Write a JSON report here.
    #[arg(long)]
    report: Option<PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let dir = a
        .model
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/demo"));
    let model = Qwen35Model::load(&dir, a.act_quant)?;
    let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json"))?;
    let template = ChatTemplate::from_tokenizer_config(&std::fs::read_to_string(
        dir.join("tokenizer_config.json"),
    )?)?;
    let stop_tokens = model.config().eos_token_ids.clone();
    let config = EngineConfig {
        cache: CacheConfig {
            kv_dtype: a.kv_dtype,
            ..CacheConfig::default()
        },
        ..EngineConfig::default()
    };
    let mut engine = Engine::new(Arc::new(model), config)?;
    let trajectories = read_trajectories(&a.data)?;
    let mut per_conversation = Vec::new();
    let start = Instant::now();
    for t in trajectories.iter().take(a.conversations) {
        let turns = a.max_turns.unwrap_or(usize::MAX).min(t.request_ends.len());
        let (mut prompt, mut cached, mut prefill_ms, mut render_ms) = (0, 0, 0.0, 0.0);
        for i in 0..turns {
            let r0 = Instant::now();
            let messages = serde_json::Value::Array(t.request(i).to_vec());
            let (text, ends) = template.render_marked(&messages, t.tools.as_ref(), true, false)?;
            let (ids, marks) = tokenizer.encode_marked(&text, &ends)?;
            render_ms += r0.elapsed().as_secs_f64() * 1e3;
            let out = engine.generate(&GenerateRequest {
                prompt: ids,
                reuse_points: marks,
                max_new_tokens: a.max_new_tokens,
                stop_tokens: stop_tokens.clone(),
                ..GenerateRequest::default()
            })?;
            prompt += out.prompt_tokens;
            cached += out.cached_tokens;
            prefill_ms += out.prefill_ms;
        }
        println!(
            "{:<32} {turns:>3} turns  {prompt:>8} prompt tokens  {cached:>8} cached  {:>7} prefilled  \
             hot {:.3}  prefill {:.0} ms  render+tokenize {:.0} ms",
            t.id,
            prompt - cached,
            cached as f64 / prompt.max(1) as f64,
            prefill_ms,
            render_ms
        );
        per_conversation.push(serde_json::json!({
            "conversation_id": t.id, "turns": turns, "prompt_tokens": prompt,
            "cached_tokens": cached, "prefill_ms": prefill_ms,
        }));
    }
    let s = engine.stats();
    let usage = engine.cache().usage();
    let cache_stats = engine.cache().stats();
    println!(
        "total: {} requests, {} prompt tokens, {} cached, {} prefilled, hot-cache ratio {:.4}; \
         {} snapshots held ({} bytes of state), {} pages ({} bytes), {} evictions; {:.1} s",
        s.requests,
        s.prompt_tokens,
        s.cached_tokens,
        s.prefilled_tokens(),
        s.hot_cache_ratio(),
        usage.entries,
        usage.snapshots,
        (usage.pages_in_use + usage.pages_free)
            / engine
                .model()
                .cache_spec(&engine.config().cache)
                .block_bytes(),
        usage.pages_in_use + usage.pages_free,
        cache_stats.evictions,
        start.elapsed().as_secs_f64()
    );
    if let Some(path) = &a.report {
        let report = serde_json::json!({
            "requests": s.requests, "prompt_tokens": s.prompt_tokens, "cached_tokens": s.cached_tokens,
            "prefilled_tokens": s.prefilled_tokens(), "hot_cache_ratio": s.hot_cache_ratio(),
            "snapshot_bytes": usage.snapshots, "snapshots": usage.entries,
            "page_bytes": usage.pages_in_use + usage.pages_free, "evictions": cache_stats.evictions,
            "snapshots_taken": cache_stats.snapshots, "conversations": per_conversation,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}
