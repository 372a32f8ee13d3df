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
//!
//! On a shared machine, `W4A8_CPU_TIME=1 RAYON_NUM_THREADS=1 cargo bench …` times
//! the process's CPU time instead of the wall clock (one thread: no spinning partner),
//! which other processes' load leaves nearly alone: the single-core rate of the kernels,
//! for A/B comparisons between builds.

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use edge_benches::{BenchFormat, WORKING_SET_BYTES, make_layers, values};
use edge_core::simd::{SimdLevel, with_level};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)` (the C library's, linked by std anyway).
fn process_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.sec as u64, ts.nsec as u32)
}

/// `[out, in]` of the benchmark model's gate/up and down projections.
const SHAPES: [(usize, usize); 2] = [(3584, 1024), (1024, 3584)];

fn w4a8_tokens(c: &mut Criterion) {
    let cpu_time = std::env::var_os("W4A8_CPU_TIME").is_some_and(|v| v == "1");
    eprintln!(
        "rayon threads: {}, timing {}",
        rayon::current_num_threads(),
        if cpu_time {
            "process CPU time"
        } else {
            "wall clock"
        }
    );
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
                            b.iter_custom(|iters| {
                                let (wall, cpu) = (Instant::now(), process_cpu_time());
                                for i in 0..iters as usize {
                                    let layer = &layers[i % layers.len()];
                                    layer.forward(black_box(&x), tokens, &mut y).unwrap();
                                }
                                match cpu_time {
                                    true => process_cpu_time() - cpu,
                                    false => wall.elapsed(),
                                }
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
