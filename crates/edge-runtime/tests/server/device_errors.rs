//! An internal failure during a request (here a weight gone bad, as a device fault
//! leaves it: one embedding row of NaN) is answered 500 with an OpenAI error body, and
//! the server stays healthy: the next request runs and `/health` says ok.
//!
//! The fault is injected through the checkpoint alone (a copy of the demo model whose
//! embedding row of one token is NaN), so no test hook runs in the server's code: a
//! prompt with that token fills its hidden rows, and so every logit, with NaN, and the
//! sampler has nothing to sample (`SpecError::NothingToSample`, an internal error);
//! prompts without it are untouched (their NaN logit for that token, through the tied
//! `lm_head`, is never chosen).

use crate::support::{demo_dir, demo_server_state, serve, user};
use edge_model::{ActivationMode, Qwen35Model};
use edge_runtime::{Engine, EngineConfig, EngineHandle, Tokenizer};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;

/// The embedding tensor of the demo checkpoint (`[vocab, hidden]`, bf16).
const EMBED: &str = "model.language_model.embed_tokens.weight";

/// Copies the demo checkpoint into `dir` with the embedding row of `token` set to NaN.
fn poisoned_checkpoint(dir: &Path, token: u32) {
    let src = demo_dir();
    for name in ["config.json", "generation_config.json"] {
        std::fs::copy(src.join(name), dir.join(name)).unwrap();
    }
    let mut bytes = std::fs::read(src.join("model.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let entry = &header[EMBED];
    assert_eq!(entry["dtype"], "BF16", "{entry}");
    let hidden = entry["shape"][1].as_u64().unwrap() as usize;
    let start = entry["data_offsets"][0].as_u64().unwrap() as usize;
    let row = 8 + header_len + start + token as usize * hidden * 2;
    let nan = 0x7fc0u16.to_le_bytes();
    for v in bytes[row..row + hidden * 2].chunks_exact_mut(2) {
        v.copy_from_slice(&nan);
    }
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
}

/// A server on the model in `dir` with the demo tokenizer and template.
async fn serve_model(dir: &Path) -> String {
    let model = Qwen35Model::load(dir, ActivationMode::None).unwrap();
    let eos = model.config().eos_token_ids.clone();
    let context = model.config().max_position_embeddings;
    let engine = Engine::new(Arc::new(model), EngineConfig::default()).unwrap();
    let handle = Arc::new(EngineHandle::spawn(engine, 8).unwrap());
    serve(demo_server_state(handle, context, eos)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_failure_is_a_500_and_the_server_stays_healthy() {
    let tokenizer = Tokenizer::from_file(&demo_dir().join("tokenizer.json")).unwrap();
    let ids = tokenizer.encode("~").unwrap();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let dir = tempfile::tempdir().unwrap();
    poisoned_checkpoint(dir.path(), ids[0]);
    let base = serve_model(dir.path()).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let ask = |text: &str| {
        json!({"model": "demo", "messages": [user(text)], "max_tokens": 8,
               "temperature": 0.7, "seed": 1})
    };

    for _ in 0..2 {
        let res = client.post(&url).json(&ask("Tell me ~ now")).send().await;
        let res = res.unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 500, "{body}");
        let e = &body["error"];
        assert_eq!(e["type"], "server_error", "{body}");
        assert!(
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("nothing to sample")),
            "{body}"
        );
        assert!(
            e.get("param").is_some() && e.get("code").is_some(),
            "{body}"
        );

        // The failure ended that request only: the next one runs.
        let res = client
            .post(&url)
            .json(&ask("Hello! Who are you?"))
            .send()
            .await;
        let res = res.unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(body["choices"][0]["message"].is_object(), "{body}");
    }

    let health: Value = (reqwest::get(format!("{base}/health")).await.unwrap())
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok", "{health}");
}
