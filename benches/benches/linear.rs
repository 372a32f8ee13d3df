//! CPU linear layers at decode shapes: effective weight bandwidth of the fast path.
//!
//! For each shape of [`DECODE_SHAPES`], each format (NVFP4 W4A16, W4A4 and W4A8, bf16, FP8,
//! f32) and 1 or 16 tokens, times `Linear::forward` (rayon global pool, SIMD level of
//! `simd_level()`); NVFP4 and bf16 also with bf16 activations at 1 token. Throughput
//! is the layer's weight bytes per forward pass, so it compares directly with the
//! `bandwidth` benchmark. Each iteration uses the next of several distinct layers
//! adding up to 1 GiB, so weights come from DRAM, not cache.
//!
//! Each shape group starts with `read-1GiB`, the 2-thread, 4-stream read loop of the
//! `bandwidth` benchmark, so every group carries a read-bandwidth reference measured
//! minutes, not a whole suite, away from its layers (this VM's bandwidth varies with
//! what else runs on the host).
//!
//! Run: `cargo bench -p edge-benches --bench linear`.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use edge_benches::read::{self, par_sum};
use edge_benches::{BenchFormat, DECODE_SHAPES, WORKING_SET_BYTES, make_layers, values};
use edge_quant::linear::{ActivationQuant, simd_level};
use std::hint::black_box;
use std::time::Duration;

fn linear(c: &mut Criterion) {
    eprintln!(
        "SIMD level: {}, rayon threads: {}",
        simd_level(),
        rayon::current_num_threads()
    );
    let reference = read::buffer(1 << 30);
    for (out, inp) in DECODE_SHAPES {
        let mut g = c.benchmark_group(format!("linear-{out}x{inp}"));
        g.sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        g.throughput(Throughput::Bytes(1 << 30));
        g.bench_function("read-1GiB", |b| {
            b.iter(|| par_sum(black_box(&reference), read::four_streams))
        });
        for format in BenchFormat::ALL {
            let layers = make_layers(format, out, inp, WORKING_SET_BYTES, 42);
            g.throughput(Throughput::Bytes(layers[0].weight_bytes() as u64));
            for tokens in [1usize, 16] {
                let x = values(tokens as u64, tokens * inp);
                let mut y = vec![0.0f32; tokens * out];
                let id = BenchmarkId::new(format.name(), tokens);
                g.bench_function(id, |b| {
                    let mut i = 0;
                    b.iter(|| {
                        let layer = &layers[i % layers.len()];
                        i += 1;
                        layer.forward(black_box(&x), tokens, &mut y).unwrap();
                    })
                });
                black_box(&y);
            }
            if matches!(format, BenchFormat::Nvfp4 | BenchFormat::Bf16) {
                // Decode with bf16 activations (the `vdpbf16ps` kernels on AVX-512 BF16).
                let layers: Vec<_> = layers
                    .into_iter()
                    .map(|l| l.with_activation_quant(ActivationQuant::Bf16).unwrap())
                    .collect();
                let x = values(1, inp);
                let mut y = vec![0.0f32; out];
                let id = BenchmarkId::new(format!("{}-bf16act", format.name()), 1);
                g.bench_function(id, |b| {
                    let mut i = 0;
                    b.iter(|| {
                        let layer = &layers[i % layers.len()];
                        i += 1;
                        layer.forward(black_box(&x), 1, &mut y).unwrap();
                    })
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, linear);
criterion_main!(benches);
