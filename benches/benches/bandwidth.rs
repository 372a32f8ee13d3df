//! Memory read bandwidth: the yardstick for the linear-layer benchmarks.
//!
//! Sums a 1 GiB buffer of u64 (more than twice the 480 MiB L3 this VM reports, so it
//! streams from DRAM), with the rayon global pool (2 threads on the 2-core dev machine)
//! and with one thread: in plain Rust with one sequential stream per thread, with four and
//! eight interleaved streams per thread (more requests in flight, like the paired-row linear
//! kernels), and, where the CPU has it, compiled for AVX-512 (64-byte loads). A 64 MiB
//! buffer gives a cache-assisted contrast. Throughput is bytes read per second; the
//! best 2-thread 1 GiB variant is the "measured read bandwidth" of docs/PERFORMANCE.md.
//!
//! Run: `cargo bench -p edge-benches --bench bandwidth`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edge_benches::read::{self, SumFn, par_sum};
use std::hint::black_box;
use std::time::Duration;

/// [`read::sum_lanes`] compiled for AVX-512 (one 64-byte load per cache line).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn sum_avx512(data: &[u64]) -> u64 {
    read::sum_lanes(data)
}

/// The widest sum this CPU runs, and its name.
fn best_sum() -> (&'static str, SumFn) {
    #[cfg(target_arch = "x86_64")]
    if edge_core::simd::token().avx512().is_some() {
        // SAFETY: the level's token proves AVX-512 (F among its features).
        return ("avx512", |d| unsafe { sum_avx512(d) });
    }
    ("baseline", read::one_stream)
}

fn bandwidth(c: &mut Criterion) {
    const GIB: usize = 1 << 30;
    let buf = read::buffer(GIB);
    let small = &buf[..(64 << 20) / 8];
    let threads = rayon::current_num_threads();
    let (best, best_fn) = best_sum();
    eprintln!("rayon threads: {threads}, widest sum: {best}");

    let mut g = c.benchmark_group("bandwidth");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(GIB as u64));
    let mut variants: Vec<(&str, SumFn)> = vec![
        ("baseline", read::one_stream),
        ("baseline-4-streams", read::four_streams),
        ("baseline-8-streams", read::eight_streams),
    ];
    if best != "baseline" {
        variants.push((best, best_fn));
    }
    for (name, sum) in variants {
        g.bench_function(format!("read-1GiB/rayon-{threads}/{name}"), |b| {
            b.iter(|| par_sum(black_box(&buf), sum))
        });
        g.bench_function(format!("read-1GiB/1-thread/{name}"), |b| {
            b.iter(|| sum(black_box(&buf)))
        });
    }
    g.throughput(Throughput::Bytes(std::mem::size_of_val(small) as u64));
    g.bench_function(format!("read-64MiB/rayon-{threads}/{best}"), |b| {
        b.iter(|| par_sum(black_box(small), best_fn))
    });
    g.finish();
}

criterion_group!(benches, bandwidth);
criterion_main!(benches);
