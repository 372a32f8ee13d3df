//! MTP chain speculation through the engine produces exactly plain greedy decoding's
//! tokens, for every draft length, and honours stop tokens and limits.

use edge_model::{ActivationMode, Qwen35Model};
use edge_runtime::{Engine, EngineConfig, GenerateRequest, StopReason};
use edge_spec::{ChainSpeculator, SpecConfig};
use std::path::PathBuf;
use std::sync::Arc;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn engine(model: &Arc<Qwen35Model>, draft: Option<usize>) -> Engine {
    let config = EngineConfig {
        speculation: draft.map(|k| SpecConfig { draft_tokens: k }),
        prefill_chunk: 16,
        ..EngineConfig::default()
    };
    Engine::new(model.clone(), config).unwrap()
}

fn request(prompt: &[u32], n: usize, stop: &[u32]) -> GenerateRequest {
    GenerateRequest {
        prompt: prompt.to_vec(),
        max_new_tokens: n,
        stop_tokens: stop.to_vec(),
        ..GenerateRequest::default()
    }
}

#[test]
fn chain_speculation_reproduces_greedy_for_every_draft_length() {
    for dir in ["qwen35-tiny-f32", "qwen35-tiny-bf16-vl"] {
        let model = Arc::new(Qwen35Model::load(&fixture(dir), ActivationMode::None).unwrap());
        let prompt: Vec<u32> = (0..40).map(|i| (i * 37 % 250) as u32).collect();
        let want = engine(&model, None)
            .generate(&request(&prompt, 24, &[]))
            .unwrap();
        assert!(want.speculation.is_none());
        for k in [1, 2, 4] {
            let mut e = engine(&model, Some(k));
            // Twice: the second run restores the prompt (and the MTP head's rows) from
            // the prefix cache.
            for round in 0..2 {
                let got = e.generate(&request(&prompt, 24, &[])).unwrap();
                assert_eq!(got.tokens, want.tokens, "{dir}, k={k}, round {round}");
                assert_eq!(got.cached_tokens, 40 * round);
                let s = got.speculation.unwrap();
                assert!(s.verify_forwards > 0 && s.accepted <= s.drafted);
                assert!(s.tokens_per_verify() >= 1.0);
            }
        }
    }
}

#[test]
fn speculation_stops_at_stop_tokens_and_limits() {
    let model =
        Arc::new(Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap());
    let prompt = [3u32, 4, 5, 6];
    let greedy = engine(&model, None)
        .generate(&request(&prompt, 10, &[]))
        .unwrap()
        .tokens;
    let stop = greedy[3];
    let first = greedy.iter().position(|&t| t == stop).unwrap();
    let got = engine(&model, Some(3))
        .generate(&request(&prompt, 10, &[stop]))
        .unwrap();
    assert_eq!(got.tokens, greedy[..=first]);
    assert_eq!(got.stop, StopReason::Stop);
    for n in [1, 2, 5] {
        let got = engine(&model, Some(3))
            .generate(&request(&prompt, n, &[]))
            .unwrap();
        assert_eq!(got.tokens, greedy[..n], "limit {n}");
        assert_eq!(got.stop, StopReason::Length);
    }
}

#[test]
fn speculation_needs_an_mtp_head_and_a_draft() {
    let dir = std::env::temp_dir().join(format!("edge-runtime-nomtp-{}", std::process::id()));
    let config = edge_model::synthetic::tiny_config(64);
    edge_model::synthetic::write_random_checkpoint(
        &dir,
        &config,
        edge_model::synthetic::SyntheticDType::F32,
        5,
    )
    .unwrap();
    let plain = Arc::new(Qwen35Model::load(&dir, ActivationMode::None).unwrap());
    std::fs::remove_dir_all(&dir).ok();
    let e = Engine::new(
        plain.clone(),
        EngineConfig {
            speculation: Some(SpecConfig::default()),
            ..EngineConfig::default()
        },
    );
    assert!(e.unwrap_err().to_string().contains("MTP head"));
    assert!(ChainSpeculator::new(&plain, SpecConfig::default()).is_err());
    let mtp = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    assert!(ChainSpeculator::new(&mtp, SpecConfig { draft_tokens: 0 }).is_err());
}
