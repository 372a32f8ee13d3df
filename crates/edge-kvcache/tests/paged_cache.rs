//! Random operation sequences on a small paged cache, checked against a plain model of
//! what each sequence holds: every row read back through the page table, every state
//! slot, reference counts (nothing leaks once everything ends), copy-on-write (no
//! sequence ever sees another's writes), eviction under a tiny budget, and errors that
//! change nothing.

use edge_kvcache::memory::{KvRun, decode_run};
use edge_kvcache::{
    AttentionLayerSpec, CacheConfig, CacheMemory, CacheSpec, HostMemory, KvCacheError, KvDType,
    PagedCache, RecurrentLayerSpec, SeqId, SequenceCache, SnapshotData,
};
use proptest::prelude::*;

const LAYERS: usize = 2;

/// The layers of the test cache, with `config`'s page size and format.
fn spec_for(config: &CacheConfig) -> CacheSpec {
    CacheSpec {
        block_size: config.block_size,
        kv_dtype: config.kv_dtype,
        attention: vec![
            AttentionLayerSpec {
                kv_heads: 2,
                head_dim: 2,
                k_scale: 1.0,
                v_scale: 1.0,
            };
            LAYERS
        ],
        recurrent: vec![RecurrentLayerSpec { conv: 1, state: 2 }],
    }
}

/// A configuration of `block_size`-token `dtype` pages whose budget `budget` gives
/// from the test layers' sizes.
fn sized(
    block_size: usize,
    kv_dtype: KvDType,
    budget: impl Fn(&CacheSpec) -> usize,
) -> CacheConfig {
    let mut config = CacheConfig {
        block_size,
        kv_dtype,
        budget_bytes: 0,
        prefix_cache: true,
        max_sequences: None,
    };
    config.budget_bytes = budget(&spec_for(&config));
    config
}

#[test]
fn a_spec_of_other_pages_than_the_configuration_is_an_error() {
    let config = sized(4, KvDType::F32, |_| 1 << 20);
    let other = sized(8, KvDType::Fp8E4M3, |_| 1 << 20);
    let err = PagedCache::<HostMemory>::new(spec_for(&other), config).unwrap_err();
    assert!(matches!(err, KvCacheError::Config(_)), "{err}");
}

/// What row `pos` holding `token` stores in layer `layer`: keys and values, 2 heads of 2.
fn row(layer: usize, token: u32, pos: usize) -> ([f32; 4], [f32; 4]) {
    let (t, p, l) = (token as f32, pos as f32, layer as f32);
    ([t, p, l, t + p], [-t, p * 2.0, l, 1.0])
}

/// The recurrent state a sequence of `tokens` carries: `[len]` conv, `[Σ, last]` state.
fn state_of(tokens: &[u32]) -> ([f32; 1], [f32; 2]) {
    let sum: u32 = tokens.iter().sum();
    (
        [tokens.len() as f32],
        [sum as f32, *tokens.last().unwrap_or(&0) as f32],
    )
}

struct Harness {
    cache: PagedCache<HostMemory>,
    /// Live sequences and the tokens they hold.
    live: Vec<(SeqId, Vec<u32>)>,
}

impl Harness {
    /// Appends `tokens` to a sequence the way a forward pass does; on error, nothing the
    /// sequence holds changes.
    fn append(&mut self, i: usize, tokens: &[u32]) -> Result<(), KvCacheError> {
        let (seq, held) = self.live[i].clone();
        let start = held.len();
        self.cache.prepare_rows(seq, start..start + tokens.len())?;
        let view = self.cache.sequence(seq)?;
        let (pages, slot) = (view.pages.to_vec(), view.slot);
        let block = self.cache.config().block_size;
        let mem = self.cache.memory_mut();
        for (j, &t) in tokens.iter().enumerate() {
            let pos = start + j;
            for layer in 0..LAYERS {
                let (k, v) = row(layer, t, pos);
                mem.kv_mut(layer)
                    .write_row(pages[pos / block], pos % block, &k, &v)?;
            }
        }
        let mut all = held.clone();
        all.extend_from_slice(tokens);
        let (c, s) = state_of(&all);
        let mut slots = mem.recurrent_mut(0).slots_mut(&[slot])?;
        slots[0].0.copy_from_slice(&c);
        slots[0].1.copy_from_slice(&s);
        self.cache.set_len(seq, all.len())?;
        self.live[i].1 = all;
        Ok(())
    }

    /// Every live sequence reads back exactly what it holds.
    fn check(&mut self) {
        let block = self.cache.config().block_size;
        for (seq, held) in self.live.clone() {
            let view = self.cache.sequence(seq).unwrap();
            assert_eq!(view.len, held.len());
            let (pages, slot) = (view.pages.to_vec(), view.slot);
            for (pos, &t) in held.iter().enumerate() {
                for layer in 0..LAYERS {
                    let kv = self.cache.memory().kv(layer);
                    let (want_k, want_v) = row(layer, t, pos);
                    for h in 0..2 {
                        let (page, r) = (pages[pos / block], pos % block);
                        let mut got = [0.0; 2];
                        decode_run(kv.keys(page, h, r..r + 1), 1.0, &mut got);
                        assert_eq!(got, want_k[h * 2..][..2], "{seq:?} pos {pos} layer {layer}");
                        let run: KvRun<'_> = kv.values(page, h, r..r + 1);
                        decode_run(run, 1.0, &mut got);
                        assert_eq!(got, want_v[h * 2..][..2]);
                    }
                }
            }
            let mem = self.cache.memory_mut();
            let parts = mem.recurrent_mut(0).slots_mut(&[slot]).unwrap();
            let (c, s) = state_of(&held);
            assert_eq!(
                (&parts[0].0[..], &parts[0].1[..]),
                (&c[..], &s[..]),
                "{seq:?}"
            );
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Start a sequence for prompt family `f` cut to `len` tokens (plus `tail` random
    /// tokens), restoring the longest snapshot, prefilling the rest and maybe
    /// snapshotting its end.
    Start {
        family: usize,
        len: usize,
        tail: Vec<u32>,
        snapshot: bool,
    },
    /// Append tokens to a live sequence.
    Extend { which: usize, tokens: Vec<u32> },
    /// Snapshot a live sequence as it is.
    Snapshot { which: usize },
    /// Append tokens to a live sequence, then roll it back to the state saved before.
    Rollback { which: usize, tokens: Vec<u32> },
    /// End a live sequence.
    End { which: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..24usize, prop::collection::vec(0..5u32, 0..6), any::<bool>())
            .prop_map(|(family, len, tail, snapshot)| Op::Start { family, len, tail, snapshot }),
        3 => (any::<usize>(), prop::collection::vec(0..5u32, 1..9))
            .prop_map(|(which, tokens)| Op::Extend { which, tokens }),
        2 => any::<usize>().prop_map(|which| Op::Snapshot { which }),
        1 => (any::<usize>(), prop::collection::vec(0..5u32, 1..9))
            .prop_map(|(which, tokens)| Op::Rollback { which, tokens }),
        2 => any::<usize>().prop_map(|which| Op::End { which }),
    ]
}

/// Three prompt families sharing prefixes of each other.
fn family(f: usize) -> Vec<u32> {
    let base: Vec<u32> = (0..30).map(|i| (i * 7 % 5) as u32).collect();
    let mut p = base.clone();
    match f {
        0 => p,
        1 => {
            p[11] = 4 - p[11];
            p
        }
        _ => {
            p.truncate(5);
            p.extend((0..25).map(|i| (i % 3) as u32));
            p
        }
    }
}

fn run(block_size: usize, budget_blocks: usize, ops: Vec<Op>) {
    let config = sized(block_size, KvDType::F32, |s| {
        budget_blocks * s.block_bytes() + 3 * s.state_bytes()
    });
    let mut h = Harness {
        cache: PagedCache::new(spec_for(&config), config).unwrap(),
        live: Vec::new(),
    };
    for op in ops {
        match op {
            Op::Start {
                family: f,
                len,
                tail,
                snapshot,
            } => {
                let mut prompt = family(f)[..len].to_vec();
                prompt.extend(tail);
                let Ok(seq) = h.cache.new_sequence(prompt.len()) else {
                    continue;
                };
                h.live.push((seq, Vec::new()));
                let i = h.live.len() - 1;
                if let Some(hit) = h.cache.lookup(&prompt, |c| c.len <= prompt.len()) {
                    let data = h.cache.restore(seq, hit).unwrap();
                    assert_eq!(data.tag, hit.len as u64);
                    h.live[i].1 = prompt[..hit.len].to_vec();
                }
                let done = h.live[i].1.len();
                if h.append(i, &prompt[done..]).is_ok() && snapshot {
                    let data = SnapshotData {
                        tag: prompt.len() as u64,
                        ..Default::default()
                    };
                    h.cache.insert_snapshot(seq, &prompt, data).unwrap();
                }
            }
            Op::Extend { which, tokens } if !h.live.is_empty() => {
                let i = which % h.live.len();
                let before = h.live[i].1.clone();
                if h.append(i, &tokens).is_err() {
                    assert_eq!(h.live[i].1, before);
                }
            }
            Op::Snapshot { which } if !h.live.is_empty() => {
                let (seq, held) = h.live[which % h.live.len()].clone();
                let data = SnapshotData {
                    tag: held.len() as u64,
                    ..Default::default()
                };
                h.cache.insert_snapshot(seq, &held, data).unwrap();
            }
            Op::Rollback { which, tokens } if !h.live.is_empty() => {
                let i = which % h.live.len();
                let (seq, held) = h.live[i].clone();
                let saved = h.cache.save_state(seq).unwrap();
                if h.append(i, &tokens).is_ok() {
                    h.check();
                    h.cache.truncate(seq, held.len()).unwrap();
                    h.cache.restore_state(seq, &saved).unwrap();
                    h.live[i].1 = held;
                }
            }
            Op::End { which } if !h.live.is_empty() => {
                let (seq, _) = h.live.swap_remove(which % h.live.len());
                h.cache.release(seq).unwrap();
            }
            _ => {}
        }
        h.check();
        h.cache.verify_refcounts().unwrap();
        let usage = h.cache.usage();
        assert!(usage.total() <= usage.budget, "{usage:?}");
    }
    for (seq, _) in std::mem::take(&mut h.live) {
        h.cache.release(seq).unwrap();
    }
    h.cache.clear_prefixes();
    assert_eq!(h.cache.pages_in_use(), 0, "pages leaked");
    assert_eq!(h.cache.index_nodes(), 0, "index nodes leaked");
    assert_eq!(h.cache.usage().snapshots, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sequences_read_back_what_they_wrote(
        block_size in 1..6usize,
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(block_size, 1000, ops);
    }

    #[test]
    fn a_tiny_budget_evicts_and_refuses_but_never_corrupts(
        block_size in 1..6usize,
        budget_blocks in 4..20usize,
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(block_size, budget_blocks, ops);
    }
}

#[test]
fn over_budget_errors_name_the_sizes() {
    let config = sized(4, KvDType::F32, |s| 3 * s.block_bytes() + s.state_bytes());
    let mut cache = PagedCache::<HostMemory>::new(spec_for(&config), config).unwrap();
    let err = cache.new_sequence(100).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, KvCacheError::OverBudget { .. }), "{text}");
    assert!(text.contains(&config.budget_bytes.to_string()), "{text}");
    // Nothing was taken.
    assert_eq!(cache.usage().total(), 0);
    let seq = cache.new_sequence(8).unwrap();
    cache.prepare_rows(seq, 0..8).unwrap();
    assert!(matches!(
        cache.prepare_rows(seq, 8..20),
        Err(edge_kvcache::KvCacheError::OverBudget { .. })
    ));
    assert!(matches!(
        cache.prepare_rows(seq, 30..31),
        Err(edge_kvcache::KvCacheError::Rows { .. })
    ));
}

/// A sequence past `max_sequences` is a typed error that takes nothing; releasing one
/// makes room, and the slot ids stay below the limit (a device pool holds that many).
#[test]
fn the_sequence_limit_is_enforced() {
    let mut config = sized(4, KvDType::F32, |_| 1 << 20);
    config.max_sequences = Some(2);
    let mut cache = PagedCache::<HostMemory>::new(spec_for(&config), config).unwrap();
    let a = cache.new_sequence(4).unwrap();
    let _b = cache.new_sequence(4).unwrap();
    let before = cache.usage();
    let err = cache.new_sequence(4).unwrap_err();
    assert!(
        matches!(err, KvCacheError::TooManySequences { max: 2 }),
        "{err}"
    );
    assert_eq!(cache.usage(), before, "nothing taken");
    cache.release(a).unwrap();
    let c = cache.new_sequence(4).unwrap();
    assert!(cache.sequence(c).is_ok());
    cache.verify_refcounts().unwrap();
}

#[test]
fn fp8_and_bf16_pages_take_one_and_two_bytes() {
    for (dtype, bytes) in [(KvDType::F32, 4), (KvDType::Bf16, 2), (KvDType::Fp8E4M3, 1)] {
        let config = sized(8, dtype, |_| 1 << 20);
        let mut cache = PagedCache::<HostMemory>::new(spec_for(&config), config).unwrap();
        let seq = cache.new_sequence(16).unwrap();
        cache.prepare_rows(seq, 0..16).unwrap();
        // 2 pages × 2 layers × (keys + values) × 2 heads × 8 rows × 2 wide.
        assert_eq!(cache.usage().pages_in_use, 2 * 2 * 2 * 2 * 8 * 2 * bytes);
    }
}

#[test]
fn a_reused_state_slot_starts_zeroed_and_free_slots_count_in_the_budget() {
    let config = sized(4, KvDType::F32, |s| {
        8 * s.block_bytes() + 2 * s.state_bytes()
    });
    let s = spec_for(&config);
    let mut cache = PagedCache::<HostMemory>::new(s.clone(), config).unwrap();
    let a = cache.new_sequence(4).unwrap();
    let slot = cache.sequence(a).unwrap().slot;
    cache
        .memory_mut()
        .recurrent_mut(0)
        .slots_mut(&[slot])
        .unwrap()[0]
        .1
        .fill(5.0);
    cache.release(a).unwrap();
    assert_eq!(cache.usage().slots_free, s.state_bytes());
    let b = cache.new_sequence(4).unwrap();
    let slot = cache.sequence(b).unwrap().slot;
    assert!(
        cache
            .memory_mut()
            .recurrent_mut(0)
            .slots_mut(&[slot])
            .unwrap()[0]
            .1
            .iter()
            .all(|&x| x == 0.0)
    );
    cache.release(b).unwrap();
    // Pages need the room a free slot keeps: it is given up for them.
    let c = cache.new_sequence(28).unwrap();
    cache.prepare_rows(c, 0..32).unwrap();
    assert!(cache.usage().total() <= cache.usage().budget);
}

/// A short reservation grows while the budget has room beside the others' reservations
/// and is refused (changing nothing) once it does not; releasing a sequence makes room.
/// `can_start` and `max_rows` agree with what `new_sequence` does.
#[test]
fn reservations_grow_until_the_budget_is_pinned() {
    // Room for 8 blocks and 3 state slots (one spare, so `can_start` below turns on
    // blocks alone).
    let config = sized(4, KvDType::F32, |s| {
        8 * s.block_bytes() + 3 * s.state_bytes()
    });
    let mut cache = PagedCache::<HostMemory>::new(spec_for(&config), config).unwrap();
    // One sequence alone: 8 blocks less its copy-on-write page, of 4 rows each.
    assert_eq!(cache.max_rows(), 7 * 4);
    assert!(cache.can_start(28) && !cache.can_start(29));
    let a = cache.new_sequence(4).unwrap(); // 2 blocks pinned
    let b = cache.new_sequence(4).unwrap(); // 4
    cache.reserve(a, 12).unwrap(); // a: 4 blocks, 6 in all
    cache.reserve(a, 5).unwrap(); // never shrinks
    assert!(cache.can_start(4), "2 blocks and a slot are free");
    assert!(!cache.can_start(5), "3 blocks are not");
    let before = cache.usage();
    let err = cache.reserve(b, 16).unwrap_err(); // 9 blocks
    assert!(matches!(err, KvCacheError::OverBudget { .. }), "{err}");
    assert_eq!(cache.usage(), before, "nothing changed");
    cache.reserve(b, 8).unwrap(); // b: 3 blocks, 7 in all
    // Writes within a reservation succeed.
    cache.prepare_rows(a, 0..12).unwrap();
    cache.prepare_rows(b, 0..8).unwrap();
    cache.release(a).unwrap();
    cache.reserve(b, 20).unwrap();
    cache.prepare_rows(b, 8..20).unwrap();
    assert!(matches!(
        cache.reserve(SeqId::new(7), 4),
        Err(KvCacheError::UnknownSequence(_))
    ));
    cache.verify_refcounts().unwrap();
}
