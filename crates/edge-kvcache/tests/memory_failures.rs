//! A device memory can fail an allocation or a copy. Injected at every fallible memory
//! call of a workload in turn, each failure must come back as `KvCacheError::Memory`,
//! leak nothing (reference counts recounted), and leave sequences, snapshots, state
//! slots and lengths as they were (a failed `prepare_rows` keeps the pages it added
//! before the failure); retrying the step must then succeed and end where a run
//! without failures ends.

use edge_kvcache::memory::HostState;
use edge_kvcache::{
    AttentionLayerSpec, BlockId, CacheConfig, CacheMemory, CacheSpec, HostMemory, KvCacheError,
    KvDType, PagedCache, RecurrentLayerSpec, SeqId, SequenceCache, SlotId, SnapshotData,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Host memory whose fallible call number `fail_at` (counting from 1) fails.
#[derive(Debug)]
struct FlakyMemory {
    host: HostMemory,
    countdown: Arc<AtomicI64>,
}

impl FlakyMemory {
    fn call(&self, what: &str) -> Result<(), KvCacheError> {
        if self.countdown.fetch_sub(1, Ordering::SeqCst) == 1 {
            return Err(KvCacheError::Memory(format!("injected failure of {what}")));
        }
        Ok(())
    }
}

impl CacheMemory for FlakyMemory {
    type Kv = <HostMemory as CacheMemory>::Kv;
    type Recurrent = <HostMemory as CacheMemory>::Recurrent;
    type State = HostState;

    fn spec(&self) -> &CacheSpec {
        self.host.spec()
    }
    fn materialize_page(&mut self, page: BlockId) -> Result<(), KvCacheError> {
        self.call("materialize_page")?;
        self.host.materialize_page(page)
    }
    fn drop_page(&mut self, page: BlockId) {
        self.host.drop_page(page)
    }
    fn materialize_slot(&mut self, slot: SlotId) -> Result<(), KvCacheError> {
        self.call("materialize_slot")?;
        self.host.materialize_slot(slot)
    }
    fn drop_slot(&mut self, slot: SlotId) {
        self.host.drop_slot(slot)
    }
    fn copy_rows(&mut self, from: BlockId, to: BlockId, rows: usize) -> Result<(), KvCacheError> {
        self.call("copy_rows")?;
        self.host.copy_rows(from, to, rows)
    }
    fn clear_state(&mut self, slot: SlotId) -> Result<(), KvCacheError> {
        self.call("clear_state")?;
        self.host.clear_state(slot)
    }
    fn save_state(&self, slot: SlotId) -> Result<HostState, KvCacheError> {
        self.call("save_state")?;
        self.host.save_state(slot)
    }
    fn load_state(&mut self, slot: SlotId, state: &HostState) -> Result<(), KvCacheError> {
        self.call("load_state")?;
        self.host.load_state(slot, state)
    }
    fn kv(&self, layer: usize) -> &Self::Kv {
        self.host.kv(layer)
    }
    fn kv_mut(&mut self, layer: usize) -> &mut Self::Kv {
        self.host.kv_mut(layer)
    }
    fn recurrent_mut(&mut self, layer: usize) -> &mut Self::Recurrent {
        self.host.recurrent_mut(layer)
    }
}

fn cache(countdown: &Arc<AtomicI64>) -> PagedCache<FlakyMemory> {
    let config = CacheConfig {
        block_size: 4,
        kv_dtype: KvDType::F32,
        budget_bytes: 1 << 20,
        prefix_cache: true,
        max_sequences: None,
    };
    let spec = CacheSpec {
        block_size: 4,
        kv_dtype: KvDType::F32,
        attention: vec![AttentionLayerSpec {
            kv_heads: 1,
            head_dim: 2,
            k_scale: 1.0,
            v_scale: 1.0,
        }],
        recurrent: vec![RecurrentLayerSpec { conv: 1, state: 2 }],
    };
    let memory = FlakyMemory {
        host: HostMemory::new(&spec).unwrap(),
        countdown: countdown.clone(),
    };
    PagedCache::with_memory(memory, config).unwrap()
}

/// The workload's named sequences.
#[derive(Default)]
struct Seqs {
    a: Option<SeqId>,
    b: Option<SeqId>,
    c: Option<SeqId>,
    saved: Option<edge_kvcache::SavedState<HostState>>,
}

type Step = fn(&mut PagedCache<FlakyMemory>, &mut Seqs) -> Result<(), KvCacheError>;

const TOKENS: [u32; 6] = [5, 6, 7, 8, 9, 10];

/// Sequences, writes past a snapshot (copy-on-write of its shared page), state saves
/// and restores, a prefix hit, and a reused state slot.
const STEPS: [(&str, Step); 11] = [
    ("new_sequence a", |c, s| {
        s.a = Some(c.new_sequence(8)?);
        Ok(())
    }),
    ("rows 0..6 of a", |c, s| {
        c.prepare_rows(s.a.unwrap(), 0..6)?;
        c.set_len(s.a.unwrap(), 6)
    }),
    ("snapshot of a", |c, s| {
        assert!(c.insert_snapshot(s.a.unwrap(), &TOKENS, SnapshotData::default())?);
        Ok(())
    }),
    ("rows 6..10 of a", |c, s| {
        c.prepare_rows(s.a.unwrap(), 6..10)?;
        c.set_len(s.a.unwrap(), 10)
    }),
    ("save_state a", |c, s| {
        s.saved = Some(c.save_state(s.a.unwrap())?);
        Ok(())
    }),
    ("new_sequence b", |c, s| {
        s.b = Some(c.new_sequence(8)?);
        Ok(())
    }),
    ("restore b from the snapshot", |c, s| {
        let hit = c.lookup(&TOKENS, |_| true).expect("the snapshot");
        c.restore(s.b.unwrap(), hit).map(drop)
    }),
    ("restore a's state", |c, s| {
        c.restore_state(s.a.unwrap(), s.saved.as_ref().unwrap())
    }),
    ("release b", |c, s| c.release(s.b.unwrap())),
    ("new_sequence c (b's slot, cleared)", |c, s| {
        s.c = Some(c.new_sequence(4)?);
        Ok(())
    }),
    ("release a and c", |c, s| {
        c.release(s.a.unwrap())?;
        c.release(s.c.unwrap())
    }),
];

/// What a failed step must leave unchanged: sequences, snapshots, state slots (live
/// and free) and the length of `a`.
fn books(c: &PagedCache<FlakyMemory>, s: &Seqs) -> [usize; 6] {
    let u = c.usage();
    let a = s.a.map_or(usize::MAX, |a| c.sequence(a).unwrap().len);
    [
        u.sequences,
        u.entries,
        u.snapshots,
        u.state_slots,
        u.slots_free,
        a,
    ]
}

/// Runs the workload; the `fail_at`th fallible memory call fails once. Returns the
/// number of fallible calls the run made.
fn run(fail_at: i64) -> i64 {
    let countdown = Arc::new(AtomicI64::new(fail_at));
    let mut c = cache(&countdown);
    let mut seqs = Seqs::default();
    let mut failed = false;
    for (name, step) in STEPS {
        let before = books(&c, &seqs);
        match step(&mut c, &mut seqs) {
            Ok(()) => {}
            Err(KvCacheError::Memory(msg)) => {
                assert!(!failed, "{name}: a second failure ({msg})");
                failed = true;
                assert_eq!(before, books(&c, &seqs), "{name}: {msg} changed the books");
                c.verify_refcounts().unwrap();
                step(&mut c, &mut seqs).unwrap_or_else(|e| panic!("{name}, retried: {e}"));
            }
            Err(e) => panic!("{name}: {e}"),
        }
        c.verify_refcounts().unwrap();
    }
    let calls = fail_at - countdown.load(Ordering::SeqCst);
    assert_eq!(failed, fail_at <= calls);
    let usage = c.usage();
    assert_eq!(
        (usage.state_slots, usage.sequences, usage.entries),
        (0, 0, 1)
    );
    // Only the snapshot's two pages stay referenced.
    assert_eq!(usage.pages_in_use, 2 * c.spec().block_bytes());
    calls
}

#[test]
fn every_memory_failure_leaves_the_books_as_they_were() {
    let calls = run(i64::MAX);
    // Materialize two pages and a slot, save a state, copy a shared page, ...
    assert!(calls >= 8, "the workload makes {calls} fallible calls");
    for fail_at in 1..=calls {
        run(fail_at);
    }
}
