//! Kernel timing for the GPU tests that print them.

use edge_core::cuda::CudaDevice;
use std::time::Instant;

/// The median wall time of `runs` calls of `f` after one warm-up, in µs, the stream
/// drained before and after each call.
pub(super) fn median_us(dev: &CudaDevice, runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    dev.synchronize().unwrap();
    let mut times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            dev.synchronize().unwrap();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
