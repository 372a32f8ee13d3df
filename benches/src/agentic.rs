//! Recorded agentic conversations in the MLCommons Edge Agentic JSONL format
//! (`agentic_inference_dataset_schema.json`): one row per message with
//! `conversation_id`, `turn` and `role`; `user` rows carry `content` (the first also
//! `system` and `tools`), `assistant` rows `reasoning_content` and `tool_calls`, `tool`
//! rows `tool_results`.
//!
//! A conversation is replayed as the MLPerf harness does: the request of each client
//! turn (a user or tool row) is the system prompt, every recorded row before it and the
//! turn's own rows, never the model's earlier output. The recorded assistant row right
//! after a client turn is that turn's ground truth ([`Trajectory::answer`]).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Why a trajectory file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TrajectoryError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A row is not a message row of the format.
    #[error("{path}:{line}: {message}")]
    Row {
        /// The file.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A conversation's rows do not make a conversation.
    #[error("conversation {id}: {message}")]
    Conversation {
        /// Its `conversation_id`.
        id: String,
        /// What is wrong with it.
        message: String,
    },
}

type Result<T> = std::result::Result<T, TrajectoryError>;

/// One recorded conversation.
#[derive(Clone, Debug)]
pub struct Trajectory {
    /// `conversation_id`.
    pub id: String,
    /// The tools offered (OpenAI schemas), if any.
    pub tools: Option<Value>,
    /// Chat messages in order, the system prompt first when there is one; tool rows
    /// become one `tool` message per result. Tool-call arguments stay JSON strings, as
    /// the harness sends them (checked to be valid JSON when read).
    pub messages: Vec<Value>,
    /// For each client turn, the number of messages its request holds.
    pub request_ends: Vec<usize>,
}

impl Trajectory {
    /// The messages of client turn `i`'s request (`i < request_ends.len()`).
    pub fn request(&self, i: usize) -> &[Value] {
        &self.messages[..self.request_ends[i]]
    }

    /// The recorded assistant message that answered client turn `i`, if the
    /// conversation has one (the last turn of a conversation may have none).
    pub fn answer(&self, i: usize) -> Option<&Value> {
        self.messages
            .get(self.request_ends[i])
            .filter(|m| m["role"] == "assistant")
    }

    /// The number of client turns (requests).
    pub fn turns(&self) -> usize {
        self.request_ends.len()
    }
}

/// Reads every conversation of a JSONL file, in order of first appearance, rows
/// sorted by `turn`.
pub fn read_trajectories(path: &Path) -> Result<Vec<Trajectory>> {
    let text = std::fs::read_to_string(path).map_err(|source| TrajectoryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut rows: Vec<(String, u64, Value)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| TrajectoryError::Row {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let v: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        let id = v["conversation_id"]
            .as_str()
            .ok_or_else(|| at("no conversation_id".into()))?;
        let turn = v["turn"]
            .as_u64()
            .ok_or_else(|| at("no turn number".into()))?;
        rows.push((id.to_string(), turn, v));
    }
    let mut order: Vec<String> = Vec::new();
    for (id, _, _) in &rows {
        if !order.contains(id) {
            order.push(id.clone());
        }
    }
    order
        .into_iter()
        .map(|id| {
            let mut mine: Vec<&(String, u64, Value)> = rows.iter().filter(|r| r.0 == id).collect();
            mine.sort_by_key(|r| r.1);
            build(&id, mine.into_iter().map(|r| &r.2))
        })
        .collect()
}

fn build<'a>(id: &str, rows: impl Iterator<Item = &'a Value>) -> Result<Trajectory> {
    let bad = |message: String| TrajectoryError::Conversation {
        id: id.to_string(),
        message,
    };
    let mut t = Trajectory {
        id: id.to_string(),
        tools: None,
        messages: Vec::new(),
        request_ends: Vec::new(),
    };
    for row in rows {
        if let Some(system) = row.get("system").and_then(Value::as_str)
            && t.messages.is_empty()
        {
            t.messages
                .push(json!({"role": "system", "content": system}));
        }
        if t.tools.is_none() {
            t.tools = row.get("tools").filter(|v| v.is_array()).cloned();
        }
        match row["role"].as_str() {
            Some("user") => {
                let content = row["content"]
                    .as_str()
                    .ok_or_else(|| bad("user row without content".into()))?;
                t.messages.push(json!({"role": "user", "content": content}));
                t.request_ends.push(t.messages.len());
            }
            Some("assistant") => t.messages.push(assistant(row).map_err(bad)?),
            Some("tool") => {
                let results = row["tool_results"]
                    .as_array()
                    .ok_or_else(|| bad("tool row without tool_results".into()))?;
                for r in results {
                    t.messages.push(json!({
                        "role": "tool",
                        "tool_call_id": r["tool_call_id"],
                        "content": r["content"].as_str().unwrap_or_default(),
                    }));
                }
                t.request_ends.push(t.messages.len());
            }
            other => return Err(bad(format!("unknown role {other:?}"))),
        }
    }
    Ok(t)
}

/// An assistant row as a chat message; its tool calls' arguments must be JSON (a
/// string holding a JSON object, or an object, which is turned into its string).
fn assistant(row: &Value) -> std::result::Result<Value, String> {
    let mut m = json!({"role": "assistant"});
    for key in ["content", "reasoning_content"] {
        if let Some(s) = row.get(key).filter(|v| v.is_string()) {
            m[key] = s.clone();
        }
    }
    if let Some(calls) = row.get("tool_calls").and_then(Value::as_array) {
        let calls = calls
            .iter()
            .map(|c| {
                let mut c = c.clone();
                match &c["function"]["arguments"] {
                    Value::String(args) => {
                        serde_json::from_str::<Value>(args)
                            .map_err(|e| format!("tool-call arguments are not JSON: {e}"))?;
                    }
                    Value::Object(_) => {
                        c["function"]["arguments"] = json!(c["function"]["arguments"].to_string())
                    }
                    _ => return Err("a tool call without arguments".into()),
                }
                Ok(c)
            })
            .collect::<std::result::Result<Vec<_>, String>>()?;
        m["tool_calls"] = Value::Array(calls);
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_requests_of_the_recorded_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let rows = [
            r#"{"conversation_id":"a","turn":2,"role":"assistant","reasoning_content":"look","tool_calls":[{"id":"c0","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls\"}"}}]}"#,
            r#"{"conversation_id":"a","turn":1,"role":"user","content":"fix it","system":"be brief","tools":[{"type":"function","function":{"name":"bash"}}]}"#,
            r#"{"conversation_id":"a","turn":3,"role":"tool","tool_results":[{"tool_call_id":"c0","content":"x.py"}]}"#,
            r#"{"conversation_id":"b","turn":1,"role":"user","content":"hi"}"#,
        ];
        std::fs::write(&path, rows.join("\n")).unwrap();
        let t = read_trajectories(&path).unwrap();
        assert_eq!(t.len(), 2);
        let a = &t[0];
        assert_eq!(a.id, "a");
        assert_eq!(a.request_ends, vec![2, 4]);
        assert_eq!(a.request(0)[0]["role"], "system");
        assert_eq!(
            a.messages[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"command": "ls"}"#
        );
        assert_eq!(a.answer(0).unwrap()["reasoning_content"], "look");
        assert!(a.answer(1).is_none());
        assert_eq!(a.messages[3]["role"], "tool");
        assert!(a.tools.is_some());
        assert_eq!(t[1].request(0).len(), 1);
    }

    /// The committed synthetic trajectory file (`benches/data/agentic_synthetic.jsonl`,
    /// the MLCommons format): requests are the recorded history up to each client
    /// turn, never anything generated.
    #[test]
    fn synthetic_file_replays_as_the_harness_does() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/agentic_synthetic.jsonl");
        let t = read_trajectories(&path).unwrap();
        assert_eq!(t.len(), 2);
        let a = &t[0];
        assert_eq!(a.id, "synthetic__demo-1");
        assert_eq!(a.turns(), 5);
        // system, user | assistant, tool | assistant, tool | assistant, tool, tool |
        // assistant, tool
        assert_eq!(a.request_ends, vec![2, 4, 6, 9, 11]);
        let roles = |r: &[Value]| -> Vec<String> {
            r.iter()
                .map(|m| m["role"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(roles(a.request(0)), ["system", "user"]);
        assert_eq!(
            roles(a.request(3)),
            [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "tool"
            ]
        );
        // Each request extends the one before with the recorded answer and results.
        for i in 1..a.turns() {
            assert_eq!(a.request(i)[..a.request_ends[i - 1]], *a.request(i - 1));
            let answer = a.answer(i - 1).unwrap();
            assert_eq!(a.request(i)[a.request_ends[i - 1]], *answer);
            assert!(answer.get("content").is_none());
            let args = answer["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap();
            assert!(serde_json::from_str::<Value>(args).unwrap()["command"].is_string());
        }
        assert_eq!(
            a.answer(2).unwrap()["tool_calls"].as_array().unwrap().len(),
            2
        );
        assert_eq!(a.request(3)[8]["tool_call_id"], "functions.bash:4");
        assert!(a.answer(4).is_none());
        assert_eq!(a.tools.as_ref().unwrap()[0]["function"]["name"], "bash");
        assert_eq!(t[1].turns(), 3);
        assert!(t[1].answer(2).is_some());
    }

    #[test]
    fn malformed_rows_are_errors_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        std::fs::write(&path, "{\"conversation_id\":\"a\",\"turn\":1,\"role\":\"user\",\"content\":\"x\"}\nnot json\n").unwrap();
        let e = read_trajectories(&path).unwrap_err().to_string();
        assert!(e.contains("bad.jsonl:2"), "{e}");
        std::fs::write(&path, r#"{"conversation_id":"a","turn":1,"role":"robot"}"#).unwrap();
        let e = read_trajectories(&path).unwrap_err().to_string();
        assert!(e.contains("unknown role"), "{e}");
        assert!(matches!(
            read_trajectories(&dir.path().join("missing.jsonl")),
            Err(TrajectoryError::Read { .. })
        ));
    }
}
