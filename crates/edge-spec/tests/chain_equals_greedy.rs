//! Speculative greedy decoding must produce exactly plain greedy decoding's tokens.

use edge_model::{ActivationMode, Logits, Qwen35Model};
use edge_spec::{SpecConfig, generate_greedy};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn plain_greedy(model: &Qwen35Model, prompt: &[u32], n: usize) -> Vec<u32> {
    let vocab = model.config().vocab_size;
    let mut state = model.new_state();
    let mut logits = model
        .forward(prompt, &mut state, Logits::Last)
        .unwrap()
        .logits;
    let mut out = Vec::new();
    while out.len() < n {
        let t = logits[..vocab]
            .iter()
            .enumerate()
            .fold(0, |b, (i, &v)| if v > logits[b] { i } else { b }) as u32;
        out.push(t);
        logits = model
            .forward(&[t], &mut state, Logits::Last)
            .unwrap()
            .logits;
    }
    out
}

#[test]
fn chain_speculation_reproduces_greedy_for_every_draft_length() {
    for dir in ["qwen35-tiny-f32", "qwen35-tiny-bf16-vl"] {
        let model = Qwen35Model::load(&fixture(dir), ActivationMode::None).unwrap();
        let prompt: Vec<u32> = (0..40).map(|i| (i * 37 % 250) as u32).collect();
        let want = plain_greedy(&model, &prompt, 24);
        for k in [1, 2, 4] {
            let got =
                generate_greedy(&model, &prompt, 24, &[], SpecConfig { draft_tokens: k }).unwrap();
            assert_eq!(got.tokens, want, "{dir}, k={k}");
            let s = got.stats;
            assert!(s.verify_forwards > 0 && s.accepted <= s.drafted);
            assert!(s.tokens_per_verify() >= 1.0);
        }
    }
}

#[test]
fn stops_at_stop_tokens_and_limits() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let prompt = [3u32, 4, 5, 6];
    let greedy = plain_greedy(&model, &prompt, 10);
    let stop = greedy[3];
    let got = generate_greedy(&model, &prompt, 10, &[stop], SpecConfig::default()).unwrap();
    let first = greedy.iter().position(|&t| t == stop).unwrap();
    assert_eq!(got.tokens, greedy[..=first]);
    let got = generate_greedy(&model, &prompt, 1, &[], SpecConfig::default()).unwrap();
    assert_eq!(got.tokens.len(), 1);
}

#[test]
fn bad_requests_are_errors() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    assert!(generate_greedy(&model, &[], 4, &[], SpecConfig::default()).is_err());
    assert!(generate_greedy(&model, &[1], 4, &[], SpecConfig { draft_tokens: 0 }).is_err());
}

#[test]
fn state_checkpoint_rolls_back_exactly() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let mut state = model.new_state();
    model
        .forward(&[1, 2, 3, 4, 5], &mut state, Logits::Last)
        .unwrap();
    let before = state.clone();
    let cp = state.checkpoint();
    model.forward(&[9, 8, 7], &mut state, Logits::Last).unwrap();
    state.rollback(&cp).unwrap();
    assert_eq!(state, before);
    let mut other = model.new_state();
    other.layers.pop();
    assert!(other.rollback(&cp).is_err());
}
