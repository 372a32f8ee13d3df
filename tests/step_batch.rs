//! The step-batch forward: several sequences in one pass (prompts of different
//! lengths, prefill and decode rows mixed) give each sequence the logits it gets alone;
//! the page size does not change a bit; a rolled-back sequence recomputes exactly.

#[macro_use]
mod support;

use edge_core::Device;
use edge_kvcache::{CacheConfig, HostMemory, KvDType, PagedCache, SeqId};
use edge_model::{ActivationMode, Backend, Cpu, LogitRows, Qwen35Model, StepBatch};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn cache(model: &Qwen35Model<Cpu>, block_size: usize) -> PagedCache<HostMemory> {
    let config = CacheConfig {
        block_size,
        kv_dtype: KvDType::F32,
        ..CacheConfig::default()
    };
    PagedCache::new(model.cache_spec(&config), config).unwrap()
}

fn tokens(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 31 + seed * 17 + 5) % 250)
        .collect()
}

/// Three sequences' pieces, step by step: each step runs the listed (sequence,
/// tokens) spans, in one batch or one at a time.
fn schedule() -> Vec<Vec<(usize, Vec<u32>)>> {
    vec![
        vec![(0, tokens(1, 20)), (1, tokens(2, 5))],
        vec![(0, tokens(3, 17)), (1, tokens(4, 1)), (2, tokens(5, 9))],
        vec![(0, tokens(6, 1)), (1, tokens(7, 1)), (2, tokens(8, 1))],
        vec![(2, tokens(9, 70)), (1, tokens(10, 1))],
    ]
}

/// Every span's logits (all rows), per step, per sequence, on `backend`.
fn run<B: Backend>(model: &Qwen35Model<B>, mut backend: B, batched: bool) -> Vec<Vec<Vec<f32>>> {
    let config = CacheConfig {
        block_size: 8,
        kv_dtype: KvDType::F32,
        max_sequences: Some(3),
        ..CacheConfig::default()
    };
    let memory = backend
        .cache_memory(&model.cache_spec(&config), &config)
        .unwrap();
    let mut c = PagedCache::with_memory(memory, config).unwrap();
    let seqs: Vec<SeqId> = (0..3).map(|_| c.new_sequence(0).unwrap()).collect();
    let mut len = [0usize; 3];
    let cpu = &mut backend;
    let mut out = vec![vec![]; 3];
    let vocab = model.config().vocab_size;
    for step in schedule() {
        let groups: Vec<Vec<(usize, Vec<u32>)>> = if batched {
            vec![step]
        } else {
            step.into_iter().map(|s| vec![s]).collect()
        };
        for group in groups {
            let mut batch = StepBatch::new();
            for (s, t) in &group {
                batch.push(seqs[*s], t, len[*s], LogitRows::All);
            }
            let logits = model.forward(cpu, &batch, &mut c).unwrap().logits;
            let mut at = 0;
            for (s, t) in &group {
                out[*s].push(logits[at * vocab..(at + t.len()) * vocab].to_vec());
                at += t.len();
                len[*s] += t.len();
            }
        }
    }
    out
}

#[test]
fn a_batch_gives_each_sequence_its_logits_alone() {
    for (dir, mode) in [
        ("qwen35-tiny-f32", ActivationMode::None),
        ("qwen35-tiny-nvfp4", ActivationMode::Int8),
    ] {
        let model = Qwen35Model::load(&fixture(dir), mode).unwrap();
        let worst = batched_against_alone(
            &run(&model, Cpu::new(), false),
            &run(&model, Cpu::new(), true),
        );
        println!("{dir} {mode:?}: batched vs alone, max relative |Δ| {worst:.2e}");
        // Only the linears' summation order (GEMM tiles for the batch, one-row kernels
        // alone) differs.
        assert!(worst < 1e-4, "{dir}: {worst}");
    }
}

/// The largest relative difference between the two runs' logits.
fn batched_against_alone(alone: &[Vec<Vec<f32>>], together: &[Vec<Vec<f32>>]) -> f32 {
    let mut worst: f32 = 0.0;
    for (a, b) in alone.iter().flatten().zip(together.iter().flatten()) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            worst = worst.max((x - y).abs() / (1.0 + x.abs()));
        }
    }
    worst
}

/// The same on every device, with bf16 activations (the CUDA backend's mode) on the
/// NVFP4 fixture.
fn batches_give_each_sequence_its_logits_alone(on: Device) {
    let host = Qwen35Model::load(&fixture("qwen35-tiny-nvfp4"), ActivationMode::Bf16).unwrap();
    let worst = on_device!(on, host, |model, backend| batched_against_alone(
        &run(model, backend(), false),
        &run(model, backend(), true)
    ));
    println!("{on}: batched vs alone, max relative |Δ| {worst:.2e}");
    assert!(worst < 1e-4, "{on}: {worst}");
}

edge_core::device_test!(batches_give_each_sequence_its_logits_alone);

/// Greedy rows return the argmax, and top rows the most likely tokens, of the rows the
/// same pass would return as logits, in batch order beside spans that return logits.
#[test]
fn greedy_and_top_rows_reduce_their_logits() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let vocab = model.config().vocab_size;
    let spans = [
        tokens(1, 12),
        tokens(2, 1),
        tokens(3, 7),
        tokens(4, 1),
        tokens(5, 3),
    ];
    let mut outs = Vec::new();
    for greedy in [false, true] {
        let mut c = cache(&model, 8);
        let mut batch = StepBatch::new();
        for (i, t) in spans.iter().enumerate() {
            let seq = c.new_sequence(0).unwrap();
            // In the second run spans 1 and 3 ask for their greedy token and span 4 for
            // each row's top 4; span 2 always for its logits.
            let rows = match (greedy, i) {
                (true, 1 | 3) => LogitRows::Greedy,
                (true, 4) => LogitRows::TopAll(4),
                (false, 4) => LogitRows::All,
                (_, 0) => LogitRows::None,
                _ => LogitRows::Last,
            };
            batch.push(seq, t, 0, rows);
        }
        assert_eq!(batch.greedy_rows().len(), if greedy { 2 } else { 0 });
        outs.push(model.forward(&mut Cpu::new(), &batch, &mut c).unwrap());
    }
    let (full, reduced) = (&outs[0], &outs[1]);
    assert_eq!(full.logits.len(), 6 * vocab);
    assert!(full.greedy.is_empty() && full.top.is_empty());
    let row = |r: usize| &full.logits[r * vocab..][..vocab];
    assert_eq!(
        reduced.greedy,
        vec![edge_model::argmax(row(0)), edge_model::argmax(row(2))]
    );
    // The vocabulary projection of 1 row and of 6 may round differently (its kernel
    // tiles by rows), so values compare to 1e-5.
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
    assert!(
        reduced
            .logits
            .iter()
            .zip(row(1))
            .all(|(&a, &b)| close(a, b))
    );
    assert_eq!(reduced.top.len(), 3);
    for (got, r) in reduced.top.iter().zip(3..6) {
        let want = edge_model::TopLogits::of(row(r), 4);
        assert_eq!(got.ids, want.ids, "row {r}");
        assert!(close(got.log_sum_exp, want.log_sum_exp), "row {r}");
        for (g, w) in got.log_probs().zip(want.log_probs()) {
            assert!(close(g.1, w.1), "row {r}: {got:?} against {want:?}");
        }
    }
}

#[test]
fn page_size_changes_no_bit_and_rollback_is_exact() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let prompt = tokens(11, 45);
    let vocab = model.config().vocab_size;
    let run = |block: usize| {
        let mut c = cache(&model, block);
        let seq = c.new_sequence(0).unwrap();
        let mut cpu = Cpu::new();
        let b = StepBatch::single(seq, &prompt, 0, LogitRows::All);
        let mut all = model.forward(&mut cpu, &b, &mut c).unwrap().logits;
        let after_prompt = c.save_state(seq).unwrap();
        let decode = |c: &mut PagedCache<HostMemory>, cpu: &mut Cpu| {
            let mut v = Vec::new();
            for (i, t) in [3u32, 99, 4].into_iter().enumerate() {
                let b = StepBatch::single(seq, &[t], 45 + i, LogitRows::Last);
                v.extend(model.forward(cpu, &b, c).unwrap().logits);
            }
            v
        };
        let first = decode(&mut c, &mut cpu);
        // Roll the three decode steps back and run them again: the same bits.
        c.truncate(seq, 45).unwrap();
        c.restore_state(seq, &after_prompt).unwrap();
        assert_eq!(
            decode(&mut c, &mut cpu),
            first,
            "rollback with {block}-token pages"
        );
        all.extend(first);
        assert_eq!(all.len(), 48 * vocab);
        all
    };
    let reference = run(32);
    for block in [1, 3, 16] {
        assert_eq!(run(block), reference, "{block}-token pages");
    }
}

/// `ActivationMode::Fastest` (the CLI's `--act-quant auto`) runs W4A8 on an NVFP4
/// checkpoint and bf16 activations on a float one: the same logits as those modes.
#[test]
fn auto_activations_pick_w4a8_for_nvfp4_and_bf16_otherwise() {
    let logits = |dir: &str, mode: ActivationMode| {
        let model = Qwen35Model::load(&fixture(dir), mode).unwrap();
        let mut c = cache(&model, 8);
        let seq = c.new_sequence(0).unwrap();
        let b = StepBatch::single(seq, &tokens(3, 12), 0, LogitRows::All);
        model.forward(&mut Cpu::new(), &b, &mut c).unwrap().logits
    };
    assert_eq!(
        "auto".parse::<ActivationMode>().unwrap(),
        ActivationMode::Fastest
    );
    for (dir, same, other) in [
        (
            "qwen35-tiny-nvfp4",
            ActivationMode::Int8,
            ActivationMode::None,
        ),
        (
            "qwen35-tiny-f32",
            ActivationMode::Bf16,
            ActivationMode::None,
        ),
    ] {
        let auto = logits(dir, ActivationMode::Fastest);
        assert_eq!(auto, logits(dir, same), "{dir}");
        assert_ne!(auto, logits(dir, other), "{dir}: the modes differ at all");
    }
}
