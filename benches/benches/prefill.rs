//! CPU linear layers at prompt (prefill) shapes: multiply-add throughput of
//! `Linear::forward` for 512 tokens on the projections of the ≈0.53B benchmark model
//! (`edge-llm bench synth`), f32 activations against bf16-rounded activations (the
//! packed GEMM) and, for NVFP4 weights, int8 activations (W4A8).
//!
//! Throughput is in elements = multiply-adds (`tokens · out · in`), so
//! `elements/s × 2` is FLOP/s.
//!
//! Run: `cargo bench -p edge-benches --bench prefill`.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use edge_benches::{BenchFormat, make_layers, values};
use edge_quant::linear::{ActivationQuant, simd_level};
use std::hint::black_box;
use std::time::Duration;

/// `(out_features, in_features)` of the benchmark model's projections: MLP gate/up,
/// MLP down, the GDN fused q/k/v projection.
const PREFILL_SHAPES: [(usize, usize); 3] = [(3584, 1024), (1024, 3584), (6144, 1024)];
/// Prompt length.
const TOKENS: usize = 512;

fn prefill(c: &mut Criterion) {
    eprintln!(
        "SIMD level: {}, rayon threads: {}",
        simd_level(),
        rayon::current_num_threads()
    );
    for (out, inp) in PREFILL_SHAPES {
        let mut g = c.benchmark_group(format!("prefill-{out}x{inp}"));
        g.sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        g.throughput(Throughput::Elements((TOKENS * out * inp) as u64));
        let x = values(3, TOKENS * inp);
        let mut y = vec![0.0f32; TOKENS * out];
        for format in [BenchFormat::Nvfp4, BenchFormat::Bf16] {
            let layer = make_layers(format, out, inp, 0, 42).swap_remove(0);
            let mut acts = vec![
                ("f32", ActivationQuant::None),
                ("bf16", ActivationQuant::Bf16),
            ];
            if format == BenchFormat::Nvfp4 {
                acts.push(("int8", ActivationQuant::Int8));
            }
            for (act_name, act) in acts {
                let layer = layer.clone().with_activation_quant(act).unwrap();
                let id = BenchmarkId::new(format.name(), format!("act-{act_name}"));
                g.bench_function(id, |b| {
                    b.iter(|| layer.forward(black_box(&x), TOKENS, &mut y).unwrap())
                });
                black_box(&y);
            }
        }
        g.finish();
    }
}

criterion_group!(benches, prefill);
criterion_main!(benches);
