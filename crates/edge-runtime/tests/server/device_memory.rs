//! A device error inside a forward pass: the engine runs on the emulated CUDA device
//! (the real kernels, on the CPU) with a memory limit just above what a short request
//! needs, so a long prompt's prefill runs the device out of memory. That request is
//! answered 500 with an OpenAI error body; the server stays healthy and the next
//! request runs (the backend frees its pooled buffers and allocates again).

use crate::support::{assert_error, demo_dir, demo_server_state, post, serve, user};
use edge_core::Device;
use edge_model::{ActivationMode, Qwen35Model};
use edge_runtime::{EngineBuilder, EngineHandle};
use serde_json::{Value, json};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_out_of_memory_is_a_500_and_the_server_recovers() {
    let dir = demo_dir();
    // bf16 activations: what the CUDA kernels take with bf16 weights.
    let model = Qwen35Model::load(&dir, ActivationMode::Bf16).unwrap();
    let (eos, context) = (
        model.config().eos_token_ids.clone(),
        model.config().max_position_embeddings,
    );
    let engine = EngineBuilder::from_model(Arc::new(model))
        .device(Device::CudaEmulated)
        .kv_budget(32 << 20)
        .max_sequences(1)
        .build_cuda()
        .unwrap();
    let device = engine.backend().device().clone();
    let handle = Arc::new(EngineHandle::spawn(engine, 4).unwrap());
    let base = serve(demo_server_state(handle, context, eos)).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/v1/chat/completions");
    let short = json!({"messages": [user("Hi")], "max_tokens": 2, "temperature": 0});
    let (status, v) = post(&client, &url, short.clone()).await;
    assert_eq!(status, 200, "{v}");

    // Room for what the short request used, and 64 KiB more: far less than a
    // 512-token prefill pass needs.
    let used = device
        .memory_used()
        .expect("the emulated device counts its memory");
    device.set_memory_limit(Some(used + (64 << 10))).unwrap();
    let long = json!({
        "messages": [user(&"the cat sat on the mat ".repeat(40))],
        "max_tokens": 2,
    });
    let (status, v) = post(&client, &url, long).await;
    assert_error(status, &v, 500);
    assert_eq!(v["error"]["type"], "server_error", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("out of memory"), "{message}");

    for _ in 0..2 {
        let (status, v) = post(&client, &url, short.clone()).await;
        assert_eq!(status, 200, "the server recovers: {v}");
    }
    let held = device.memory_used().unwrap();
    assert!(
        held <= used + (64 << 10),
        "{held} bytes held past the limit"
    );
    let health: Value = (client.get(format!("{base}/health")).send().await.unwrap())
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["sequences"], 0, "{health}");
}
