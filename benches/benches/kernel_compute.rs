//! CPU linear layers at the ≈0.53B benchmark model's decode shapes with weights that
//! stay in cache: the kernels' compute throughput, apart from DRAM.
//!
//! The `linear` benchmark streams 1 GiB of weights, so its figures mix kernel speed
//! with the VM's (noisy) memory bandwidth. Here one layer is reused every iteration
//! (2–4 MiB in NVFP4, inside L3), so "weight GiB/s" is how fast the kernel consumes
//! weight bytes when they are at hand: a decode kernel can only reach a fraction of
//! DRAM bandwidth if this figure is well above it.
//!
//! `cargo bench -p edge-benches --bench kernel_compute`

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use edge_benches::{BenchFormat, make_layers, values};
use edge_quant::linear::{ActivationQuant, simd_level};
use std::hint::black_box;
use std::time::Duration;

/// `[out, in]` of the benchmark model's largest 1024-input projection (gate/up) and of
/// its down projection.
const SHAPES: [(usize, usize); 2] = [(3584, 1024), (1024, 3584)];

fn kernel_compute(c: &mut Criterion) {
    eprintln!(
        "SIMD level: {}, rayon threads: {}",
        simd_level(),
        rayon::current_num_threads()
    );
    for (out, inp) in SHAPES {
        let mut g = c.benchmark_group(format!("compute-{out}x{inp}"));
        g.sample_size(20)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        let cases = [
            (BenchFormat::Nvfp4, ActivationQuant::None, "nvfp4-w4a16"),
            (
                BenchFormat::Nvfp4,
                ActivationQuant::Bf16,
                "nvfp4-w4a16-bf16act",
            ),
            (BenchFormat::Nvfp4W4a8, ActivationQuant::Int8, "nvfp4-w4a8"),
            (BenchFormat::Bf16, ActivationQuant::Bf16, "bf16-bf16act"),
        ];
        for (format, act, name) in cases {
            let layer = make_layers(format, out, inp, 0, 42).swap_remove(0);
            let layer = layer.with_activation_quant(act).unwrap();
            g.throughput(Throughput::Bytes(layer.weight_bytes() as u64));
            for tokens in [1usize, 2] {
                let x = values(tokens as u64, tokens * inp);
                let mut y = vec![0.0f32; tokens * out];
                g.bench_function(BenchmarkId::new(name, tokens), |b| {
                    b.iter(|| layer.forward(black_box(&x), tokens, &mut y).unwrap())
                });
                black_box(&y);
            }
        }
        g.finish();
    }
}

criterion_group!(benches, kernel_compute);
criterion_main!(benches);
