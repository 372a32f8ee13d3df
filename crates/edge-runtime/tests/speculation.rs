//! MTP speculation through the engine, chain and tree, is lossless: greedy requests get
//! exactly plain greedy decoding's tokens for every draft shape, including stops,
//! limits and the context's end inside an accepted run, and prefix reuse across
//! requests; configurations that cannot work are typed errors.

#[macro_use]
#[path = "../../../tests/support/mod.rs"]
mod support;

use edge_core::Device;
use edge_model::{ActivationMode, Cpu, Qwen35Model};
use edge_runtime::{Engine, EngineConfig, GenerateRequest, RuntimeError, StopReason};
use edge_spec::{SpecConfig, SpecError, Speculator};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn model(dir: &str) -> Arc<Qwen35Model<Cpu>> {
    static F32: OnceLock<Arc<Qwen35Model<Cpu>>> = OnceLock::new();
    static BF16: OnceLock<Arc<Qwen35Model<Cpu>>> = OnceLock::new();
    let cell = if dir == "qwen35-tiny-f32" {
        &F32
    } else {
        &BF16
    };
    cell.get_or_init(|| Arc::new(Qwen35Model::load(&fixture(dir), ActivationMode::None).unwrap()))
        .clone()
}

fn engine(model: &Arc<Qwen35Model<Cpu>>, spec: Option<SpecConfig>) -> Engine<Cpu> {
    let config = EngineConfig {
        speculation: spec,
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

fn prompt(seed: u32, len: usize) -> Vec<u32> {
    (0..len as u32)
        .map(|i| (i * 37 + seed * 11) % 250)
        .collect()
}

fn shapes() -> Vec<SpecConfig> {
    vec![
        SpecConfig::linear(1),
        SpecConfig::linear(2),
        SpecConfig::linear(4),
        SpecConfig::tree(3, 2, 6),
        SpecConfig::tree(4, 3, 12),
        SpecConfig::tree(2, 8, 9),
        SpecConfig::tree(6, 4, 24),
    ]
}

/// On every device (the bf16 fixture with bf16 activations): a chain and two trees give
/// plain greedy decoding's tokens, the second time from the prefix cache.
fn speculation_is_lossless(on: Device) {
    let host = Qwen35Model::load(&fixture("qwen35-tiny-bf16-vl"), ActivationMode::Bf16).unwrap();
    on_device!(arc on, host, |model, backend| {
        let engine = |spec: Option<SpecConfig>| {
            let mut config = EngineConfig {
                speculation: spec,
                prefill_chunk: 16,
                ..EngineConfig::default()
            };
            config.cache.max_sequences = Some(config.max_sequences);
            Engine::with_backend(model.clone(), backend(), config).unwrap()
        };
        let p = prompt(1, 40);
        let want = engine(None).generate(&request(&p, 24, &[])).unwrap();
        for spec in [SpecConfig::linear(2), SpecConfig::tree(3, 2, 6), SpecConfig::tree(4, 3, 12)] {
            let mut e = engine(Some(spec));
            for round in 0..2 {
                let got = e.generate(&request(&p, 24, &[])).unwrap();
                assert_eq!(got.tokens, want.tokens, "{on}, {spec:?}, round {round}");
                assert_eq!(got.cached_tokens, 40 * round);
            }
            e.cache().verify_refcounts().unwrap();
        }
    });
}

edge_core::device_test!(speculation_is_lossless);

#[test]
fn every_draft_shape_reproduces_greedy_also_from_the_prefix_cache() {
    for dir in ["qwen35-tiny-f32", "qwen35-tiny-bf16-vl"] {
        let model = model(dir);
        let p = prompt(1, 40);
        let want = engine(&model, None)
            .generate(&request(&p, 24, &[]))
            .unwrap();
        assert!(want.speculation.is_none());
        for spec in shapes() {
            let mut e = engine(&model, Some(spec));
            // Twice: the second run restores the prompt (and the MTP head's rows) from
            // the prefix cache.
            for round in 0..2 {
                let got = e.generate(&request(&p, 24, &[])).unwrap();
                assert_eq!(got.tokens, want.tokens, "{dir}, {spec:?}, round {round}");
                assert_eq!(got.cached_tokens, 40 * round);
                let s = got.speculation.unwrap();
                assert!(s.target_forwards > 0 && s.accepted <= s.drafted);
                // Every token after the prefill's came from a target forward.
                assert_eq!(1 + s.target_forwards + s.accepted, got.tokens.len());
            }
            e.cache().verify_refcounts().unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Random tree shapes and prompts: the greedy tokens of plain decoding.
    #[test]
    fn random_trees_are_lossless(
        steps in 1usize..6,
        top_k in 1usize..5,
        nodes in 2usize..20,
        seed in 0u32..1000,
        len in 1usize..30,
    ) {
        let model = model("qwen35-tiny-f32");
        let p = prompt(seed, len);
        let want = engine(&model, None).generate(&request(&p, 16, &[])).unwrap();
        let got = engine(&model, Some(SpecConfig::tree(steps, top_k, nodes)))
            .generate(&request(&p, 16, &[]))
            .unwrap();
        prop_assert_eq!(got.tokens, want.tokens);
    }
}

#[test]
fn stops_limits_and_the_context_end_inside_accepted_runs() {
    let model = model("qwen35-tiny-f32");
    let p = [3u32, 4, 5, 6];
    let greedy = engine(&model, None)
        .generate(&request(&p, 12, &[]))
        .unwrap()
        .tokens;
    for spec in shapes() {
        for stop_at in [1, 3, 6] {
            let stop = greedy[stop_at];
            let first = greedy.iter().position(|&t| t == stop).unwrap();
            let got = engine(&model, Some(spec))
                .generate(&request(&p, 12, &[stop]))
                .unwrap();
            assert_eq!(got.tokens, greedy[..=first], "{spec:?}, stop {stop}");
            assert_eq!(got.stop, StopReason::Stop);
        }
        for n in [1, 2, 5] {
            let got = engine(&model, Some(spec))
                .generate(&request(&p, n, &[]))
                .unwrap();
            assert_eq!(got.tokens, greedy[..n], "{spec:?}, limit {n}");
            assert_eq!(got.stop, StopReason::Length);
        }
    }
    // The context (512 positions) ends a few tokens after a long prompt.
    let ctx = model.config().max_position_embeddings;
    let long = prompt(5, ctx - 6);
    let want = engine(&model, None)
        .generate(&request(&long, 50, &[]))
        .unwrap();
    assert_eq!(want.stop, StopReason::Context);
    for spec in shapes() {
        let got = engine(&model, Some(spec))
            .generate(&request(&long, 50, &[]))
            .unwrap();
        assert_eq!(got.tokens, want.tokens, "{spec:?}");
        assert_eq!(got.stop, StopReason::Context, "{spec:?}");
    }
}

#[test]
fn sampled_requests_speculate_and_stay_seeded() {
    let model = model("qwen35-tiny-f32");
    let mut req = request(&prompt(2, 20), 20, &[]);
    req.sampling.temperature = 0.8;
    req.sampling.seed = 7;
    let mut e = engine(&model, Some(SpecConfig::tree(3, 3, 8)));
    let a = e.generate(&req).unwrap();
    let b = e.generate(&req).unwrap();
    assert_eq!(a.tokens, b.tokens, "the same seed, the same tokens");
    assert_eq!(a.tokens.len(), 20);
    let s = a.speculation.expect("sampled requests speculate too");
    assert_eq!(1 + s.target_forwards + s.accepted, a.tokens.len());
}

#[test]
fn speculation_needs_an_mtp_head_and_a_valid_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = edge_model::synthetic::tiny_config(64);
    edge_model::synthetic::write_random_checkpoint(
        dir,
        &config,
        edge_model::synthetic::SyntheticDType::F32,
        5,
    )
    .unwrap();
    let plain = Arc::new(Qwen35Model::load(dir, ActivationMode::None).unwrap());
    let e = Engine::new(
        plain.clone(),
        EngineConfig {
            speculation: Some(SpecConfig::default()),
            ..EngineConfig::default()
        },
    );
    assert!(e.unwrap_err().to_string().contains("MTP head"));
    assert!(matches!(
        Speculator::new(&plain, SpecConfig::default()).err(),
        Some(edge_spec::SpecError::NoMtpHead)
    ));
    let mtp = model("qwen35-tiny-f32");
    for bad in [
        SpecConfig::linear(0),
        SpecConfig::tree(3, 0, 8),
        SpecConfig::tree(3, 2, 1),
        SpecConfig::tree(3, 2, 65),
        SpecConfig::tree(10, 8, 32),
    ] {
        assert!(
            matches!(
                Speculator::new(&mtp, bad),
                Err(SpecError::InvalidConfig { .. })
            ),
            "{bad:?}"
        );
        let config = EngineConfig {
            speculation: Some(bad),
            ..EngineConfig::default()
        };
        assert!(
            matches!(
                Engine::new(mtp.clone(), config),
                Err(RuntimeError::Spec(SpecError::InvalidConfig { .. }))
            ),
            "{bad:?}"
        );
    }
}

/// Log-probabilities and penalties: the engine reports each token's model
/// log-probability with alternatives, applies the penalties to greedy choices, and
/// does not speculate for such requests (their distributions depend on the path).
#[test]
fn logprobs_and_penalties_decode_token_by_token() {
    let model = model("qwen35-tiny-f32");
    let vocab = model.config().vocab_size;
    let mut e = engine(&model, Some(SpecConfig::tree(3, 2, 6)));
    let mut req = request(&prompt(4, 12), 10, &[]);
    req.logprobs = Some(3);
    let out = e.generate(&req).unwrap();
    assert!(out.speculation.is_none());
    let lp = out.logprobs.as_ref().unwrap();
    assert_eq!(lp.len(), out.tokens.len());
    for (entry, &t) in lp.iter().zip(&out.tokens) {
        assert_eq!(entry.token, t);
        assert_eq!(entry.top.len(), 3);
        assert_eq!(entry.top[0].0, t, "greedy picks the most likely token");
        assert!((entry.top[0].1 - entry.logprob).abs() < 1e-6 && entry.logprob <= 0.0);
    }
    let plain = engine(&model, None)
        .generate(&request(&prompt(4, 12), 10, &[]))
        .unwrap();
    assert_eq!(out.tokens, plain.tokens);
    // Penalties: every greedy choice is the argmax of the raw logits minus
    // frequency · count + presence over the tokens generated before it.
    let mut req = request(&prompt(4, 12), 16, &[]);
    req.sampling.frequency_penalty = 1.5;
    req.sampling.presence_penalty = 0.5;
    req.record_logits = true;
    let out = e.generate(&req).unwrap();
    let rows = out.logits.as_ref().unwrap();
    let mut counts = std::collections::HashMap::new();
    for (i, &t) in out.tokens.iter().enumerate() {
        let mut row = rows[i * vocab..][..vocab].to_vec();
        for (&tok, &c) in &counts {
            row[tok as usize] -= 1.5 * c as f32 + 0.5;
        }
        assert_eq!(edge_model::argmax(&row), t, "step {i}");
        *counts.entry(t).or_insert(0u32) += 1;
    }
    assert_ne!(
        out.tokens[..10],
        plain.tokens[..],
        "the penalties change the output"
    );
    let mut bad = request(&prompt(4, 12), 4, &[]);
    bad.logprobs = Some(21);
    assert!(matches!(
        e.generate(&bad),
        Err(edge_runtime::RuntimeError::TooManyLogprobs {
            requested: 21,
            max: 20
        })
    ));
}
