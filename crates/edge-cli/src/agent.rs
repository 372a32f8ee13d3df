//! The chat context `generate --prompt` wraps a request in: an optional system prompt
//! and tool schemas, from flags or from the model's `agent_defaults.json`.
//!
//! `agent_defaults.json` (`{"system": "...", "tools": [OpenAI tool schemas]}`) lets a
//! model directory say which agent setup it was trained for; the embedded demo model
//! carries one (a coding agent with a `bash` tool), so a bare
//! `edge-llm generate --prompt "..."` asks it in the setting it knows.

use crate::cli_error::CliError;
use serde_json::Value;
use std::path::Path;

/// System prompt and tools for a chat request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentContext {
    /// The system message, if any.
    pub system: Option<String>,
    /// OpenAI-style tool schemas (`[{"type": "function", "function": {...}}]`), if any.
    pub tools: Option<Value>,
}

impl AgentContext {
    /// Parses an `agent_defaults.json` document; `what` names it in errors.
    pub fn from_json(text: &str, what: &str) -> Result<Self, CliError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| CliError::Usage(format!("{what} is not valid JSON: {e}")))?;
        let system = match v.get("system") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(CliError::Usage(format!(
                    "{what}: `system` must be a string"
                )));
            }
        };
        let tools = match v.get("tools") {
            None | Some(Value::Null) => None,
            Some(t) => Some(check_tools(t.clone(), what)?),
        };
        Ok(AgentContext { system, tools })
    }

    /// `agent_defaults.json` of a model directory, if it has one.
    pub fn from_model_dir(dir: &Path) -> Result<Option<Self>, CliError> {
        let path = dir.join("agent_defaults.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_json(&text, &path.display().to_string()).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CliError::Usage(format!("{}: {e}", path.display()))),
        }
    }

    /// The chat messages for one user request.
    pub fn messages(&self, user: &str) -> Value {
        let mut msgs = Vec::new();
        if let Some(s) = &self.system {
            msgs.push(serde_json::json!({"role": "system", "content": s}));
        }
        msgs.push(serde_json::json!({"role": "user", "content": user}));
        Value::Array(msgs)
    }
}

/// Reads a `--tools` file: a JSON array of tool schemas.
pub fn read_tools_file(path: &Path) -> Result<Value, CliError> {
    let what = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("{what}: {e}")))?;
    let v = serde_json::from_str(&text)
        .map_err(|e| CliError::Usage(format!("{what} is not valid JSON: {e}")))?;
    check_tools(v, &what)
}

/// Tools must be an array of objects, each with a `function.name` string.
fn check_tools(v: Value, what: &str) -> Result<Value, CliError> {
    let list = v
        .as_array()
        .ok_or_else(|| CliError::Usage(format!("{what}: tools must be a JSON array")))?;
    for (i, t) in list.iter().enumerate() {
        if t.pointer("/function/name")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(CliError::Usage(format!(
                "{what}: tool {i} has no string `function.name`"
            )));
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_defaults_and_rejects_bad_shapes() {
        let ctx = AgentContext::from_json(
            r#"{"system": "s", "tools": [{"type": "function", "function": {"name": "bash"}}]}"#,
            "t",
        )
        .unwrap();
        assert_eq!(ctx.system.as_deref(), Some("s"));
        assert_eq!(ctx.messages("hi").as_array().unwrap().len(), 2);
        assert_eq!(
            AgentContext::from_json("{}", "t").unwrap(),
            AgentContext::default()
        );
        for bad in [
            "[",
            r#"{"system": 3}"#,
            r#"{"tools": {"name": "x"}}"#,
            r#"{"tools": [{"type": "function"}]}"#,
        ] {
            assert!(
                matches!(AgentContext::from_json(bad, "t"), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
