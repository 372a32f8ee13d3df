//! Memory read bandwidth: the yardstick of the decode benchmarks.
//!
//! Decoding one token reads every weight byte once, so its speed limit is weight bytes
//! per token over the bandwidth at which the machine's cores can read DRAM. What one
//! core reaches depends on how many sequential streams it reads at once (each stream
//! has its own hardware prefetcher): on a 2-vCPU Xeon (5th generation) VM one stream
//! per thread reads 17–21 GiB/s and four streams 24 GiB/s, while on a Zen 4 VM one
//! stream was the fastest. [`ReadProbe`] therefore reports the best of several access
//! patterns, so a fraction of that bound is never flattered by a weak probe.
//!
//! The loops are wrapping sums of `u64` buffers, limited by loads and not by an add
//! chain (eight independent lanes, so they vectorize).

use rayon::prelude::*;
use std::time::Instant;

/// A summing read loop.
pub type SumFn = fn(&[u64]) -> u64;

/// One sequential stream.
#[inline(always)]
pub fn sum_lanes(data: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    let chunks = data.chunks_exact(8);
    let tail = chunks
        .remainder()
        .iter()
        .fold(0u64, |a, &b| a.wrapping_add(b));
    for c in chunks {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l = l.wrapping_add(v);
        }
    }
    lanes.iter().fold(tail, |a, &b| a.wrapping_add(b))
}

/// `S` equal parts of `data` read in lockstep: `S` sequential streams in flight per
/// thread, as the multi-row linear kernels have (rows, each with codes and scales),
/// which lets the hardware prefetchers keep more DRAM requests outstanding than one
/// stream does.
#[inline(always)]
pub fn sum_streams<const S: usize>(data: &[u64]) -> u64 {
    let q = data.len() / (8 * S) * 8;
    let parts: [&[u64]; S] = std::array::from_fn(|k| &data[k * q..(k + 1) * q]);
    let mut lanes = [0u64; 8];
    for i in (0..q).step_by(8) {
        for p in &parts {
            for (l, &v) in lanes.iter_mut().zip(&p[i..i + 8]) {
                *l = l.wrapping_add(v);
            }
        }
    }
    lanes
        .iter()
        .fold(sum_lanes(&data[S * q..]), |x, &y| x.wrapping_add(y))
}

/// [`sum_lanes`] for the build's baseline target.
pub fn one_stream(data: &[u64]) -> u64 {
    sum_lanes(data)
}

/// [`sum_streams`] with 4 streams for the build's baseline target.
pub fn four_streams(data: &[u64]) -> u64 {
    sum_streams::<4>(data)
}

/// [`sum_streams`] with 8 streams for the build's baseline target.
pub fn eight_streams(data: &[u64]) -> u64 {
    sum_streams::<8>(data)
}

/// `sum` over 4 MiB pieces on the rayon pool the caller runs in.
pub fn par_sum(data: &[u64], sum: SumFn) -> u64 {
    data.par_chunks(1 << 19)
        .map(sum)
        .reduce(|| 0, u64::wrapping_add)
}

/// A `bytes`-long buffer of u64, written (not calloc'ed zero pages), so reads really
/// touch DRAM.
pub fn buffer(bytes: usize) -> Vec<u64> {
    (0..(bytes / 8) as u64).collect()
}

/// The read patterns [`ReadProbe`] tries: one, four and eight streams per thread.
pub const PATTERNS: [(&str, SumFn); 3] = [
    ("one stream", one_stream),
    ("four streams", four_streams),
    ("eight streams", eight_streams),
];

/// Measures how fast the rayon pool reads a buffer far larger than the last-level
/// cache, as the best of [`PATTERNS`].
#[derive(Debug)]
pub struct ReadProbe {
    buf: Vec<u64>,
    passes: usize,
}

impl ReadProbe {
    /// A probe over a written buffer of `bytes` (use several times the last-level
    /// cache), timing `passes` reads per pattern (at least one).
    pub fn new(bytes: usize, passes: usize) -> Self {
        ReadProbe {
            buf: buffer(bytes),
            passes: passes.max(1),
        }
    }

    /// The buffer's size in bytes.
    pub fn bytes(&self) -> usize {
        self.buf.len() * 8
    }

    /// Bytes per second of one pattern: the median of its passes.
    pub fn pattern_bytes_per_s(&self, sum: SumFn) -> f64 {
        let mut secs: Vec<f64> = (0..self.passes)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(par_sum(std::hint::black_box(&self.buf), sum));
                t.elapsed().as_secs_f64()
            })
            .collect();
        secs.sort_by(f64::total_cmp);
        self.bytes() as f64 / secs[secs.len() / 2]
    }

    /// Bytes per second: the fastest pattern's median.
    pub fn bytes_per_s(&self) -> f64 {
        PATTERNS
            .iter()
            .map(|&(_, sum)| self.pattern_bytes_per_s(sum))
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pattern sums every element once, whatever the length's remainder.
    #[test]
    fn patterns_sum_every_element() {
        for len in [0usize, 7, 64, 1000, 4099] {
            let data: Vec<u64> = (0..len as u64).map(|v| v * 3 + 1).collect();
            let want = data.iter().fold(0u64, |a, &b| a.wrapping_add(b));
            for (name, sum) in PATTERNS {
                assert_eq!(sum(&data), want, "{name}, {len}");
                assert_eq!(par_sum(&data, sum), want, "{name}, {len}");
            }
        }
    }

    #[test]
    fn probe_measures_a_positive_rate() {
        let probe = ReadProbe::new(1 << 20, 2);
        assert_eq!(probe.bytes(), 1 << 20);
        let rate = probe.bytes_per_s();
        assert!(rate.is_finite() && rate > 0.0, "{rate}");
    }
}
