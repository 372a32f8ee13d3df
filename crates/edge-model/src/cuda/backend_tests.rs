//! The whole model on the CUDA backend against the CPU backend on a synthetic bf16
//! checkpoint with kernel-sized heads: a prompt, decode steps, the MTP head, a token
//! tree and its commit (ignored without a GPU; run with
//! `cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::`).

use super::tests::device;
use super::*;
use crate::synthetic::{SyntheticDType, write_predictable_checkpoint, write_random_checkpoint};
use crate::{
    AcceptedPath, ActivationMode, Backend, Cpu, LogitRows, Qwen35Model, Session, StepBatch,
};
use edge_core::Device;
use edge_kvcache::{CacheConfig, SequenceCache};

/// Heads the attention and GDN kernels take (head_dim 64), widths of whole tensor-core
/// tiles.
fn kernel_sized_config() -> serde_json::Value {
    serde_json::json!({
        "hidden_size": 128, "num_hidden_layers": 4, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 64, "linear_value_head_dim": 64,
        "vocab_size": 256, "max_position_embeddings": 4096, "eos_token_id": 1,
        "tie_word_embeddings": true
    })
}

/// A kernel-sized synthetic bf16 checkpoint (with an MTP head) in a fresh folder.
fn checkpoint(seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_predictable_checkpoint(
        dir.path(),
        &kernel_sized_config(),
        SyntheticDType::Bf16,
        seed,
    )
    .unwrap();
    dir
}

fn models(on: Device) -> (Qwen35Model<Cpu>, Qwen35Model<CudaBackend>, CudaBackend) {
    let host = Qwen35Model::load(checkpoint(11).path(), ActivationMode::Bf16).unwrap();
    let mut gpu = CudaBackend::on(device(on));
    let model = host.to_backend(&mut gpu).unwrap();
    (host, model, gpu)
}

/// Largest |a − b| over the largest |a|.
fn relative_gap(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = a.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
    let gap = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    gap / scale
}

fn assert_close(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_within(what, cpu, gpu, 2e-3);
}

fn assert_within(what: &str, cpu: &[f32], gpu: &[f32], tolerance: f32) {
    let gap = relative_gap(cpu, gpu);
    assert!(gap < tolerance, "{what}: relative gap {gap:e}");
}

fn the_model_matches_the_cpu_over_a_prompt_decode_steps_and_the_mtp_head(on: Device) {
    let (host, model, gpu) = models(on);
    let config = CacheConfig::default();
    let mut cpu_s = Session::new(&host, config).unwrap();
    let mut gpu_s = Session::with_backend(&model, gpu, config).unwrap();
    let prompt: Vec<u32> = (0..37).map(|i| (i * 7 + 3) % 256).collect();
    let a = cpu_s.forward(&prompt, LogitRows::All).unwrap();
    let b = gpu_s.forward(&prompt, LogitRows::All).unwrap();
    assert_close("prompt logits", &a.logits, &b.logits);
    let hidden_cpu = a.hidden.to_vec();
    let hidden_gpu = gpu_s.backend_mut().download(&b.hidden).unwrap();
    assert_close("prompt hidden", &hidden_cpu, &hidden_gpu);
    let mut next = crate::argmax(&a.logits[a.logits.len() - 256..]);
    for step in 0..4 {
        let a = cpu_s.forward(&[next], LogitRows::Last).unwrap();
        let b = gpu_s.forward(&[next], LogitRows::Last).unwrap();
        assert_close(&format!("decode step {step}"), &a.logits, &b.logits);
        let (ta, tb) = (crate::argmax(&a.logits), crate::argmax(&b.logits));
        assert_eq!(ta, tb, "greedy token at step {step}");
        let ma = cpu_s
            .mtp_forward(&[ta], &a.hidden, 1, LogitRows::Last)
            .unwrap();
        let mb = gpu_s
            .mtp_forward(&[tb], &b.hidden, 1, LogitRows::Last)
            .unwrap();
        assert_close(&format!("MTP at step {step}"), &ma.logits, &mb.logits);
        next = ta;
    }
    // A greedy row: the device's argmax is the token the CPU's logits give; top rows:
    // the device's top-k tokens and log-probabilities those of the CPU's logits.
    let a = cpu_s.forward(&[next, 7], LogitRows::All).unwrap();
    let b = gpu_s.forward(&[next], LogitRows::Greedy).unwrap();
    assert!(b.logits.is_empty());
    assert_eq!(
        b.greedy,
        vec![crate::argmax(&a.logits[..256])],
        "greedy row"
    );
    let c = gpu_s.forward(&[7], LogitRows::Top(5)).unwrap();
    let want = crate::TopLogits::of(&a.logits[256..], 5);
    let got = &c.top[0];
    assert_eq!(got.ids, want.ids, "top tokens");
    for (g, w) in got.log_probs().zip(want.log_probs()) {
        assert!((g.1 - w.1).abs() < 2e-3, "log p {} against {}", g.1, w.1);
    }
}

fn a_token_tree_and_its_commit_match_the_cpu(on: Device) {
    let (host, model, mut gpu) = models(on);
    let mut cpu = Cpu::new();
    let config = CacheConfig::default();
    let mut cpu_cache = edge_kvcache::PagedCache::new(host.cache_spec(&config), config).unwrap();
    let memory = gpu
        .cache_memory(&model.cache_spec(&config), &config)
        .unwrap();
    let mut gpu_cache = edge_kvcache::PagedCache::with_memory(memory, config).unwrap();
    let (sa, sb) = (
        cpu_cache.new_sequence(0).unwrap(),
        gpu_cache.new_sequence(0).unwrap(),
    );
    let prompt: Vec<u32> = (0..21).map(|i| (i * 5 + 1) % 256).collect();
    let pa = StepBatch::single(sa, &prompt, 0, LogitRows::Last);
    let pb = StepBatch::single(sb, &prompt, 0, LogitRows::Last);
    host.forward(&mut cpu, &pa, &mut cpu_cache).unwrap();
    model.forward(&mut gpu, &pb, &mut gpu_cache).unwrap();
    // Seven nodes: a root with two children, each with two children.
    let tokens = [40u32, 41, 42, 43, 44, 45, 46];
    let parents = [None, Some(0), Some(0), Some(1), Some(1), Some(2), Some(2)];
    let mut ta = StepBatch::new();
    ta.push_tree(sa, &tokens, &parents, prompt.len(), LogitRows::All);
    let mut tb = StepBatch::new();
    tb.push_tree(sb, &tokens, &parents, prompt.len(), LogitRows::All);
    let a = host.forward(&mut cpu, &ta, &mut cpu_cache).unwrap();
    let b = model.forward(&mut gpu, &tb, &mut gpu_cache).unwrap();
    assert_close("tree logits", &a.logits, &b.logits);
    let path = [AcceptedPath {
        seq: sa,
        rows: vec![0, 2, 5],
    }];
    host.commit_tree(&mut cpu, a.tree.unwrap(), &path, &mut cpu_cache)
        .unwrap();
    let path = [AcceptedPath {
        seq: sb,
        rows: vec![0, 2, 5],
    }];
    model
        .commit_tree(&mut gpu, b.tree.unwrap(), &path, &mut gpu_cache)
        .unwrap();
    assert_eq!(
        cpu_cache.sequence(sa).unwrap().len,
        gpu_cache.sequence(sb).unwrap().len
    );
    // The step after the commit reads the moved KV rows and the advanced state.
    let len = cpu_cache.sequence(sa).unwrap().len;
    let a = host
        .forward(
            &mut cpu,
            &StepBatch::single(sa, &[9], len, LogitRows::Last),
            &mut cpu_cache,
        )
        .unwrap();
    let b = model
        .forward(
            &mut gpu,
            &StepBatch::single(sb, &[9], len, LogitRows::Last),
            &mut gpu_cache,
        )
        .unwrap();
    assert_close("step after the commit", &a.logits, &b.logits);
}

fn cpu_only_modes_are_refused_with_a_typed_error(on: Device) {
    let host = Qwen35Model::load(checkpoint(3).path(), ActivationMode::None).unwrap();
    let err = host
        .to_backend(&mut CudaBackend::on(device(on)))
        .unwrap_err();
    assert!(
        matches!(
            err,
            crate::ModelError::Unsupported {
                backend: "cuda",
                ..
            }
        ),
        "{err}"
    );
}

/// A tied `lm_head` reads the embedding table's device copy (no second upload), and the
/// logits still match the CPU's.
fn a_tied_lm_head_shares_the_embedding_table(on: Device) {
    let dir = tempfile::tempdir().unwrap();
    write_random_checkpoint(dir.path(), &kernel_sized_config(), SyntheticDType::Bf16, 4).unwrap();
    let host = Qwen35Model::load(dir.path(), ActivationMode::Bf16).unwrap();
    assert!(host.lm_head_is_embedding());
    let mut gpu = CudaBackend::on(device(on));
    let model = host.to_backend(&mut gpu).unwrap();
    match model.lm_head() {
        CudaLinear::Bf16(m) => assert!(
            std::sync::Arc::ptr_eq(m.shared(), &model.embed.table),
            "lm_head has its own copy"
        ),
        other => panic!("lm_head uploaded as {other:?}"),
    }
    let prompt: Vec<u32> = (0..9).map(|i| (i * 13 + 5) % 256).collect();
    let a = Session::new(&host, CacheConfig::default())
        .unwrap()
        .forward(&prompt, LogitRows::All)
        .unwrap();
    let b = Session::with_backend(&model, gpu, CacheConfig::default())
        .unwrap()
        .forward(&prompt, LogitRows::All)
        .unwrap();
    // A random (not predictable) checkpoint: bf16 activation roundings that differ
    // between the CPU's and the kernels' accumulation orders add up to 2.4e-3 over the
    // four layers on the emulated device.
    assert_within("tied logits", &a.logits, &b.logits, 5e-3);
}

edge_core::device_test!(
    the_model_matches_the_cpu_over_a_prompt_decode_steps_and_the_mtp_head,
    cuda
);
edge_core::device_test!(a_token_tree_and_its_commit_match_the_cpu, cuda);
edge_core::device_test!(cpu_only_modes_are_refused_with_a_typed_error, cuda);
edge_core::device_test!(a_tied_lm_head_shares_the_embedding_table, cuda);
