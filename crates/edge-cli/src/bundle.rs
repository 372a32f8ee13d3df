//! The model a command runs: a directory given with `--model`, or the demo model
//! embedded in the binary (cargo feature `embedded-model`, on by default).

use crate::agent::AgentContext;
use crate::cli_error::CliError;
use edge_model::{Cpu, LoadOptions, Qwen35Model};
use edge_runtime::{ChatTemplate, Tokenizer};
use std::path::Path;

/// A model with its tokenizer and chat template (when it has them).
pub struct Bundle {
    /// The model.
    pub model: Qwen35Model<Cpu>,
    /// `tokenizer.json`, if present.
    pub tokenizer: Option<Tokenizer>,
    /// The chat template from `tokenizer_config.json`, if present.
    pub template: Option<ChatTemplate>,
    /// The agent setup from `agent_defaults.json`, if present.
    pub agent_defaults: Option<AgentContext>,
}

impl Bundle {
    /// Loads `dir`, or the embedded model when `dir` is `None`.
    pub fn load(dir: Option<&Path>, opts: LoadOptions) -> Result<Self, CliError> {
        match dir {
            Some(dir) => Self::from_dir(dir, opts),
            None => embedded::load(opts),
        }
    }

    fn from_dir(dir: &Path, opts: LoadOptions) -> Result<Self, CliError> {
        let model = Qwen35Model::load_with(dir, opts)?;
        let tok_path = dir.join("tokenizer.json");
        let tokenizer = tok_path
            .exists()
            .then(|| Tokenizer::from_file(&tok_path))
            .transpose()?;
        let cfg_path = dir.join("tokenizer_config.json");
        let template = match std::fs::read_to_string(&cfg_path) {
            Ok(text) if text.contains("\"chat_template\"") => {
                Some(ChatTemplate::from_tokenizer_config(&text)?)
            }
            _ => None,
        };
        Ok(Bundle {
            model,
            tokenizer,
            template,
            agent_defaults: AgentContext::from_model_dir(dir)?,
        })
    }
}

#[cfg(feature = "embedded-model")]
mod embedded {
    use super::*;
    use edge_runtime::demo;

    pub fn load(opts: LoadOptions) -> Result<Bundle, CliError> {
        Ok(Bundle {
            model: demo::load(opts)?,
            tokenizer: Some(demo::tokenizer()?),
            template: Some(demo::chat_template()?),
            agent_defaults: Some(AgentContext::from_json(
                demo::AGENT_DEFAULTS,
                "embedded agent_defaults.json",
            )?),
        })
    }
}

#[cfg(not(feature = "embedded-model"))]
mod embedded {
    use super::*;

    pub fn load(_: LoadOptions) -> Result<Bundle, CliError> {
        Err(CliError::Usage(
            "no --model given and this build has no embedded model (feature `embedded-model`)"
                .into(),
        ))
    }
}
