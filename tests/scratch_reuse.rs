//! The layers' work buffers come from a reusable [`Scratch`] pool without being
//! cleared: every layer must write each value before it reads it. A poisoned pool
//! (every buffer NaN when handed out) proves it: any value read before it was written
//! would turn the logits NaN or change them.

use edge_kvcache::{CacheConfig, HostMemory, PagedCache};
use edge_model::synthetic::{SyntheticDType, tiny_config, write_random_checkpoint};
use edge_model::{ActivationMode, Cpu, LogitRows, Qwen35Model, Scratch, StepBatch};

fn model(mode: ActivationMode) -> Qwen35Model {
    // Three GDN layers and one attention layer; a 70-token prompt spans two GDN chunks.
    let config = tiny_config(128);
    let dir = std::env::temp_dir().join(format!("edge-model-scratch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_random_checkpoint(&dir, &config, SyntheticDType::F32, 11).unwrap();
    let m = Qwen35Model::load(&dir, mode).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    m
}

/// Logits of a prompt and of three decode steps, each call on the backend
/// `backend(step)` returns (its pool of work buffers).
fn run(m: &Qwen35Model, mut backend: impl FnMut(usize) -> Cpu) -> Vec<Vec<f32>> {
    let prompt: Vec<u32> = (0..70).map(|i| (i * 7 + 3) % 64).collect();
    let config = CacheConfig {
        block_size: 16,
        ..CacheConfig::default()
    };
    let mut cache = PagedCache::<HostMemory>::new(m.cache_spec(&config), config).unwrap();
    let seq = cache.new_sequence(100).unwrap();
    let mut kept = backend(0);
    let batch = StepBatch::single(seq, &prompt, 0, LogitRows::All);
    let mut out = vec![m.forward(&mut kept, &batch, &mut cache).unwrap().logits];
    for (step, tok) in [5u32, 9, 60].into_iter().enumerate() {
        let mut fresh = backend(step + 1);
        // Odd steps keep the backend of the calls before (stale values in its pool).
        let be = if step % 2 == 1 { &mut kept } else { &mut fresh };
        let batch = StepBatch::single(seq, &[tok], prompt.len() + step, LogitRows::Last);
        out.push(m.forward(be, &batch, &mut cache).unwrap().logits);
    }
    out
}

#[test]
fn poisoned_and_reused_scratch_give_the_plain_forward_exactly() {
    for mode in [ActivationMode::None, ActivationMode::Bf16] {
        let m = model(mode);
        let plain = run(&m, |_| Cpu::new());
        assert!(plain.iter().flatten().all(|v| v.is_finite()));
        assert_eq!(
            run(&m, |_| Cpu::with_scratch(Scratch::poisoned())),
            plain,
            "{mode:?}"
        );
        let mut shared = Some(Cpu::new());
        let reused = run(&m, |_| shared.take().unwrap_or_default());
        assert_eq!(reused, plain, "{mode:?}");
    }
}
