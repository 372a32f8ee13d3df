//! The layers' work buffers come from a reusable [`Scratch`] pool without being
//! cleared: every layer must write each value before it reads it. A poisoned pool
//! (every buffer NaN when handed out) proves it: any value read before it was written
//! would turn the logits NaN or change them.

#[macro_use]
mod support;

use edge_core::Device;
use edge_kvcache::{CacheConfig, PagedCache};
use edge_model::synthetic::{SyntheticDType, tiny_config, write_random_checkpoint};
use edge_model::{ActivationMode, Backend, Cpu, LogitRows, Qwen35Model, Scratch, StepBatch};

fn model(mode: ActivationMode) -> Qwen35Model<Cpu> {
    // Three GDN layers and one attention layer; a 70-token prompt spans two GDN chunks.
    let config = tiny_config(128);
    let dir = tempfile::tempdir().unwrap();
    write_random_checkpoint(dir.path(), &config, SyntheticDType::F32, 11).unwrap();
    Qwen35Model::load(dir.path(), mode).unwrap()
}

/// Logits of a prompt and of three decode steps, each call on the backend
/// `backend(step)` returns (its pool of work buffers), except that with `reuse` the odd
/// steps run on the prompt's backend.
fn run<B: Backend>(
    m: &Qwen35Model<B>,
    reuse: bool,
    mut backend: impl FnMut(usize) -> B,
) -> Vec<Vec<f32>> {
    let prompt: Vec<u32> = (0..70).map(|i| (i * 7 + 3) % 64).collect();
    let config = CacheConfig {
        block_size: 16,
        max_sequences: Some(1),
        ..CacheConfig::default()
    };
    let mut kept = backend(0);
    let memory = kept.cache_memory(&m.cache_spec(&config), &config).unwrap();
    let mut cache = PagedCache::with_memory(memory, config).unwrap();
    let seq = cache.new_sequence(100).unwrap();
    let batch = StepBatch::single(seq, &prompt, 0, LogitRows::All);
    let mut out = vec![m.forward(&mut kept, &batch, &mut cache).unwrap().logits];
    for (step, tok) in [5u32, 9, 60].into_iter().enumerate() {
        let mut fresh = backend(step + 1);
        // Odd steps keep the backend of the calls before (stale values in its pool).
        let be = if reuse && step % 2 == 1 {
            &mut kept
        } else {
            &mut fresh
        };
        let batch = StepBatch::single(seq, &[tok], prompt.len() + step, LogitRows::Last);
        out.push(m.forward(be, &batch, &mut cache).unwrap().logits);
    }
    out
}

#[test]
fn poisoned_and_reused_scratch_give_the_plain_forward_exactly() {
    for mode in [ActivationMode::None, ActivationMode::Bf16] {
        let m = model(mode);
        let plain = run(&m, true, |_| Cpu::new());
        assert!(plain.iter().flatten().all(|v| v.is_finite()));
        assert_eq!(
            run(&m, true, |_| Cpu::with_scratch(Scratch::poisoned())),
            plain,
            "{mode:?}"
        );
        let mut shared = Some(Cpu::new());
        let reused = run(&m, true, |_| shared.take().unwrap_or_default());
        assert_eq!(reused, plain, "{mode:?}");
    }
}

/// On every device (bf16 activations, the NVFP4 fixture): a backend whose pooled buffers
/// hold the values of the prompt's pass gives a fresh backend's logits exactly.
fn reused_backends_give_fresh_ones_logits(on: Device) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/qwen35-tiny-nvfp4");
    let host = Qwen35Model::load(&fixture, ActivationMode::Bf16).unwrap();
    on_device!(on, host, |model, backend| {
        let fresh = run(model, false, |_| backend());
        assert!(fresh.iter().flatten().all(|v| v.is_finite()));
        assert_eq!(run(model, true, |_| backend()), fresh, "{on}");
    });
}

edge_core::device_test!(reused_backends_give_fresh_ones_logits);
