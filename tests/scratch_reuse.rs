//! The layers' work buffers come from a reusable [`Scratch`] pool without being
//! cleared: every layer must write each value before it reads it. A poisoned pool
//! (every buffer NaN when handed out) proves it: any value read before it was written
//! would turn the logits NaN or change them.

use edge_model::synthetic::{SyntheticDType, tiny_config, write_random_checkpoint};
use edge_model::{ActivationMode, Logits, Qwen35Model, Scratch};

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

/// Logits of a prompt and of three decode steps, each call through `scratch(step)`.
fn run(m: &Qwen35Model, mut scratch: impl FnMut(usize) -> Scratch) -> Vec<Vec<f32>> {
    let prompt: Vec<u32> = (0..70).map(|i| (i * 7 + 3) % 64).collect();
    let mut state = m.new_state();
    let mut pool = scratch(0);
    let mut out = vec![
        m.forward_with_scratch(&prompt, &mut state, Logits::All, &mut pool)
            .unwrap()
            .logits,
    ];
    for (step, tok) in [5u32, 9, 60].into_iter().enumerate() {
        let mut fresh = scratch(step + 1);
        // Odd steps keep the pool of the calls before (stale values from the prompt).
        let pool = if step % 2 == 1 { &mut pool } else { &mut fresh };
        let logits = m.forward_with_scratch(&[tok], &mut state, Logits::Last, pool);
        out.push(logits.unwrap().logits);
    }
    out
}

#[test]
fn poisoned_and_reused_scratch_give_the_plain_forward_exactly() {
    for mode in [ActivationMode::None, ActivationMode::Bf16] {
        let m = model(mode);
        let plain = {
            let prompt: Vec<u32> = (0..70).map(|i| (i * 7 + 3) % 64).collect();
            let mut state = m.new_state();
            let mut out = vec![m.forward(&prompt, &mut state, Logits::All).unwrap().logits];
            for tok in [5u32, 9, 60] {
                out.push(m.forward(&[tok], &mut state, Logits::Last).unwrap().logits);
            }
            out
        };
        assert!(plain.iter().flatten().all(|v| v.is_finite()));
        assert_eq!(run(&m, |_| Scratch::poisoned()), plain, "{mode:?}");
        assert_eq!(run(&m, |_| Scratch::new()), plain, "{mode:?}");
    }
}
