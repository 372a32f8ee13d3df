//! When decoding follows the tool-call grammar: [`ToolCallPolicy`].

use super::check_constrainable;
use crate::{ChatTemplate, Result, RuntimeError};
use std::fmt;
use std::str::FromStr;

/// Whether a request that offers tools has its calls constrained to them
/// ([`super::ToolConstraint`]). The grammar is lazy, so under any policy the model
/// may answer without a call; the policy decides what a call, once opened, may say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolCallPolicy {
    /// Constrain where the grammar applies: the chat template writes calls in the
    /// XML format (Qwen3.5/3.6, or a template that does not say). Elsewhere calls are
    /// written freely, as they are for a caller that has no tokenizer to build the
    /// constraint with. What the CLI uses by default, as llama.cpp's server
    /// constrains tool calls by default.
    #[default]
    Auto,
    /// Always constrain; a template that writes JSON calls is an error.
    Constrained,
    /// Never constrain: calls are parsed as the model writes them.
    Free,
}

impl ToolCallPolicy {
    /// Whether calls are constrained with `template` (`None`: prompts built without
    /// one, taken to write XML calls). [`ToolCallPolicy::Constrained`] with a template
    /// that writes JSON calls is an error.
    pub fn constrains(self, template: Option<&ChatTemplate>) -> Result<bool> {
        let fits = || template.map_or(Ok(()), check_constrainable);
        match self {
            ToolCallPolicy::Auto => Ok(fits().is_ok()),
            ToolCallPolicy::Constrained => fits().map(|()| true),
            ToolCallPolicy::Free => Ok(false),
        }
    }
}

impl FromStr for ToolCallPolicy {
    type Err = RuntimeError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(ToolCallPolicy::Auto),
            "constrained" => Ok(ToolCallPolicy::Constrained),
            "free" => Ok(ToolCallPolicy::Free),
            _ => Err(RuntimeError::UnknownValue {
                what: "tool-call policy",
                value: s.to_string(),
                expected: "auto, constrained or free",
            }),
        }
    }
}

impl fmt::Display for ToolCallPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolCallPolicy::Auto => "auto",
            ToolCallPolicy::Constrained => "constrained",
            ToolCallPolicy::Free => "free",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(call_format: &str) -> ChatTemplate {
        // The smallest templates whose call format the runtime can tell apart.
        let body = match call_format {
            "json" => r#"{# <tool_call> {"name": n | tojson, "arguments": a} #}"#,
            _ => "{# <tool_call> <function=NAME> #}",
        };
        let config = serde_json::json!({ "chat_template": body }).to_string();
        ChatTemplate::from_tokenizer_config(&config).unwrap()
    }

    #[test]
    fn auto_constrains_only_where_the_grammar_applies() {
        let (xml, json) = (template("xml"), template("json"));
        assert!(ToolCallPolicy::Auto.constrains(Some(&xml)).unwrap());
        assert!(ToolCallPolicy::Auto.constrains(None).unwrap());
        assert!(!ToolCallPolicy::Auto.constrains(Some(&json)).unwrap());
        assert!(ToolCallPolicy::Constrained.constrains(Some(&xml)).unwrap());
        assert!(matches!(
            ToolCallPolicy::Constrained.constrains(Some(&json)),
            Err(crate::RuntimeError::InvalidConfig { .. })
        ));
        assert!(!ToolCallPolicy::Free.constrains(Some(&xml)).unwrap());
    }

    #[test]
    fn parses_what_it_prints() {
        for p in [
            ToolCallPolicy::Auto,
            ToolCallPolicy::Constrained,
            ToolCallPolicy::Free,
        ] {
            assert_eq!(p.to_string().parse::<ToolCallPolicy>().unwrap(), p);
        }
        assert!(matches!(
            "on".parse::<ToolCallPolicy>(),
            Err(crate::RuntimeError::UnknownValue {
                what: "tool-call policy",
                ..
            })
        ));
    }
}
