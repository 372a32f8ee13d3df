//! [`BackendArgs`]: the flags that choose a chat backend (an in-process engine or an
//! endpoint), shared by `bench agentic` and `bench bfcl`.

use super::{ChatBackend, Endpoint, InProcess};
use crate::cli_error::CliError;
use crate::commands::engine_args::EngineArgs;
use crate::commands::serve::{StateArgs, server_state};
use clap::Args;
use edge_model::ActivationMode;
use edge_runtime::tool_calls::ToolCallPolicy;
use std::path::PathBuf;

/// Where requests go: an engine in this process, or an OpenAI-compatible server.
#[derive(Args, Clone, Debug)]
pub struct BackendArgs {
    /// Model directory for the in-process engine (default: the embedded demo model).
    #[arg(long, conflicts_with = "endpoint")]
    pub model: Option<PathBuf>,
    /// Measure an OpenAI-compatible server instead: its base URL (`http://host:port`,
    /// `…/v1` or the full `…/v1/chat/completions`). The engine flags are then unused.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The `model` field sent (default: the endpoint's first `/v1/models` entry, or
    /// the in-process model's name).
    #[arg(long)]
    pub model_name: Option<String>,
    /// The endpoint's API key, sent as `Authorization: Bearer KEY` (a server started
    /// with `serve --api-key`).
    #[arg(long, requires = "endpoint")]
    pub api_key: Option<String>,
    /// Linear-layer activations of the in-process engine (see `generate`).
    #[arg(long, default_value = "auto")]
    pub act_quant: ActivationMode,
    /// Engine and cache settings of the in-process engine.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The in-process engine's tool calls: auto, constrained or free (see `serve
    /// --tool-calls`); with --endpoint the server decides.
    #[arg(long, default_value = "auto", conflicts_with = "endpoint")]
    pub tool_calls: ToolCallPolicy,
}

/// A backend ready for requests.
pub struct OpenBackend {
    /// The backend.
    pub backend: Box<dyn ChatBackend>,
    /// The `model` field to send.
    pub model: String,
    /// The chat completions URL, in endpoint mode.
    pub endpoint_url: Option<String>,
}

impl BackendArgs {
    /// Connects to the endpoint, or loads the model and starts its engine.
    pub fn open(&self) -> Result<OpenBackend, CliError> {
        match &self.endpoint {
            Some(url) => {
                let mut e = Endpoint::new(url)?;
                if let Some(key) = &self.api_key {
                    e = e.with_api_key(key);
                }
                let endpoint_url = Some(e.url().to_string());
                let model = (self.model_name.clone())
                    .or_else(|| e.served_model())
                    .unwrap_or_else(|| "default".into());
                Ok(OpenBackend {
                    backend: Box::new(e),
                    model,
                    endpoint_url,
                })
            }
            None => {
                let state = server_state(&StateArgs {
                    model: self.model.clone(),
                    act_quant: self.act_quant,
                    engine: self.engine.clone(),
                    max_sequences: None,
                    queue: None,
                    // The name the requests will carry, when given.
                    served_model_names: self.model_name.clone().into_iter().collect(),
                    tool_calls: self.tool_calls,
                })?;
                let model =
                    (self.model_name.clone()).unwrap_or_else(|| state.model_name().to_string());
                Ok(OpenBackend {
                    backend: Box::new(InProcess::new(state)),
                    model,
                    endpoint_url: None,
                })
            }
        }
    }
}
