//! `edge-llm generate`: one prompt, or a file of requests through one engine.

use super::engine_args::EngineArgs;
use super::requests;
use super::{parse_ids, write_logits};
use crate::agent::{AgentContext, read_tools_file};
use crate::bundle::Bundle;
use crate::cli_error::CliError;
use clap::Args;
use edge_model::Backend;
use edge_model::{ActivationMode, LoadOptions};
use edge_runtime::tool_calls::{TokenBytes, ToolCallPolicy, ToolConstraint};
use edge_runtime::{
    ChatTemplate, Engine, GenerateOutput, GenerateRequest, SamplingParams, StopReason, Tokenizer,
};
use serde_json::Value;
use std::cell::OnceCell;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// A JSONL file of requests run in order through one engine (sharing its prefix
    /// cache): each line `{"prompt_ids": [...], "max_new_tokens": n}` or
    /// `{"prompt": "...", ...}`, optionally with `"reuse_points": [...]` and `"tools":
    /// [...]` (offered to a text prompt, its calls constrained to them as --tool-calls
    /// says). Prints one JSON object per line.
    #[arg(long, conflicts_with_all = ["prompt", "prompt_ids", "logits_out"])]
    pub requests: Option<PathBuf>,
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
    /// Tool calls: auto (constrained to the offered tools where the chat template
    /// writes XML calls; see `serve --tool-calls`), constrained or free. In a
    /// --requests file, a line's `tools` are the ones offered.
    #[arg(long, default_value = "auto")]
    pub tool_calls: ToolCallPolicy,
    /// Ignore the model's `agent_defaults.json`: no system message or tools unless
    /// given with --system / --tools.
    #[arg(long)]
    pub no_agent_defaults: bool,
    /// Most tokens to generate (256 by default: a tool call is about 150 tokens of the
    /// demo model's byte-level tokenizer).
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Random seed for sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sample from the K most likely tokens only (0: all).
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    /// Sample from the smallest set of tokens whose probability reaches P.
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one.
    #[arg(long, default_value_t = 0.0)]
    pub min_p: f32,
    /// OpenAI's presence penalty (−2 to 2).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub presence_penalty: f32,
    /// OpenAI's frequency penalty (−2 to 2).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub frequency_penalty: f32,
    /// Repetition penalty over prompt and output tokens (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub repetition_penalty: f32,
    /// Linear-layer activations: auto (the fastest mode documented for the checkpoint:
    /// W4A8 for NVFP4 layers, bf16 for the rest), none (f32, exact), bf16 (rounded to
    /// bf16; fast packed GEMM for prompts), nvfp4 (W4A4 emulation of NVFP4 layers) or
    /// int8 (W4A8: int8 activations for NVFP4 layers, bf16 for the rest).
    #[arg(long, default_value = "auto")]
    pub act_quant: ActivationMode,
    /// Engine and cache settings.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Write the logits of each generated token to this safetensors file.
    #[arg(long)]
    pub logits_out: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Turns prompt text into token ids and reuse points: through the chat template
/// (marking each message's end) unless raw.
pub struct PromptBuilder<'a> {
    tokenizer: Option<&'a Tokenizer>,
    template: Option<&'a ChatTemplate>,
    context: AgentContext,
    raw: bool,
    think: bool,
}

impl PromptBuilder<'_> {
    /// Token ids and reuse points of `text`, offering the context's tools.
    pub fn build(&self, text: &str) -> Result<(Vec<u32>, Vec<usize>), CliError> {
        self.build_with(text, self.context.tools.as_ref())
    }

    /// Token ids and reuse points of `text`, offering `tools`.
    pub fn build_with(
        &self,
        text: &str,
        tools: Option<&Value>,
    ) -> Result<(Vec<u32>, Vec<usize>), CliError> {
        let tokenizer = self.tokenizer()?;
        match (self.template, self.raw) {
            (Some(t), false) => {
                let messages = self.context.messages(text);
                let (rendered, ends) = t.render_marked(&messages, tools, true, self.think)?;
                Ok(tokenizer.encode_marked(&rendered, &ends)?)
            }
            _ => Ok((tokenizer.encode(text)?, Vec::new())),
        }
    }

    /// The context's tools (`--tools` or the model's defaults).
    pub fn tools(&self) -> Option<&Value> {
        self.context.tools.as_ref()
    }

    fn tokenizer(&self) -> Result<&Tokenizer, CliError> {
        self.tokenizer.ok_or_else(|| {
            CliError::Usage("a text prompt needs tokenizer.json in the model directory".into())
        })
    }
}

/// Builds the tool-call constraints of `generate` (unless `--tool-calls free`): the
/// vocabulary's bytes, read once, when the first prompt that offers tools needs them
/// (so a run without tools does not pay for a large vocabulary).
pub struct Constrainer {
    vocab: OnceCell<Arc<TokenBytes>>,
}

impl Constrainer {
    /// `None` where `policy` leaves calls free: [`ToolCallPolicy::Free`], or
    /// [`ToolCallPolicy::Auto`] without a tokenizer or with a chat template that
    /// writes JSON calls. [`ToolCallPolicy::Constrained`] needs both.
    pub fn new(
        policy: ToolCallPolicy,
        tokenizer: Option<&Tokenizer>,
        template: Option<&ChatTemplate>,
    ) -> Result<Option<Self>, CliError> {
        if !policy.constrains(template)? {
            return Ok(None);
        }
        match (tokenizer, policy) {
            (Some(_), _) => Ok(Some(Constrainer {
                vocab: OnceCell::new(),
            })),
            (None, ToolCallPolicy::Constrained) => Err(CliError::Usage(
                "--tool-calls constrained needs tokenizer.json in the model directory".into(),
            )),
            (None, _) => Ok(None),
        }
    }

    /// The constraint for a prompt offering `tools` (none without tools, or with an
    /// empty list); the prompt's text tells whether the reply starts inside the
    /// reasoning.
    pub fn constraint(
        &self,
        tools: Option<&Value>,
        prompt: &[u32],
        tokenizer: &Tokenizer,
    ) -> Result<Option<ToolConstraint>, CliError> {
        let Some(tools) = tools.filter(|t| t.as_array().is_none_or(|a| !a.is_empty())) else {
            return Ok(None);
        };
        let text = tokenizer.decode(prompt)?;
        let vocab = (self.vocab).get_or_init(|| Arc::new(TokenBytes::from_tokenizer(tokenizer)));
        Ok(Some(ToolConstraint::for_prompt(
            tools,
            vocab.clone(),
            &text,
        )?))
    }
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
        activations: a.engine.activations(a.act_quant),
    };
    let Bundle {
        model,
        tokenizer,
        template,
        agent_defaults,
    } = Bundle::load(a.model.as_deref(), opts)?;
    let prompts = PromptBuilder {
        tokenizer: tokenizer.as_ref(),
        template: template.as_ref(),
        context: agent_context(&a, agent_defaults.as_ref())?,
        raw: a.raw,
        think: a.think,
    };
    let stop_tokens = model.config().eos_token_ids.clone();
    let builder = a.engine.builder(Arc::new(model));
    let base = GenerateRequest {
        max_new_tokens: a.max_new_tokens,
        sampling: SamplingParams {
            temperature: a.temperature,
            seed: a.seed,
            top_k: a.top_k,
            top_p: a.top_p,
            min_p: a.min_p,
            presence_penalty: a.presence_penalty,
            frequency_penalty: a.frequency_penalty,
            repetition_penalty: a.repetition_penalty,
        },
        stop_tokens,
        ..GenerateRequest::default()
    };
    let job = Job {
        a: &a,
        base,
        prompts: &prompts,
        tokenizer: tokenizer.as_ref(),
    };
    match a.engine.device.unwrap_or_default() {
        #[cfg(feature = "cuda")]
        edge_core::Device::Cuda(_) | edge_core::Device::CudaEmulated => {
            job.run(builder.build_cuda()?)
        }
        _ => job.run(builder.build()?),
    }
}

/// What `generate` does once its engine is built, on whichever backend.
struct Job<'a> {
    a: &'a GenerateArgs,
    base: GenerateRequest,
    prompts: &'a PromptBuilder<'a>,
    tokenizer: Option<&'a Tokenizer>,
}

impl Job<'_> {
    fn run<B: Backend>(self, mut engine: Engine<B>) -> Result<(), CliError> {
        let Job {
            a,
            base,
            prompts,
            tokenizer,
        } = self;
        let constrainer = Constrainer::new(a.tool_calls, tokenizer, prompts.template)?;
        if let Some(path) = &a.requests {
            let job = requests::RequestsJob {
                base: &base,
                prompts,
                tokenizer,
                constrainer: constrainer.as_ref(),
            };
            return requests::run(&mut engine, path, &job);
        }
        let (prompt, reuse_points) = match (&a.prompt, &a.prompt_ids) {
            (_, Some(ids)) => (parse_ids(ids)?, Vec::new()),
            (Some(text), None) => prompts.build(text)?,
            (None, None) => {
                return Err(CliError::Usage(
                    "give --prompt, --prompt-ids or --requests".into(),
                ));
            }
        };
        let tool_constraint = match (&constrainer, tokenizer) {
            (Some(c), Some(t)) => c.constraint(prompts.tools(), &prompt, t)?,
            _ => None,
        };
        let req = GenerateRequest {
            prompt,
            reuse_points,
            record_logits: a.logits_out.is_some(),
            tool_constraint,
            ..base
        };
        let out = engine.generate(&req)?;
        if let (Some(path), Some(logits)) = (&a.logits_out, &out.logits) {
            write_logits(
                path,
                logits,
                out.tokens.len(),
                engine.model().config().vocab_size,
            )?;
        }
        let text = reply_text(tokenizer, &out)?;
        if a.json {
            let mut v = requests::output_json(&out, text.as_deref());
            v["speculation"] = match (out.speculation, engine.config().speculation) {
                (Some(s), Some(c)) => serde_json::json!({
                    "mode": match c.drafting {
                        edge_spec::Drafting::Linear => "linear",
                        edge_spec::Drafting::Tree { .. } => "tree",
                    },
                    "draft_steps": c.draft_steps,
                    "tree_top_k": c.shape().0,
                    "tree_nodes": c.shape().1,
                    "drafted": s.drafted,
                    "draft_ms": s.draft_ms,
                    "tree_ms": s.tree_ms,
                    "verify_ms": s.verify_ms,
                    "commit_ms": s.commit_ms,
                }),
                _ => serde_json::Value::Null,
            };
            println!("{v}");
        } else if let Some(text) = text {
            println!("{text}");
        } else {
            let ids: Vec<String> = out.tokens.iter().map(|t| t.to_string()).collect();
            println!("{}", ids.join(","));
        }
        Ok(())
    }
}

/// The reply as text (without the stop token that ended it), when there is a
/// tokenizer.
pub fn reply_text(
    tokenizer: Option<&Tokenizer>,
    out: &GenerateOutput,
) -> Result<Option<String>, CliError> {
    let shown = match out.stop {
        StopReason::Stop => &out.tokens[..out.tokens.len().saturating_sub(1)],
        StopReason::Length | StopReason::Context | StopReason::Cancelled => &out.tokens[..],
    };
    Ok(tokenizer.map(|t| t.decode(shown)).transpose()?)
}
