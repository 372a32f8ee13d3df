//! The replay loop: each client turn of each conversation sent as the MLPerf harness
//! sends it (the recorded history, never the model's own output), one request in
//! flight, the next issued as soon as the previous one completes.

use super::client::{ChatBackend, ClientError};
use super::iou;
use super::metrics::TurnRecord;
use edge_runtime::agentic::Trajectory;
use serde_json::{Value, json};

/// The request body of client turn `i` of `t`, field for field what the harness
/// posts: the recorded messages (tool-call arguments as JSON strings, assistant turns
/// with reasoning and no `content`), `tools`, streaming, temperature 0, seed 42,
/// `max_completion_tokens`; no `tool_choice`.
pub fn request_body(t: &Trajectory, i: usize, model: &str, max_new_tokens: usize) -> Value {
    let mut body = json!({
        "model": model,
        "messages": t.request(i),
        "temperature": 0,
        "seed": 42,
        "max_completion_tokens": max_new_tokens,
        "stream": true,
    });
    if let Some(tools) = &t.tools {
        body["tools"] = tools.clone();
    }
    body
}

/// The actions of the recorded answer to client turn `i` (empty: not scored).
pub fn recorded_actions(t: &Trajectory, i: usize) -> Vec<&'static str> {
    let Some(answer) = t.answer(i) else {
        return Vec::new();
    };
    let calls = answer["tool_calls"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    iou::call_actions(calls.iter().filter_map(|c| {
        let f = &c["function"];
        Some((f["name"].as_str()?, f["arguments"].as_str()?))
    }))
}

/// What the loop reports after each turn (for the progress bar).
pub type OnTurn<'a> = dyn FnMut(&TurnRecord) + 'a;

/// Replays the first `turns[k]` client turns of each conversation `k`; returns the
/// turns answered, and the error that stopped the run early, if one did.
pub fn replay(
    backend: &mut dyn ChatBackend,
    conversations: &[(&Trajectory, usize)],
    model: &str,
    max_new_tokens: usize,
    on_turn: &mut OnTurn<'_>,
) -> (Vec<TurnRecord>, Option<ClientError>) {
    let mut records = Vec::new();
    for (t, turns) in conversations {
        for i in 0..*turns {
            let body = request_body(t, i, model, max_new_tokens);
            let reply = match backend.complete(&body, Some(&t.id)) {
                Ok(r) => r,
                Err(e) => return (records, Some(e)),
            };
            let model_actions = iou::call_actions(
                reply
                    .tool_calls
                    .iter()
                    .map(|c| (c.name.as_str(), c.arguments.as_str())),
            );
            let score = iou::score(&model_actions, &recorded_actions(t, i));
            let record = TurnRecord::new(&t.id, i, &reply, score);
            on_turn(&record);
            records.push(record);
        }
    }
    (records, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_runtime::agentic::read_trajectories;
    use std::path::Path;

    fn synthetic() -> Vec<Trajectory> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../edge-runtime/tests/data/agentic_synthetic.jsonl");
        read_trajectories(&path).unwrap()
    }

    #[test]
    fn bodies_are_the_harness_requests() {
        let t = &synthetic()[0];
        let body = request_body(t, 2, "m", 1024);
        let keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "model",
                "messages",
                "temperature",
                "seed",
                "max_completion_tokens",
                "stream",
                "tools"
            ]
        );
        assert_eq!(body["seed"], 42);
        assert_eq!(body["temperature"], 0);
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[0]["role"], "system");
        assert!(m[2].get("content").is_none());
        assert!(m[2]["tool_calls"][0]["function"]["arguments"].is_string());
        assert_eq!(m[5]["role"], "tool");
    }

    #[test]
    fn recorded_answers_give_the_ground_truth() {
        let ts = synthetic();
        // cd, ls | grep  →  ls, grep.
        assert_eq!(recorded_actions(&ts[0], 0), ["ls", "grep"]);
        // PYTHONPATH=src python3.11 -m pytest; git diff.
        assert_eq!(recorded_actions(&ts[0], 2), ["python", "git"]);
        assert_eq!(recorded_actions(&ts[0], 3), ["sed", "python"]);
        // The last turn has no recorded answer; `cd` alone is no action.
        assert!(recorded_actions(&ts[0], 4).is_empty());
        assert!(recorded_actions(&ts[1], 1).is_empty());
        assert_eq!(recorded_actions(&ts[1], 2), ["git", "git"]);
    }
}
