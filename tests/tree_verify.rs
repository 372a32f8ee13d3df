//! Token-tree verification: one forward over a tree gives every row the logits of
//! decoding its path, leaves the sequence as it was, and a commit of a path leaves the
//! cache as decoding the path would (keys, values, conv windows, recurrent state),
//! without re-running it.

#[macro_use]
mod support;

use edge_core::Device;
use edge_kvcache::{CacheConfig, KvDType, PagedCache, SeqId, SequenceCache};
use edge_model::{
    AcceptedPath, ActivationMode, Backend, Cpu, LogitRows, ModelError, Qwen35Model, StepBatch,
};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn cache<B: Backend>(
    model: &Qwen35Model<B>,
    backend: &mut B,
    block_size: usize,
    kv_dtype: KvDType,
) -> PagedCache<B::Memory> {
    let config = CacheConfig {
        block_size,
        kv_dtype,
        max_sequences: Some(2),
        ..CacheConfig::default()
    };
    let memory = backend
        .cache_memory(&model.cache_spec(&config), &config)
        .unwrap();
    PagedCache::with_memory(memory, config).unwrap()
}

fn prompt() -> Vec<u32> {
    (0..30u32).map(|i| (i * 41 + 7) % 250).collect()
}

/// A tree with branching at several depths: roots' children, a deep chain, leaves.
const PARENTS: [Option<u32>; 10] = [
    None,
    Some(0),
    Some(0),
    Some(1),
    Some(1),
    Some(2),
    Some(3),
    Some(6),
    Some(6),
    Some(4),
];
const TOKENS: [u32; 10] = [17, 200, 3, 45, 45, 99, 120, 8, 230, 61];

fn path(i: usize) -> Vec<usize> {
    let mut p = vec![i];
    while let Some(parent) = PARENTS[*p.last().unwrap()] {
        p.push(parent as usize);
    }
    p.reverse();
    p
}

fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    (a.iter().zip(b))
        .map(|(x, y)| (x - y).abs() / (1.0 + x.abs()))
        .fold(0.0, f32::max)
}

/// A cache holding the prompt, and its sequence.
fn prefilled<B: Backend>(
    model: &Qwen35Model<B>,
    cpu: &mut B,
    block: usize,
    dtype: KvDType,
) -> (PagedCache<B::Memory>, SeqId) {
    let mut c = cache(model, cpu, block, dtype);
    let seq = c.new_sequence(0).unwrap();
    let b = StepBatch::single(seq, &prompt(), 0, LogitRows::None);
    model.forward(cpu, &b, &mut c).unwrap();
    (c, seq)
}

/// Logits after decoding `tokens` one at a time from the prompt, on `cpu`.
fn decoded<B: Backend>(
    model: &Qwen35Model<B>,
    mut cpu: B,
    block: usize,
    dtype: KvDType,
    tokens: &[u32],
) -> Vec<Vec<f32>> {
    let (mut c, seq) = prefilled(model, &mut cpu, block, dtype);
    (tokens.iter().enumerate())
        .map(|(i, &t)| {
            let b = StepBatch::single(seq, &[t], 30 + i, LogitRows::Last);
            model.forward(&mut cpu, &b, &mut c).unwrap().logits
        })
        .collect()
}

#[test]
fn tree_rows_get_their_paths_logits_and_commit_equals_decoding() {
    for (dir, mode) in [
        ("qwen35-tiny-f32", ActivationMode::None),
        ("qwen35-tiny-nvfp4", ActivationMode::Int8),
    ] {
        let model = Qwen35Model::load(&fixture(dir), mode).unwrap();
        for (block, dtype) in [(32, KvDType::F32), (3, KvDType::F32), (4, KvDType::Fp8E4M3)] {
            let mut before = None;
            tree_then_commit(&model, Cpu::new, block, dtype, |c, seq| match &before {
                None => before = Some(c.save_state(seq).unwrap()),
                Some(b) => assert_eq!(&c.save_state(seq).unwrap(), b, "the state is untouched"),
            });
        }
    }
}

/// On every device (the NVFP4 fixture, bf16 activations): f32 pages, and FP8 pages
/// through the tile attention.
fn tree_verify_and_commit(on: Device) {
    let host = Qwen35Model::load(&fixture("qwen35-tiny-nvfp4"), ActivationMode::Bf16).unwrap();
    on_device!(on, host, |model, backend| {
        for (block, dtype) in [(32, KvDType::F32), (4, KvDType::Fp8E4M3)] {
            tree_then_commit(model, backend, block, dtype, |_, _| {});
        }
    });
}

edge_core::device_test!(tree_verify_and_commit);

/// A tree over the prompt gives each row its path's decoded logits and leaves the
/// sequence's length (and, `observe`d before and after the pass, its state); committing
/// the path 0 → 1 → 3 → 6 → 8 then decodes on as if it had been decoded. `backend`
/// makes each backend (the reference decodes get fresh ones).
fn tree_then_commit<B: Backend>(
    model: &Qwen35Model<B>,
    backend: impl Fn() -> B,
    block: usize,
    dtype: KvDType,
    mut observe: impl FnMut(&PagedCache<B::Memory>, SeqId),
) {
    let vocab = model.config().vocab_size;
    let mut cpu = backend();
    let (mut c, seq) = prefilled(model, &mut cpu, block, dtype);
    observe(&c, seq);
    let mut batch = StepBatch::new();
    batch.push_tree(seq, &TOKENS, &PARENTS, 30, LogitRows::All);
    assert_eq!(&batch.positions()[..4], &[30, 31, 31, 32]);
    let out = model.forward(&mut cpu, &batch, &mut c).unwrap();
    assert_eq!(c.sequence(seq).unwrap().len, 30, "a tree is provisional");
    observe(&c, seq);
    // f32 rounding differences (tree vs token-by-token summation order):
    // 1e-4 relative; FP8 pages round keys and values to 3 mantissa bits and
    // can turn such a difference into one code step, so they get 1e-2.
    let tol = if dtype == KvDType::F32 { 1e-4 } else { 1e-2 };
    for i in 0..TOKENS.len() {
        let toks: Vec<u32> = path(i).iter().map(|&r| TOKENS[r]).collect();
        let want = decoded(model, backend(), block, dtype, &toks);
        let d = rel_diff(&out.logits[i * vocab..][..vocab], want.last().unwrap());
        assert!(d < tol, "{block} {dtype:?}: row {i} differs by {d}");
    }
    // Commit the path 0 → 1 → 3 → 6 → 8, then decode on: as if decoded.
    let accepted = path(8);
    let tree = out.tree.expect("a tree pass keeps its inputs");
    let paths = [AcceptedPath {
        seq,
        rows: accepted.clone(),
    }];
    model.commit_tree(&mut cpu, tree, &paths, &mut c).unwrap();
    assert_eq!(c.sequence(seq).unwrap().len, 30 + accepted.len());
    let mut toks: Vec<u32> = accepted.iter().map(|&r| TOKENS[r]).collect();
    let after = [5u32, 77, 150];
    toks.extend(after);
    let want = decoded(model, backend(), block, dtype, &toks);
    for (i, &t) in after.iter().enumerate() {
        let pos = 30 + accepted.len() + i;
        let b = StepBatch::single(seq, &[t], pos, LogitRows::Last);
        let got = model.forward(&mut cpu, &b, &mut c).unwrap().logits;
        let d = rel_diff(&got, &want[accepted.len() + i]);
        // (Running the path as a chain prefill instead of decoding it shows the
        // same FP8 deviation, 7e-3.)
        assert!(d < tol, "{block} {dtype:?}: after commit, step {i}: {d}");
    }
}

#[test]
fn a_tree_and_a_decode_step_share_a_batch() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let vocab = model.config().vocab_size;
    let mut cpu = Cpu::new();
    let (mut c, a) = prefilled(&model, &mut cpu, 8, KvDType::F32);
    let b = c.new_sequence(0).unwrap();
    let other: Vec<u32> = (0..12).collect();
    let pre = StepBatch::single(b, &other, 0, LogitRows::None);
    model.forward(&mut cpu, &pre, &mut c).unwrap();
    let mut batch = StepBatch::single(b, &[9], 12, LogitRows::Last);
    batch.push_tree(a, &TOKENS, &PARENTS, 30, LogitRows::All);
    let out = model.forward(&mut cpu, &batch, &mut c).unwrap();
    assert_eq!(c.sequence(b).unwrap().len, 13, "the chain span commits");
    assert_eq!(c.sequence(a).unwrap().len, 30, "the tree span does not");
    // The decode row against the sequence alone.
    let mut alone = cache(&model, &mut cpu, 8, KvDType::F32);
    let s = alone.new_sequence(0).unwrap();
    let mut ids = other.clone();
    ids.push(9);
    let full = StepBatch::single(s, &ids, 0, LogitRows::Last);
    let want = model.forward(&mut cpu, &full, &mut alone).unwrap().logits;
    assert!(rel_diff(&out.logits[..vocab], &want) < 1e-4);
    // Tree row 5 (path 0 → 2 → 5) against decoding its path.
    let toks: Vec<u32> = path(5).iter().map(|&r| TOKENS[r]).collect();
    let want = decoded(&model, Cpu::new(), 8, KvDType::F32, &toks);
    let got = &out.logits[(1 + 5) * vocab..][..vocab];
    assert!(rel_diff(got, want.last().unwrap()) < 1e-4);
    out.tree.unwrap().free(&mut cpu);
}

#[test]
fn malformed_trees_and_paths_are_errors_that_change_nothing() {
    let model = Qwen35Model::load(&fixture("qwen35-tiny-f32"), ActivationMode::None).unwrap();
    let mut cpu = Cpu::new();
    let (mut c, seq) = prefilled(&model, &mut cpu, 8, KvDType::F32);
    let before = c.save_state(seq).unwrap();
    let bad_trees: [(&[Option<u32>], usize); 3] = [
        (&[None, Some(2), Some(0)], 30), // a parent after its child
        (&[None, Some(0)], 29),          // not at the committed end
        (&[None, Some(1)], 30),          // its own parent
    ];
    for (parents, base) in bad_trees {
        let mut batch = StepBatch::new();
        batch.push_tree(seq, &TOKENS[..parents.len()], parents, base, LogitRows::All);
        assert!(
            model.forward(&mut cpu, &batch, &mut c).is_err(),
            "{parents:?}"
        );
    }
    let mut too_big = StepBatch::new();
    let parents: Vec<Option<u32>> = (0..65u32).map(|i| i.checked_sub(1)).collect();
    too_big.push_tree(seq, &vec![1; 65], &parents, 30, LogitRows::None);
    assert!(matches!(
        model.forward(&mut cpu, &too_big, &mut c),
        Err(edge_model::ModelError::MalformedBatch { span: 0, .. })
    ));

    let mut batch = StepBatch::new();
    batch.push_tree(seq, &TOKENS, &PARENTS, 30, LogitRows::All);
    for rows in [vec![], vec![1], vec![0, 3], vec![0, 1, 3, 7], vec![0, 99]] {
        let out = model.forward(&mut cpu, &batch, &mut c).unwrap();
        let paths = [AcceptedPath {
            seq,
            rows: rows.clone(),
        }];
        let err = model.commit_tree(&mut cpu, out.tree.unwrap(), &paths, &mut c);
        assert!(
            matches!(
                err,
                Err(ModelError::InvalidPlan {
                    op: "commit_tree",
                    ..
                })
            ),
            "{rows:?}"
        );
        assert_eq!(c.sequence(seq).unwrap().len, 30);
        assert_eq!(c.save_state(seq).unwrap(), before, "{rows:?}");
    }
    // Committing the root alone is one decode step.
    let out = model.forward(&mut cpu, &batch, &mut c).unwrap();
    let paths = [AcceptedPath { seq, rows: vec![0] }];
    model
        .commit_tree(&mut cpu, out.tree.unwrap(), &paths, &mut c)
        .unwrap();
    assert_eq!(c.sequence(seq).unwrap().len, 31);
}
