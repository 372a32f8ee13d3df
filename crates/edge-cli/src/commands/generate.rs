//! `edge-llm generate`.

use super::{parse_ids, write_logits};
use crate::agent::{AgentContext, read_tools_file};
use crate::bundle::Bundle;
use crate::cli_error::CliError;
use clap::Args;
use edge_model::{ActivationMode, KvCacheDType, LoadOptions};
use edge_runtime::{GenerateOutput, GenerateRequest, SamplingParams, StopReason, generate};
use std::path::PathBuf;

/// Flags of `generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Model directory (config.json, safetensors, tokenizer.json). Without it the
    /// embedded demo model runs.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompt text: sent as a user message through the model's chat template (unless
    /// --raw); needs tokenizer.json.
    #[arg(long, conflicts_with = "prompt_ids")]
    pub prompt: Option<String>,
    /// Prompt as comma-separated token ids (used as is).
    #[arg(long)]
    pub prompt_ids: Option<String>,
    /// Tokenize --prompt as is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Let the model think (`enable_thinking` in the chat template).
    #[arg(long)]
    pub think: bool,
    /// System message for --prompt (default: the model's `agent_defaults.json`).
    #[arg(long)]
    pub system: Option<String>,
    /// JSON file with an array of OpenAI tool schemas offered to the model with
    /// --prompt (default: the model's `agent_defaults.json`; the embedded demo model
    /// offers a `bash` tool).
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// Ignore the model's `agent_defaults.json`: no system message or tools unless
    /// given with --system / --tools.
    #[arg(long)]
    pub no_agent_defaults: bool,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 128)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Linear-layer activations: none (f32, exact), bf16 (rounded to bf16; fast packed
    /// GEMM for prompts), nvfp4 (W4A4 emulation of NVFP4 layers) or int8 (W4A8: int8
    /// activations for NVFP4 layers, bf16 for the rest; the fastest CPU mode).
    #[arg(long, default_value = "none")]
    pub act_quant: ActivationMode,
    /// KV-cache precision: f32, or fp8 with the checkpoint's k/v scales.
    #[arg(long, default_value = "f32")]
    pub kv_cache: KvCacheDType,
    /// MTP speculative decoding: tokens drafted per target forward (0 = off). Used for
    /// greedy decoding on models with an MTP head; output is identical to plain greedy.
    #[arg(long, default_value_t = 0)]
    pub draft_tokens: usize,
    /// Write the logits of each generated token to this safetensors file.
    #[arg(long)]
    pub logits_out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The system message and tools: flags first, then the model's defaults.
fn agent_context(
    a: &GenerateArgs,
    defaults: Option<&AgentContext>,
) -> Result<AgentContext, CliError> {
    let defaults = match defaults {
        Some(d) if !a.no_agent_defaults => d.clone(),
        _ => AgentContext::default(),
    };
    Ok(AgentContext {
        system: a.system.clone().or(defaults.system),
        tools: match &a.tools {
            Some(path) => Some(read_tools_file(path)?),
            None => defaults.tools,
        },
    })
}

/// Runs `generate`.
pub fn run(a: GenerateArgs) -> Result<(), CliError> {
    let opts = LoadOptions {
        activations: a.act_quant,
        kv_cache: a.kv_cache,
    };
    let bundle = Bundle::load(a.model.as_deref(), opts)?;
    let prompt = match (&a.prompt, &a.prompt_ids) {
        (_, Some(ids)) => parse_ids(ids)?,
        (Some(text), None) => {
            let tokenizer = bundle.tokenizer.as_ref().ok_or_else(|| {
                CliError::Usage("--prompt needs tokenizer.json in the model directory".into())
            })?;
            let text = match (&bundle.template, a.raw) {
                (Some(t), false) => {
                    let ctx = agent_context(&a, bundle.agent_defaults.as_ref())?;
                    t.render(&ctx.messages(text), ctx.tools.as_ref(), true, a.think)?
                }
                _ => text.clone(),
            };
            tokenizer.encode(&text)?
        }
        (None, None) => return Err(CliError::Usage("give --prompt or --prompt-ids".into())),
    };
    let model = &bundle.model;
    let req = GenerateRequest {
        prompt,
        max_new_tokens: a.max_new_tokens,
        sampling: SamplingParams {
            temperature: a.temperature,
            seed: a.seed,
            ..SamplingParams::default()
        },
        stop_tokens: model.config().eos_token_ids.clone(),
        record_logits: a.logits_out.is_some(),
    };
    let speculate = a.draft_tokens > 0
        && a.temperature == 0.0
        && a.logits_out.is_none()
        && model.mtp().is_some();
    let (out, spec_stats) = if speculate {
        let s = edge_spec::generate_greedy(
            model,
            &req.prompt,
            req.max_new_tokens,
            &req.stop_tokens,
            edge_spec::SpecConfig {
                draft_tokens: a.draft_tokens,
            },
        )?;
        let stop = if s.tokens.last().is_some_and(|t| req.stop_tokens.contains(t)) {
            StopReason::Stop
        } else {
            StopReason::Length
        };
        let out = GenerateOutput {
            tokens: s.tokens,
            logits: None,
            prefill_ms: s.prefill_ms,
            decode_ms: s.decode_ms,
            stop,
        };
        (out, Some(s.stats))
    } else {
        (generate(model, &req)?, None)
    };
    if let (Some(path), Some(logits)) = (&a.logits_out, &out.logits) {
        write_logits(path, logits, out.tokens.len(), model.config().vocab_size)?;
    }
    // The stop token ends the reply; it is in `tokens`, not in the text.
    let shown = match out.stop {
        StopReason::Stop => &out.tokens[..out.tokens.len().saturating_sub(1)],
        StopReason::Length | StopReason::Context => &out.tokens[..],
    };
    let text = match &bundle.tokenizer {
        Some(t) => t.decode(shown)?,
        None => String::new(),
    };
    if a.json {
        let v = serde_json::json!({
            "tokens": out.tokens,
            "text": text,
            "prompt_tokens": req.prompt.len(),
            "generated_tokens": out.tokens.len(),
            "prefill_ms": out.prefill_ms,
            "decode_ms": out.decode_ms,
            "decode_tokens_per_s": out.decode_tokens_per_s(),
            "stop_reason": format!("{:?}", out.stop).to_lowercase(),
            "speculation": spec_stats.map(|s| serde_json::json!({
                "draft_tokens": a.draft_tokens,
                "verify_forwards": s.verify_forwards,
                "recompute_forwards": s.recompute_forwards,
                "drafted": s.drafted,
                "accepted": s.accepted,
                "tokens_per_verify": s.tokens_per_verify(),
            })),
        });
        println!("{v}");
    } else if bundle.tokenizer.is_some() {
        println!("{text}");
    } else {
        let ids: Vec<String> = out.tokens.iter().map(|t| t.to_string()).collect();
        println!("{}", ids.join(","));
    }
    Ok(())
}
