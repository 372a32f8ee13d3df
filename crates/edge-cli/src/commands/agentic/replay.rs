//! The replay loop: each client turn of each conversation sent as the MLPerf harness
//! sends it (the recorded history, never the model's own output), one request in
//! flight, the next issued as soon as the previous one completes.

use super::client::{ChatBackend, ClientError};
use super::iou;
use super::metrics::TurnRecord;
use edge_benches::agentic::Trajectory;
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

/// A conversation whose remaining turns were not sent because one failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Dropped {
    /// The conversation.
    pub conversation: String,
    /// The client turn that failed (it and every later one are missing).
    pub turn: usize,
    /// Why.
    pub reason: String,
    /// Missing turns whose recorded answer has an action (they score 0).
    pub scored_turns: usize,
}

/// What a replay did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The turns answered, in order.
    pub records: Vec<TurnRecord>,
    /// Conversations cut short by a failed turn.
    pub dropped: Vec<Dropped>,
    /// The error that stopped the whole run (the endpoint cannot be reached).
    pub fatal: Option<ClientError>,
}

/// Replays the first `turns[k]` client turns of each conversation `k`. As the harness
/// does, a failed turn drops the rest of its conversation (the missing turns score 0)
/// and the run goes on with the next one; an endpoint that cannot be reached stops
/// the run.
pub fn replay(
    backend: &mut dyn ChatBackend,
    conversations: &[(&Trajectory, usize)],
    model: &str,
    max_new_tokens: usize,
    on_turn: &mut OnTurn<'_>,
) -> Outcome {
    let mut out = Outcome::default();
    for (t, turns) in conversations {
        for i in 0..*turns {
            let body = request_body(t, i, model, max_new_tokens);
            let reply = match backend.complete(&body, Some(&t.id)) {
                Ok(r) => r,
                Err(e @ ClientError::Connect { .. }) => {
                    out.fatal = Some(e);
                    return out;
                }
                Err(e) => {
                    out.dropped.push(Dropped {
                        conversation: t.id.clone(),
                        turn: i,
                        reason: e.to_string(),
                        scored_turns: (i..*turns)
                            .filter(|&j| !recorded_actions(t, j).is_empty())
                            .count(),
                    });
                    break;
                }
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
            out.records.push(record);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_benches::agentic::read_trajectories;
    use std::path::Path;

    fn synthetic() -> Vec<Trajectory> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../benches/data/agentic_synthetic.jsonl");
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

    /// Answers every request but fails the `fail_at`-th (from 0) with `error`.
    struct Flaky {
        sent: usize,
        fail_at: usize,
        error: fn() -> ClientError,
    }

    impl ChatBackend for Flaky {
        fn complete(
            &mut self,
            _body: &Value,
            _session: Option<&str>,
        ) -> Result<super::super::client::ChatReply, ClientError> {
            self.sent += 1;
            if self.sent - 1 == self.fail_at {
                return Err((self.error)());
            }
            Ok(Default::default())
        }

        fn mode(&self) -> &'static str {
            "test"
        }
    }

    #[test]
    fn a_failed_turn_drops_the_rest_of_its_conversation_only() {
        let ts = synthetic();
        let selected: Vec<_> = ts.iter().map(|t| (t, t.turns())).collect();
        let total: usize = selected.iter().map(|(_, n)| n).sum();
        let mut flaky = Flaky {
            sent: 0,
            fail_at: 1,
            error: || ClientError::Status {
                url: "u".into(),
                status: 500,
                body: "boom".into(),
            },
        };
        let out = replay(&mut flaky, &selected, "m", 8, &mut |_| {});
        assert!(out.fatal.is_none());
        assert_eq!(out.dropped.len(), 1);
        let d = &out.dropped[0];
        assert_eq!((d.conversation.as_str(), d.turn), (ts[0].id.as_str(), 1));
        assert!(d.reason.contains("500"));
        // Turns 1, 2 and 3 of the first conversation have recorded actions.
        assert_eq!(d.scored_turns, 3);
        // The first conversation's turn 0, then every turn of the others.
        assert_eq!(out.records.len(), total - ts[0].turns() + 1);

        let mut down = Flaky {
            sent: 0,
            fail_at: 0,
            error: || ClientError::Connect {
                url: "u".into(),
                reason: "refused".into(),
            },
        };
        let out = replay(&mut down, &selected, "m", 8, &mut |_| {});
        assert!(matches!(out.fatal, Some(ClientError::Connect { .. })));
        assert!(out.records.is_empty() && out.dropped.is_empty());
        assert_eq!(down.sent, 1, "an unreachable endpoint stops the run");
    }
}
