//! Decode attention at agentic depth: one query row of the ≈0.53B benchmark model's
//! attention shape (8 query heads on 2 KV heads of 256) over 16K cached rows in 32-row
//! pages, for each page format, both KV heads in parallel (one per thread, as a decode
//! step runs them). Throughput is bytes of cached keys and values read. It runs at the
//! detected SIMD level, and on an AVX-512 CPU at AVX2 too (forced with
//! `edge_core::simd::with_level`): `avx512/fp8`, `avx2/fp8`, ...
//!
//! Run: `cargo bench -p edge-benches --bench decode_attention`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use edge_core::rng::SeededRng;
use edge_core::simd::{SimdLevel, with_level};
use edge_kvcache::{AttentionLayerSpec, BlockId, CacheMemory, CacheSpec, HostMemory, KvDType};
use edge_model::cpu::attend_decode;
use std::hint::black_box;
use std::time::{Duration, Instant};

const ROWS: usize = 16_384;
const BLOCK: usize = 32;
const HEADS: usize = 8;
const KV_HEADS: usize = 2;
const D: usize = 256;

fn decode_attention(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode-attention-16k");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    // The detected level, and AVX2 below AVX-512.
    let mut levels = vec![edge_core::simd::detected().level];
    if levels[0] == SimdLevel::Avx512 {
        levels.push(SimdLevel::Avx2);
    }
    for dtype in [KvDType::Fp8E4M3, KvDType::Bf16, KvDType::F32] {
        let spec = CacheSpec {
            block_size: BLOCK,
            kv_dtype: dtype,
            attention: vec![AttentionLayerSpec {
                kv_heads: KV_HEADS,
                head_dim: D,
                k_scale: 0.02,
                v_scale: 0.02,
            }],
            recurrent: vec![],
        };
        let mut mem = HostMemory::new(&spec).unwrap();
        let pages: Vec<BlockId> = (0..ROWS / BLOCK).map(BlockId::new).collect();
        let mut rng = SeededRng::from_seed(7);
        let mut next = || rng.uniform(-0.5, 0.5);
        for &p in &pages {
            mem.materialize_page(p).unwrap();
            for r in 0..BLOCK {
                let k: Vec<f32> = (0..KV_HEADS * D).map(|_| next()).collect();
                let v: Vec<f32> = (0..KV_HEADS * D).map(|_| next()).collect();
                mem.kv_mut(0).write_row(p, r, &k, &v).unwrap();
            }
        }
        let kv = mem.kv(0);
        let qs: Vec<f32> = (0..HEADS * D).map(|_| next()).collect();
        let group = HEADS / KV_HEADS;
        g.throughput(Throughput::Bytes(
            (2 * KV_HEADS * ROWS * D * dtype.bytes()) as u64,
        ));
        for &level in &levels {
            let id = BenchmarkId::new(level.name(), dtype.name());
            g.bench_function(id, |b| {
                let (mut o0, mut o1) = (vec![0.0; group * D], vec![0.0; group * D]);
                b.iter_custom(|iters| {
                    let run = || {
                        let start = Instant::now();
                        for _ in 0..iters {
                            rayon::join(
                                || attend_decode(&qs[..group * D], kv, &pages, 0, ROWS, &mut o0),
                                || attend_decode(&qs[group * D..], kv, &pages, 1, ROWS, &mut o1),
                            );
                            black_box((&o0, &o1));
                        }
                        start.elapsed()
                    };
                    with_level(level, run).expect("an available level")
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, decode_attention);
criterion_main!(benches);
