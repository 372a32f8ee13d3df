//! `edge-llm serve`: the OpenAI-compatible HTTP server (`/v1/chat/completions`,
//! `/v1/completions`, `/v1/models`, `/health`, `/ready`, `/metrics`) on one engine.

use super::engine_args::EngineArgs;
use crate::bundle::Bundle;
use crate::cli_error::CliError;
use clap::Args;
use clap::builder::RangedU64ValueParser;
use edge_model::{ActivationMode, LoadOptions};
use edge_runtime::server::{AccessPolicy, ServerConfig, ServerState, Timeouts, serve};
use edge_runtime::tool_calls::ToolCallPolicy;
use std::path::PathBuf;
use std::sync::Arc;

/// Flags of `serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Model directory (config.json, safetensors, tokenizer.json, tokenizer_config.json
    /// with a chat template). Without it the embedded demo model is served.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Address to listen on (loopback by default; 0.0.0.0 exposes the server).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Requests that may wait while the engine is full (default 64); more get 429.
    #[arg(long)]
    pub queue: Option<usize>,
    /// `GET /ready` answers 503, so a load balancer or orchestrator places new
    /// sessions elsewhere, once this many requests wait in the queue (default: the
    /// --queue size, when the next one would get 429). It also answers 503 while the
    /// server drains.
    #[arg(long, value_name = "N", value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub ready_max_queued: Option<usize>,
    /// Requests decoding or prefilling at once (default 8).
    #[arg(long)]
    pub max_sequences: Option<usize>,
    /// The model name the API reports (default: the model directory's name, or
    /// `demo`); repeat to answer to more names (aliases, e.g. the name a benchmark
    /// harness sends). A request naming any other model gets 404 `model_not_found`.
    #[arg(long = "served-model-name", value_name = "NAME")]
    pub served_model_names: Vec<String>,
    /// Largest request body, bytes.
    #[arg(long, default_value_t = 8 << 20)]
    pub body_limit: usize,
    /// Linear-layer activations: auto (the default), none, bf16, nvfp4 or int8 (see
    /// `generate`).
    #[arg(long, default_value = "auto")]
    pub act_quant: ActivationMode,
    /// Engine and cache settings.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Tool calls of requests that offer tools: `constrained` (once the model opens a
    /// call, only an offered function, its declared parameters, each once and the
    /// required ones all, and values of their types can follow; `tool_choice`
    /// `required` or a named function forces a call; speculation stays lossless
    /// under it), `free` (parsed as written), or `auto`: constrained where the chat
    /// template writes XML calls (Qwen3.5/3.6), free where it writes JSON ones.
    #[arg(long, default_value = "auto")]
    pub tool_calls: ToolCallPolicy,
    /// Require `Authorization: Bearer KEY` on every route but the probes /health and
    /// /ready (a key on the command line shows in the process list: prefer
    /// --api-key-file).
    #[arg(long, conflicts_with = "api_key_file")]
    pub api_key: Option<String>,
    /// Read the API key from the first line of this file.
    #[arg(long)]
    pub api_key_file: Option<PathBuf>,
    /// A host name browsers may reach the server from (its `Origin`) or call it by
    /// (its `Host`, checked on a loopback listener), beside loopback; repeat for more.
    #[arg(long = "allow-origin", value_name = "HOST")]
    pub allow_origins: Vec<String>,
    /// Cancel a request still queued, prefilling or generating this many seconds
    /// after it arrived, and answer it 504 (or end its stream with an error event).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub request_timeout: Option<std::time::Duration>,
    /// Close a connection whose request head is not complete this many seconds
    /// after its first byte: a slow or half-sent head (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub header_timeout: Option<std::time::Duration>,
    /// Close a connection that has sent no complete request this many seconds after
    /// it opened or after its previous response: an idle kept-alive connection
    /// (default 60).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Answer 408 (and close) when a request body has not arrived in full this many
    /// seconds after its head (default 60).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub body_timeout: Option<std::time::Duration>,
    /// On SIGTERM or SIGINT, new requests get 503 while those in flight get this many
    /// seconds to finish; then they are cancelled (a stream ends with an error event)
    /// and the server exits. A second signal exits at once (default 30).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub shutdown_timeout: Option<std::time::Duration>,
}

/// A positive number of seconds.
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(s > 0.0 && s.is_finite()) {
        return Err(format!(
            "`{text}`: the timeout must be a positive number of seconds"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(s))
}

/// The access policy the flags ask for.
fn access_policy(a: &ServeArgs) -> Result<AccessPolicy, CliError> {
    let mut policy = AccessPolicy::default();
    for host in &a.allow_origins {
        policy = policy.allow_host(host);
    }
    let key = match (&a.api_key, &a.api_key_file) {
        (Some(k), _) => Some(k.clone()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Usage(format!(
                    "cannot read --api-key-file {}: {e}",
                    path.display()
                ))
            })?;
            Some(text.lines().next().unwrap_or_default().to_string())
        }
        (None, None) => None,
    };
    match key {
        Some(k) => policy
            .with_api_key(&k)
            .ok_or_else(|| CliError::Usage("the API key is empty".into())),
        None => Ok(policy),
    }
}

/// Runs `serve` until SIGINT or SIGTERM.
pub fn run(a: ServeArgs) -> Result<(), CliError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The log goes to stdout, with colour codes only when that is a terminal: a log
    // file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .try_init();
    let access = access_policy(&a)?;
    let state = server_state(&StateArgs {
        model: a.model.clone(),
        act_quant: a.act_quant,
        engine: a.engine.clone(),
        max_sequences: a.max_sequences,
        queue: a.queue,
        served_model_names: a.served_model_names.clone(),
        tool_calls: a.tool_calls,
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Usage(format!("cannot start the async runtime: {e}")))?;
    let config = ServerConfig {
        host: a.host,
        port: a.port,
        body_limit: a.body_limit,
    };
    let mut state = state.with_access(access);
    if let Some(n) = a.ready_max_queued {
        let capacity = state.handle().capacity();
        if n > capacity {
            return Err(CliError::Usage(format!(
                "--ready-max-queued {n} is more than the queue holds ({capacity}, --queue)"
            )));
        }
        state = state.with_ready_max_queued(n);
    }
    if let Some(t) = a.request_timeout {
        state = state.with_request_timeout(t);
    }
    let defaults = Timeouts::default();
    let state = state.with_timeouts(Timeouts {
        header: a.header_timeout.unwrap_or(defaults.header),
        idle: a.idle_timeout.unwrap_or(defaults.idle),
        body: a.body_timeout.unwrap_or(defaults.body),
        shutdown: a.shutdown_timeout.unwrap_or(defaults.shutdown),
    });
    let served = runtime.block_on(serve(config, state));
    // Generation threads end within a poll once their connections are gone; do not
    // let one that does not hold the exit up (a second signal means now).
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    served?;
    Ok(())
}

/// What the server's state is built from (the flags of `serve` that shape the engine).
#[derive(Clone, Debug)]
pub struct StateArgs {
    /// Model directory (`None`: the embedded demo model).
    pub model: Option<PathBuf>,
    /// Linear-layer activations.
    pub act_quant: ActivationMode,
    /// Engine and cache settings.
    pub engine: EngineArgs,
    /// Requests decoding or prefilling at once.
    pub max_sequences: Option<usize>,
    /// Requests that may wait.
    pub queue: Option<usize>,
    /// The model names the API answers to, the reported one first (none: the model
    /// directory's name, or `demo`).
    pub served_model_names: Vec<String>,
    /// Whether tool calls are constrained to the offered tools.
    pub tool_calls: ToolCallPolicy,
}

/// The engine, tokenizer and template `serve` runs on, started; `bench agentic`
/// in-process uses the same state so its prompts and engine match the server's.
pub fn server_state(a: &StateArgs) -> Result<ServerState, CliError> {
    if a.max_sequences == Some(0) {
        return Err(CliError::Usage("--max-sequences must be at least 1".into()));
    }
    let opts = LoadOptions {
        activations: a.engine.activations(a.act_quant),
    };
    let Bundle {
        model,
        tokenizer,
        template,
        ..
    } = Bundle::load(a.model.as_deref(), opts)?;
    let tokenizer = tokenizer.ok_or_else(|| {
        CliError::Usage("serving needs tokenizer.json in the model directory".into())
    })?;
    let template = template.ok_or_else(|| {
        CliError::Usage("serving needs a chat_template in tokenizer_config.json".into())
    })?;
    let (name, aliases) = match a.served_model_names.split_first() {
        Some((name, aliases)) => (name.clone(), aliases.to_vec()),
        None => (default_name(a), Vec::new()),
    };
    let eos = model.config().eos_token_ids.clone();
    let context = model.config().max_position_embeddings;
    let mut builder = a.engine.builder(Arc::new(model));
    if let Some(n) = a.max_sequences {
        builder = builder.max_sequences(n);
    }
    if let Some(n) = a.queue {
        builder = builder.queue(n);
    }
    let handle = Arc::new(builder.spawn()?);
    let state = ServerState::new(
        handle,
        Arc::new(tokenizer),
        Arc::new(template),
        name,
        context,
        eos,
    );
    Ok(state
        .with_aliases(aliases)
        .with_tool_call_policy(a.tool_calls)?)
}

/// The model directory's name, or `demo` for the embedded model.
fn default_name(a: &StateArgs) -> String {
    (a.model.as_deref())
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "demo".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn policy(args: &[&str]) -> Result<AccessPolicy, CliError> {
        let cli = Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .map_err(|e| CliError::Usage(e.to_string()))?;
        access_policy(&cli.serve)
    }

    #[test]
    fn api_key_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("key");
        std::fs::write(&file, "from-file\nignored\n").unwrap();
        let file = file.to_str().unwrap();
        let p = policy(&["--api-key-file", file, "--allow-origin", "a.example"]).unwrap();
        assert!(format!("{p:?}").contains("<set>") && !format!("{p:?}").contains("from-file"));
        assert!(!format!("{:?}", policy(&[]).unwrap()).contains("<set>"));
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        for bad in [
            vec!["--api-key-file", empty.to_str().unwrap()],
            vec!["--api-key", " "],
            vec!["--api-key-file", "/nonexistent/key"],
            vec!["--api-key", "k", "--api-key-file", file],
            vec!["--request-timeout", "0"],
            vec!["--request-timeout", "soon"],
            vec!["--ready-max-queued", "0"],
        ] {
            assert!(matches!(policy(&bad), Err(CliError::Usage(_))), "{bad:?}");
        }
    }
}
