//! The demo model (`models/demo`: a small trained Qwen3.5-architecture model with its
//! MTP head, ≈15 MB) compiled into the binary, with its tokenizer, chat template and
//! agent setup, so a program runs with no model directory (feature `demo-model`).
//!
//! [`crate::EngineBuilder::demo`] builds an engine on it; the CLI's commands run it
//! when no `--model` is given.

use crate::{ChatTemplate, Result, RuntimeError, Tokenizer};
use edge_model::{Checkpoint, Cpu, LoadOptions, Qwen35Config, Qwen35Model};

const CONFIG: &str = include_str!("../../../models/demo/config.json");
const GENERATION: &str = include_str!("../../../models/demo/generation_config.json");
static WEIGHTS: &[u8] = include_bytes!("../../../models/demo/model.safetensors");
static TOKENIZER: &[u8] = include_bytes!("../../../models/demo/tokenizer.json");
const TOKENIZER_CONFIG: &str = include_str!("../../../models/demo/tokenizer_config.json");

/// `agent_defaults.json`: the system prompt and tools the demo model was trained for
/// (`{"system": "...", "tools": [OpenAI tool schemas]}`).
pub const AGENT_DEFAULTS: &str = include_str!("../../../models/demo/agent_defaults.json");

fn json(text: &str, what: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| RuntimeError::Demo(format!("{what}: {e}")))
}

/// Loads the demo model; its weights stay in the binary's read-only data.
pub fn load(options: LoadOptions) -> Result<Qwen35Model<Cpu>> {
    let config = Qwen35Config::from_json(
        &json(CONFIG, "config.json")?,
        Some(&json(GENERATION, "generation_config.json")?),
    )?;
    let checkpoint = Checkpoint::from_static("<embedded demo model>", WEIGHTS)?;
    Ok(Qwen35Model::from_checkpoint(config, &checkpoint, options)?)
}

/// The demo model's tokenizer.
pub fn tokenizer() -> Result<Tokenizer> {
    Tokenizer::from_bytes(TOKENIZER)
}

/// The demo model's chat template.
pub fn chat_template() -> Result<ChatTemplate> {
    ChatTemplate::from_tokenizer_config(TOKENIZER_CONFIG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_model::ActivationMode;

    #[test]
    fn loads_with_its_tokenizer_and_template() {
        let model = load(LoadOptions {
            activations: ActivationMode::None,
        })
        .unwrap();
        assert!(model.mtp().is_some(), "the demo model has its MTP head");
        let tokenizer = tokenizer().unwrap();
        let ids = tokenizer.encode("ls -la").unwrap();
        assert!(
            ids.iter()
                .all(|&i| (i as usize) < model.config().vocab_size)
        );
        assert!(chat_template().is_ok());
        assert!(json(AGENT_DEFAULTS, "agent_defaults.json").unwrap()["tools"].is_array());
    }

    #[test]
    fn the_builder_runs_it_as_the_directory_would() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
        let request = || crate::GenerateRequest {
            prompt: tokenizer()
                .unwrap()
                .encode("<|im_start|>user\nls<|im_end|>\n")
                .unwrap(),
            max_new_tokens: 6,
            ..crate::GenerateRequest::default()
        };
        let a = (crate::EngineBuilder::demo().build().unwrap())
            .generate(&request())
            .unwrap();
        let b = (crate::EngineBuilder::new(dir).build().unwrap())
            .generate(&request())
            .unwrap();
        assert_eq!(a.tokens.len(), 6);
        assert_eq!(a.tokens, b.tokens);
    }
}
