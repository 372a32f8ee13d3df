//! Cost of prefix reuse against prefix length, on the cache shape of the ≈0.53B
//! benchmark model (6 attention layers of 2 KV heads × 256, 18 Gated DeltaNet layers
//! with 16 × 128 × 128 f32 states: 18.9 MB of recurrent state per snapshot):
//!
//! - `lookup`: walking the radix tree for the longest snapshot on a prompt's path;
//! - `restore`: lookup, then a fresh sequence sharing the snapshot's pages with its
//!   recurrent state copied in (dominated by that copy, independent of the length);
//! - `snapshot`: storing a sequence's state and page references.
//!
//! Run: `cargo bench -p edge-kvcache --bench prefix_index`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use edge_kvcache::{
    AttentionLayerSpec, CacheConfig, CacheSpec, HostMemory, KvDType, PagedCache,
    RecurrentLayerSpec, SequenceCache, SnapshotData,
};
use std::hint::black_box;
use std::time::Duration;

fn spec() -> CacheSpec {
    CacheSpec {
        block_size: 32,
        kv_dtype: KvDType::Fp8E4M3,
        attention: vec![
            AttentionLayerSpec {
                kv_heads: 2,
                head_dim: 256,
                k_scale: 1.0,
                v_scale: 1.0,
            };
            6
        ],
        recurrent: vec![
            RecurrentLayerSpec {
                conv: 3 * 6144,
                state: 16 * 128 * 128,
            };
            18
        ],
    }
}

fn prompt(len: usize) -> Vec<u32> {
    (0..len as u32)
        .map(|i| i.wrapping_mul(2_654_435_761) % 32_000)
        .collect()
}

fn prefix_reuse(c: &mut Criterion) {
    let mut g = c.benchmark_group("prefix-reuse");
    g.sample_size(20).measurement_time(Duration::from_secs(2));
    for len in [1024usize, 4096, 16384] {
        let config = CacheConfig {
            block_size: 32,
            kv_dtype: KvDType::Fp8E4M3,
            budget_bytes: 8 << 30,
            prefix_cache: true,
            max_sequences: None,
        };
        let mut cache = PagedCache::<HostMemory>::new(spec(), config).unwrap();
        let tokens = prompt(len);
        let seq = cache.new_sequence(len).unwrap();
        cache.prepare_rows(seq, 0..len).unwrap();
        cache.set_len(seq, len).unwrap();
        // Snapshots at a quarter, half and the end of the prompt, as message
        // boundaries would leave them.
        for cut in [len / 4, len / 2, len] {
            cache.set_len(seq, cut).unwrap();
            cache
                .insert_snapshot(seq, &tokens[..cut], SnapshotData::default())
                .unwrap();
        }
        let mut query = tokens.clone();
        query.extend([7, 8, 9]);
        g.bench_with_input(BenchmarkId::new("lookup", len), &query, |b, q| {
            b.iter(|| black_box(cache.lookup(black_box(q), |_| true)))
        });
        g.bench_with_input(BenchmarkId::new("restore", len), &query, |b, q| {
            b.iter(|| {
                let hit = cache.lookup(q, |_| true).unwrap();
                let s = cache.new_sequence(0).unwrap();
                black_box(cache.restore(s, hit).unwrap());
                cache.release(s).unwrap();
            })
        });
        g.bench_with_input(BenchmarkId::new("snapshot", len), &tokens, |b, t| {
            b.iter(|| {
                cache
                    .insert_snapshot(seq, t, SnapshotData::default())
                    .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, prefix_reuse);
criterion_main!(benches);
