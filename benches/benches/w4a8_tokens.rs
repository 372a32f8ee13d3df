//! The W4A8 row kernels (NVFP4 weights, int8 activations: the default CPU mode of
//! NVFP4 checkpoints) at one to four tokens, the decode-step and batched-decode
//! shapes, at the AVX-512 and AVX2 levels.
//!
//! Two layer shapes of the ≈0.53B benchmark model (gate/up 3584×1024, down 1024×3584),
//! each timed twice: `resident`, one layer reused every iteration (≈2 MiB, in cache:
//! the kernel's compute rate), and `dram`, the next of layers adding up to 1 GiB each
//! iteration (weights streamed from memory, as in a decode step). Throughput is the
//! layer's weight bytes per forward pass, whatever the token count: at `t` tokens the
//! kernel does `t` times the products of one, so `t · GiB/s(t) / GiB/s(1)` is the gain
//! of batching `t` decode streams.
//!
//! `cargo bench -p edge-benches --bench w4a8_tokens [-- FILTER]`

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use edge_benches::{BenchFormat, WORKING_SET_BYTES, make_layers, values};
use edge_core::simd::{SimdLevel, with_level};
use std::hint::black_box;
use std::time::Duration;

/// `[out, in]` of the benchmark model's gate/up and down projections.
const SHAPES: [(usize, usize); 2] = [(3584, 1024), (1024, 3584)];

fn w4a8_tokens(c: &mut Criterion) {
    eprintln!("rayon threads: {}", rayon::current_num_threads());
    let levels: Vec<SimdLevel> = [SimdLevel::Avx512, SimdLevel::Avx2]
        .into_iter()
        .filter(|l| l.is_available())
        .collect();
    for (out, inp) in SHAPES {
        let streamed = make_layers(BenchFormat::Nvfp4W4a8, out, inp, WORKING_SET_BYTES, 42);
        let resident = &streamed[..1];
        let mut g = c.benchmark_group(format!("w4a8-{out}x{inp}"));
        g.sample_size(20)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        g.throughput(Throughput::Bytes(streamed[0].weight_bytes() as u64));
        for &level in &levels {
            for (place, layers) in [("resident", resident), ("dram", &streamed[..])] {
                for tokens in 1..=4usize {
                    let x = values(tokens as u64, tokens * inp);
                    let mut y = vec![0.0f32; tokens * out];
                    let id = BenchmarkId::new(format!("{level}-{place}"), tokens);
                    g.bench_function(id, |b| {
                        with_level(level, || {
                            let mut i = 0;
                            b.iter(|| {
                                let layer = &layers[i % layers.len()];
                                i += 1;
                                layer.forward(black_box(&x), tokens, &mut y).unwrap();
                            })
                        })
                        .unwrap()
                    });
                    black_box(&y);
                }
            }
        }
        g.finish();
    }
}

criterion_group!(benches, w4a8_tokens);
criterion_main!(benches);
