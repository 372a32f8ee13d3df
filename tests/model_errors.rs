//! Every way a checkpoint or a request can be wrong gives a typed error that names the
//! problem — never a panic.

#[macro_use]
mod support;

use edge_core::Device;
use edge_kvcache::{CacheConfig, SeqId, SequenceCache};
use edge_model::synthetic::{SyntheticDType, write_random_checkpoint};
use edge_model::{
    ActivationMode, Backend, Cpu, LogitRows, ModelError, Qwen35Model, Session, StepBatch,
};
use safetensors::{Dtype, SafeTensors};
use std::path::Path;

fn tiny_config() -> serde_json::Value {
    edge_model::synthetic::tiny_config(40)
}

/// A test's own checkpoint folder, removed when it drops.
struct Checkpoint(tempfile::TempDir);

impl std::ops::Deref for Checkpoint {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

fn make() -> Checkpoint {
    let d = tempfile::tempdir().unwrap();
    write_random_checkpoint(d.path(), &tiny_config(), SyntheticDType::F32, 3).unwrap();
    Checkpoint(d)
}

/// Rewrites `model.safetensors`, letting `edit` change each tensor (None drops it).
fn rewrite(
    dir: &Path,
    edit: impl Fn(&str, Dtype, Vec<usize>, Vec<u8>) -> Option<(Dtype, Vec<usize>, Vec<u8>)>,
) {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let kept: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = st
        .iter()
        .filter_map(|(n, v)| {
            edit(n, v.dtype(), v.shape().to_vec(), v.data().to_vec())
                .map(|(d, s, b)| (n.to_string(), d, s, b))
        })
        .collect();
    let views: Vec<(String, safetensors::tensor::TensorView)> = kept
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &path).unwrap();
}

fn load_err(dir: &Path) -> ModelError {
    Qwen35Model::load(dir, ActivationMode::None).unwrap_err()
}

#[test]
fn valid_synthetic_checkpoint_loads_and_runs() {
    let d = make();
    let m = Qwen35Model::load(&d, ActivationMode::None).unwrap();
    let mut session = Session::new(&m, CacheConfig::default()).unwrap();
    let out = session.forward(&[1, 2, 3], LogitRows::All).unwrap();
    assert_eq!(out.logits.len(), 3 * 64);
    assert!(out.logits.iter().all(|v| v.is_finite()));
}

#[test]
fn missing_tensor_is_named() {
    let d = make();
    rewrite(&d, |n, dt, s, b| {
        (n != "model.layers.2.linear_attn.A_log").then_some((dt, s, b))
    });
    let e = load_err(&d);
    assert!(
        matches!(&e, ModelError::MissingTensor { name } if name == "model.layers.2.linear_attn.A_log"),
        "{e}"
    );
}

#[test]
fn wrong_shape_is_named() {
    let d = make();
    rewrite(&d, |n, dt, s, b| {
        if n == "model.layers.3.self_attn.k_proj.weight" {
            Some((dt, vec![s[1], s[0]], b))
        } else {
            Some((dt, s, b))
        }
    });
    let e = load_err(&d);
    assert!(
        e.to_string()
            .contains("model.layers.3.self_attn.k_proj.weight"),
        "{e}"
    );
    assert!(matches!(e, ModelError::TensorShape { .. }), "{e}");
}

#[test]
fn wrong_dtype_is_named() {
    let d = make();
    rewrite(&d, |n, dt, s, b| {
        if n == "model.norm.weight" {
            let n = b.len() / 4;
            Some((Dtype::I32, s, vec![0; n * 4]))
        } else {
            Some((dt, s, b))
        }
    });
    let e = load_err(&d);
    assert!(
        matches!(&e, ModelError::TensorDType { name, .. } if name == "model.norm.weight"),
        "{e}"
    );
}

#[test]
fn nvfp4_scale_with_wrong_dtype_is_named() {
    let d = make();
    rewrite(&d, |n, dt, s, b| {
        if n == "model.layers.0.mlp.down_proj.weight" {
            // Pretend it is NVFP4 codes, but give the block scales as f32.
            Some((Dtype::U8, vec![s[0], s[1] / 2], vec![0; s[0] * s[1] / 2]))
        } else {
            Some((dt, s, b))
        }
    });
    // Add a wrongly typed weight_scale beside it.
    let path = d.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut all: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = st
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                v.dtype(),
                v.shape().to_vec(),
                v.data().to_vec(),
            )
        })
        .collect();
    all.push((
        "model.layers.0.mlp.down_proj.weight_scale".into(),
        Dtype::F32,
        vec![32, 4],
        vec![0; 512],
    ));
    let views: Vec<(String, safetensors::tensor::TensorView)> = all
        .iter()
        .map(|(n, d, s, b)| {
            (
                n.clone(),
                safetensors::tensor::TensorView::new(*d, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &path).unwrap();
    let e = load_err(&d);
    assert!(e.to_string().contains("down_proj.weight_scale"), "{e}");
}

#[test]
fn truncated_file_is_a_checkpoint_error() {
    let d = make();
    let path = d.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(load_err(&d), ModelError::Checkpoint { .. }));
}

#[test]
fn bad_requests_leave_state_untouched() {
    let d = make();
    let m = Qwen35Model::load(&d, ActivationMode::None).unwrap();
    let mut session = Session::new(&m, CacheConfig::default()).unwrap();
    session.forward(&[1, 2, 3], LogitRows::Last).unwrap();
    let seq = session.sequence();
    let before = session.cache().save_state(seq).unwrap();
    for (tokens, needle) in [
        (vec![], "no tokens"),
        (vec![5, 64], "outside the vocabulary"),
        (vec![7; 38], "past the context of 40"),
    ] {
        let e = session
            .forward(&tokens, LogitRows::Last)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{e}");
        assert_eq!(session.len(), 3, "length changed after: {e}");
        assert_eq!(
            session.cache().save_state(seq).unwrap(),
            before,
            "state changed after: {e}"
        );
    }
    // A span that does not continue the sequence, and a sequence the cache does not
    // hold, are rejected.
    let mut cpu = Cpu::new();
    let gap = StepBatch::single(seq, &[1], 5, LogitRows::Last);
    let e = m.forward(&mut cpu, &gap, session.cache_mut()).unwrap_err();
    assert!(e.to_string().contains("continue at position 3"), "{e}");
    let stranger = StepBatch::single(SeqId::new(7), &[1], 0, LogitRows::Last);
    assert!(matches!(
        m.forward(&mut cpu, &stranger, session.cache_mut()),
        Err(edge_model::ModelError::Cache(_))
    ));
    assert_eq!(session.cache().sequence(seq).unwrap().len, 3);
    assert_eq!(session.cache().save_state(seq).unwrap(), before);
    // No MTP head in this checkpoint: a clear error.
    let hidden = session.backend_mut().upload(&[0.0; 32]).unwrap();
    let e = session
        .mtp_forward(&[1], &hidden, 2, LogitRows::Last)
        .unwrap_err();
    assert!(e.to_string().contains("no MTP head"), "{e}");
}

#[test]
fn a_budget_too_small_is_a_typed_error_that_changes_nothing() {
    let d = make();
    let m = Qwen35Model::load(&d, ActivationMode::None).unwrap();
    let mut config = CacheConfig {
        block_size: 4,
        ..CacheConfig::default()
    };
    let spec = m.cache_spec(&config);
    config.budget_bytes = 3 * spec.block_bytes() + spec.state_bytes();
    let mut session = Session::new(&m, config).unwrap();
    session.forward(&[1, 2, 3, 4, 5], LogitRows::Last).unwrap();
    let seq = session.sequence();
    let before = session.cache().save_state(seq).unwrap();
    let e = session.forward(&[6; 20], LogitRows::Last).unwrap_err();
    assert!(
        matches!(
            e,
            ModelError::Cache(edge_kvcache::KvCacheError::OverBudget { .. })
        ),
        "{e}"
    );
    assert_eq!(session.len(), 5);
    assert_eq!(session.cache().save_state(seq).unwrap(), before);
    // Rows that fit still run.
    session.forward(&[6, 7], LogitRows::Last).unwrap();
}

#[test]
fn missing_config_and_bad_json_are_errors() {
    let d = make();
    std::fs::write(d.join("config.json"), "{ not json").unwrap();
    assert!(matches!(load_err(&d), ModelError::Json { .. }));
    std::fs::remove_file(d.join("config.json")).unwrap();
    assert!(matches!(load_err(&d), ModelError::Io { .. }));
}

/// On every device (the NVFP4 fixture, bf16 activations): requests with no tokens, a
/// token outside the vocabulary, rows past the context, a span that does not continue
/// the sequence, a sequence the cache does not hold, and a budget too small each give
/// their typed error, and the session then continues exactly as one that never saw
/// them.
fn bad_requests_change_nothing(on: Device) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/qwen35-tiny-nvfp4");
    let host = Qwen35Model::load(&fixture, ActivationMode::Bf16).unwrap();
    let (vocab, context) = (
        host.config().vocab_size,
        host.config().max_position_embeddings,
    );
    on_device!(on, host, |model, backend| {
        let mut config = CacheConfig {
            block_size: 4,
            ..CacheConfig::default()
        };
        let spec = model.cache_spec(&config);
        config.budget_bytes = 40 * spec.block_bytes() + 2 * spec.state_bytes();
        let prompt = [1, 2, 3, 4, 5];
        let mut clean = Session::with_backend(model, backend(), config).unwrap();
        clean.forward(&prompt, LogitRows::Last).unwrap();
        let want = clean.forward(&[6, 7], LogitRows::All).unwrap().logits;

        let mut session = Session::with_backend(model, backend(), config).unwrap();
        session.forward(&prompt, LogitRows::Last).unwrap();
        let past_context = vec![7; context];
        let kind = |e: &ModelError| match e {
            ModelError::EmptyBatch => "empty",
            ModelError::TokenOutOfVocab { token, vocab: v } if *token as usize == *v => "vocab",
            ModelError::PastContext { context: c, .. } if *c == context => "context",
            _ => "other",
        };
        let cases: [(&[u32], &str, &str); 3] = [
            (&[], "empty", "no tokens"),
            (&[5, vocab as u32], "vocab", "outside the vocabulary"),
            (&past_context, "context", "past the context"),
        ];
        for (tokens, want, needle) in cases {
            let e = session.forward(tokens, LogitRows::Last).unwrap_err();
            assert_eq!(kind(&e), want, "{on}: {e}");
            assert!(e.to_string().contains(needle), "{on}: {e}");
        }
        let over = session.forward(&[6; 200], LogitRows::Last).unwrap_err();
        assert!(
            matches!(
                over,
                ModelError::Cache(edge_kvcache::KvCacheError::OverBudget { .. })
            ),
            "{on}: {over}"
        );
        let seq = session.sequence();
        let mut be = backend();
        let gap = StepBatch::single(seq, &[1], 7, LogitRows::Last);
        let e = model
            .forward(&mut be, &gap, session.cache_mut())
            .unwrap_err();
        assert!(
            e.to_string().contains("continue at position 5"),
            "{on}: {e}"
        );
        let stranger = StepBatch::single(SeqId::new(7), &[1], 0, LogitRows::Last);
        let e = model
            .forward(&mut be, &stranger, session.cache_mut())
            .unwrap_err();
        assert!(
            matches!(
                e,
                ModelError::Cache(edge_kvcache::KvCacheError::UnknownSequence(_))
            ),
            "{on}: {e}"
        );
        assert_eq!(session.len(), prompt.len(), "{on}");
        let got = session.forward(&[6, 7], LogitRows::All).unwrap().logits;
        assert_eq!(got, want, "{on}: the session changed");
    });
}

edge_core::device_test!(bad_requests_change_nothing);
