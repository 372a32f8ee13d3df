//! The device cache memory against the host layout: page copies, slot state
//! save/clear/restore, capacity errors and a `PagedCache` over it (ignored without a
//! GPU; run with
//! `cargo test -p edge-model --features cuda --release --lib -- --ignored cuda::`).

use super::kv_store::KvPagesMut;
use super::tests::device;
use super::*;
use edge_core::Device;
use edge_kvcache::{
    AttentionLayerSpec, BlockId, CacheConfig, CacheMemory, CacheSpec, KvCacheError, KvDType,
    PagedCache, PoolCapacity, RecurrentLayerSpec, SequenceCache, SlotId, SnapshotData,
};

const HEADS: usize = 2;
const DIM: usize = 4;
const BLOCK: usize = 4;

fn spec(kv_dtype: KvDType) -> CacheSpec {
    let layer = AttentionLayerSpec {
        kv_heads: HEADS,
        head_dim: DIM,
        k_scale: 0.5,
        v_scale: 2.0,
    };
    CacheSpec {
        block_size: BLOCK,
        kv_dtype,
        attention: vec![layer; 2],
        recurrent: vec![RecurrentLayerSpec { conv: 3, state: 5 }],
    }
}

/// Element `i` of a pool's pattern.
fn code(layer: usize, i: usize) -> u8 {
    (i * 7 + layer * 31 + 1) as u8
}

fn page_copies_move_the_host_layouts_rows(on: Device) {
    let dev = device(on);
    let s = spec(KvDType::Fp8E4M3);
    let cap = PoolCapacity { pages: 3, slots: 2 };
    let mut mem = CudaCacheMemory::new(&dev, &s, cap).unwrap();
    let page = HEADS * BLOCK * DIM;
    let mut want = Vec::new();
    for layer in 0..2 {
        let pattern: Vec<u8> = (0..3 * page).map(|i| code(layer, i)).collect();
        let mut kv = mem.kv_mut(layer).layer_mut();
        let KvPagesMut::Fp8 { keys, values, .. } = &mut kv.pages else {
            panic!("FP8 pages")
        };
        dev.write(&pattern, keys, 0).unwrap();
        dev.write(&pattern, values, 0).unwrap();
        // Rows 0..3 of page 0 land in page 2, head by head; row 3 of page 2 stays.
        let mut expect = pattern.clone();
        for h in 0..HEADS {
            for r in 0..3 {
                for d in 0..DIM {
                    let at = |p: usize| p * page + (h * BLOCK + r) * DIM + d;
                    expect[at(2)] = pattern[at(0)];
                }
            }
        }
        want.push(expect);
    }
    mem.materialize_page(BlockId::new(2)).unwrap();
    mem.copy_rows(BlockId::new(0), BlockId::new(2), 3).unwrap();
    for (layer, expect) in want.iter().enumerate() {
        let KvPages::Fp8 { keys, values, .. } = mem.kv(layer).pages() else {
            panic!("FP8 pages")
        };
        assert_eq!(
            &dev.download(keys).unwrap(),
            expect,
            "keys of layer {layer}"
        );
        assert_eq!(
            &dev.download(values).unwrap(),
            expect,
            "values of layer {layer}"
        );
    }
    let err = mem.materialize_page(BlockId::new(3)).unwrap_err();
    assert!(matches!(err, KvCacheError::Memory(_)), "{err}");
    let err = mem
        .copy_rows(BlockId::new(0), BlockId::new(3), 1)
        .unwrap_err();
    assert!(matches!(err, KvCacheError::Memory(_)), "{err}");
}

fn slot_states_save_clear_and_restore(on: Device) {
    let dev = device(on);
    let s = spec(KvDType::F32);
    let mut mem = CudaCacheMemory::new(&dev, &s, PoolCapacity { pages: 1, slots: 2 }).unwrap();
    mem.materialize_slot(SlotId::new(0)).unwrap();
    mem.materialize_slot(SlotId::new(1)).unwrap();
    let conv: Vec<f32> = (0..6).map(|i| i as f32 + 0.5).collect();
    let state: Vec<f32> = (0..10).map(|i| -(i as f32) - 0.25).collect();
    {
        let (c, st) = mem.recurrent_mut(0).pools_mut();
        dev.write(&conv, c, 0).unwrap();
        dev.write(&state, st, 0).unwrap();
    }
    let saved = mem.save_state(SlotId::new(1)).unwrap();
    mem.clear_state(SlotId::new(1)).unwrap();
    mem.load_state(SlotId::new(0), &saved).unwrap();
    let (c, st) = mem.recurrent_mut(0).pools_mut();
    let (c, st) = (dev.download(c).unwrap(), dev.download(st).unwrap());
    // Slot 0 now holds what slot 1 held; slot 1 is zero.
    assert_eq!(c, [conv[3..].to_vec(), vec![0.0; 3]].concat());
    assert_eq!(st, [state[5..].to_vec(), vec![0.0; 5]].concat());
    let err = mem.save_state(SlotId::new(2)).unwrap_err();
    assert!(matches!(err, KvCacheError::Memory(_)), "{err}");
}

fn a_paged_cache_runs_over_device_memory(on: Device) {
    let dev = device(on);
    let config = CacheConfig {
        block_size: BLOCK,
        kv_dtype: KvDType::Bf16,
        budget_bytes: 1 << 16,
        prefix_cache: true,
        // Two sequences: pools sized to share the budget (for_config).
        max_sequences: Some(2),
    };
    let s = spec(KvDType::Bf16);
    let memory = CudaCacheMemory::new(&dev, &s, PoolCapacity::for_config(&s, &config)).unwrap();
    let mut cache = PagedCache::with_memory(memory, config).unwrap();
    let a = cache.new_sequence(8).unwrap();
    cache.prepare_rows(a, 0..6).unwrap();
    cache.set_len(a, 6).unwrap();
    let tokens = [1, 2, 3, 4, 5, 6];
    assert!(
        cache
            .insert_snapshot(a, &tokens, SnapshotData::default())
            .unwrap()
    );
    // Writing past the snapshot copies its shared last page on the device.
    cache.prepare_rows(a, 6..9).unwrap();
    let b = cache.new_sequence(8).unwrap();
    let hit = cache.lookup(&tokens, |_| true).expect("the snapshot");
    cache.restore(b, hit).unwrap();
    assert_eq!(cache.sequence(b).unwrap().len, 6);
    cache.verify_refcounts().unwrap();
    cache.release(a).unwrap();
    cache.release(b).unwrap();
    cache.verify_refcounts().unwrap();
}

edge_core::device_test!(page_copies_move_the_host_layouts_rows, cuda);
edge_core::device_test!(slot_states_save_clear_and_restore, cuda);
edge_core::device_test!(a_paged_cache_runs_over_device_memory, cuda);
