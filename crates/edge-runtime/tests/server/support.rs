//! What the server tests share: a server on a loopback port with the demo model, and
//! readers of its replies.

use edge_model::{ActivationMode, Qwen35Model};
use edge_runtime::server::{ServerState, serve_on};
use edge_runtime::{ChatTemplate, Engine, EngineConfig, EngineHandle, Tokenizer};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

pub fn demo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo")
}

pub fn agent_defaults() -> Value {
    serde_json::from_str(&std::fs::read_to_string(demo_dir().join("agent_defaults.json")).unwrap())
        .unwrap()
}

/// A server on a free loopback port; returns its base URL.
pub async fn start(queue: usize, max_sequences: usize, context: Option<usize>) -> String {
    serve(state(queue, max_sequences, context)).await
}

/// A server on the demo model whose engine runs under `config` and whose state `f`
/// adjusts; returns its base URL.
pub async fn start_engine(
    queue: usize,
    config: EngineConfig,
    f: impl FnOnce(ServerState) -> ServerState,
) -> String {
    serve(f(state_with(queue, config, None))).await
}

/// The demo model's cache spec under `cache` (to size budgets in pages).
pub fn demo_cache_spec(cache: &edge_kvcache::CacheConfig) -> edge_kvcache::CacheSpec {
    Qwen35Model::load(&demo_dir(), ActivationMode::None)
        .unwrap()
        .cache_spec(cache)
}

/// A server on the demo model with `max_sequences` in flight, whose state `f`
/// adjusts; returns its base URL.
pub async fn start_sized(
    max_sequences: usize,
    f: impl FnOnce(ServerState) -> ServerState,
) -> String {
    serve(f(state(16, max_sequences, None))).await
}

/// A server on the demo model whose state `f` adjusts; returns its base URL.
pub async fn start_with(f: impl FnOnce(ServerState) -> ServerState) -> String {
    serve(f(state(16, 4, None))).await
}

/// A server on the demo model whose state `f` adjusts, that drains when the returned
/// sender fires (or drops); returns its base URL, the sender, and the task, which ends
/// when the drain does.
pub async fn start_stoppable(
    f: impl FnOnce(ServerState) -> ServerState,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<edge_runtime::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let task = tokio::spawn(serve_on(listener, f(state(16, 4, None)), shutdown));
    (format!("http://{addr}"), stop, task)
}

/// A server constraining tool calls to the request's tools; returns its base URL.
pub async fn start_constrained() -> String {
    serve(state(16, 4, None).with_constrained_tool_calls().unwrap()).await
}

/// Serves `state` on a free loopback port; returns its base URL.
pub async fn serve(state: ServerState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_on(listener, state, std::future::pending()));
    format!("http://{addr}")
}

/// The state of a server on the demo model.
fn state(queue: usize, max_sequences: usize, context: Option<usize>) -> ServerState {
    let config = EngineConfig {
        max_sequences,
        ..EngineConfig::default()
    };
    state_with(queue, config, context)
}

/// The state of a server on the demo model whose engine runs under `config`.
fn state_with(queue: usize, config: EngineConfig, context: Option<usize>) -> ServerState {
    let model = Qwen35Model::load(&demo_dir(), ActivationMode::None).unwrap();
    let eos = model.config().eos_token_ids.clone();
    let context = context.unwrap_or(model.config().max_position_embeddings);
    let engine = Engine::new(Arc::new(model), config).unwrap();
    let handle = Arc::new(EngineHandle::spawn(engine, queue).unwrap());
    demo_server_state(handle, context, eos)
}

/// The state of a server on `handle` (an engine on the demo model, or a variant of
/// it) with the demo tokenizer and chat template, serving `context` positions.
pub fn demo_server_state(handle: Arc<EngineHandle>, context: usize, eos: Vec<u32>) -> ServerState {
    let dir = demo_dir();
    let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
    let template = ChatTemplate::from_tokenizer_config(
        &std::fs::read_to_string(dir.join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    ServerState::new(
        handle,
        Arc::new(tokenizer),
        Arc::new(template),
        "demo",
        context,
        eos,
    )
}

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

pub async fn post(client: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let res = client.post(url).json(&body).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// Posts `body` (a streamed request) and reads the whole SSE reply: its JSON records,
/// and whether it ended with `[DONE]`.
pub async fn post_sse(client: &reqwest::Client, url: &str, body: &Value) -> (Vec<Value>, bool) {
    let res = client.post(url).json(body).send().await.unwrap();
    sse_records(&res.text().await.unwrap())
}

/// The JSON records of an SSE body, and whether it ended with `[DONE]`.
pub fn sse_records(text: &str) -> (Vec<Value>, bool) {
    let mut records = Vec::new();
    let mut done = false;
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let data = block.strip_prefix("data: ").expect("an SSE data record");
        assert!(!data.contains('\n'), "one line per record: {data}");
        if data == "[DONE]" {
            done = true;
        } else {
            assert!(!done, "a record after [DONE]");
            records.push(serde_json::from_str(data).unwrap());
        }
    }
    (records, done)
}

pub fn assert_error(status: u16, body: &Value, expected: u16) {
    assert_eq!(status, expected, "{body}");
    let e = &body["error"];
    assert!(
        e["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(e["type"].is_string(), "{body}");
    assert!(
        e.get("param").is_some() && e.get("code").is_some(),
        "{body}"
    );
}
