//! Work buffers that one forward pass reuses from layer to layer.
//!
//! A 512-token prompt through a layer of the ≈0.53B benchmark shape needs about 45 MB
//! of intermediate rows (projections, conv outputs, per-head cores). Allocated zeroed
//! per layer, the zeroing alone took about 6% of prefill; every layer writes each of
//! these values before it reads it, so a buffer handed back by one layer serves the
//! next one as it is. [`Scratch::poisoned`] lets tests prove that "writes before reads".

use core::ops::{Deref, DerefMut};

/// A pool of `f32` buffers: [`Scratch::take`] hands one out, [`Scratch::give`] returns
/// it for the next taker. Owned by the caller of a forward pass, so nothing is shared
/// between threads or sequences.
#[derive(Debug, Default)]
pub struct Scratch {
    free: Vec<Vec<f32>>,
    poison: bool,
}

/// A buffer from [`Scratch::take`]: `len` values whose contents are unspecified (what
/// an earlier taker left, or zeros), to be written before they are read.
#[derive(Debug)]
pub struct ScratchBuf {
    data: Vec<f32>,
    len: usize,
}

impl Deref for ScratchBuf {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.data[..self.len]
    }
}

impl DerefMut for ScratchBuf {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.data[..self.len]
    }
}

impl Scratch {
    /// An empty pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pool whose buffers always come filled with NaN: a forward pass through it
    /// gives the same result as through [`Scratch::new`] only if every layer writes
    /// each value before it reads it (for tests).
    pub fn poisoned() -> Self {
        Scratch {
            free: Vec::new(),
            poison: true,
        }
    }

    /// A buffer of `len` values: the shortest free one that is long enough, else a new
    /// zeroed one, which replaces the longest free buffer (too short to serve), so
    /// the pool holds no more buffers than were ever out at once.
    pub fn take(&mut self, len: usize) -> ScratchBuf {
        let fit = (self.free.iter().enumerate())
            .filter(|(_, b)| b.len() >= len)
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        let mut data = match fit {
            Some(i) => self.free.swap_remove(i),
            None => {
                let longest = (self.free.iter().enumerate())
                    .max_by_key(|(_, b)| b.len())
                    .map(|(i, _)| i);
                if let Some(i) = longest {
                    self.free.swap_remove(i);
                }
                vec![0.0; len]
            }
        };
        if self.poison {
            data[..len].fill(f32::NAN);
        }
        ScratchBuf { data, len }
    }

    /// Returns a buffer to the pool.
    pub fn give(&mut self, buf: ScratchBuf) {
        self.free.push(buf.data);
    }

    /// Returns several buffers to the pool.
    pub fn give_all<const N: usize>(&mut self, bufs: [ScratchBuf; N]) {
        self.free.extend(bufs.map(|b| b.data));
    }

    /// Values held by the free buffers.
    pub fn free_values(&self) -> usize {
        self.free.iter().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_best_fitting_buffer_without_clearing_it() {
        let mut s = Scratch::new();
        let mut a = s.take(10);
        assert_eq!(a.len(), 10);
        assert!(a.iter().all(|&v| v == 0.0));
        a.fill(7.0);
        let b = s.take(100);
        s.give_all([a, b]);
        // 8 fits in the 10-long buffer (the best fit), which keeps its values.
        let c = s.take(8);
        assert_eq!(&c[..], &[7.0; 8]);
        s.give(c);
        assert_eq!(s.free_values(), 110);
    }

    #[test]
    fn a_new_buffer_replaces_the_longest_one_too_short() {
        let mut s = Scratch::new();
        let (a, b) = (s.take(10), s.take(20));
        s.give_all([a, b]);
        let c = s.take(30);
        assert_eq!(s.free_values(), 10);
        s.give(c);
        assert_eq!(s.free_values(), 40);
    }

    #[test]
    fn poisoned_buffers_are_nan_every_time() {
        let mut s = Scratch::poisoned();
        let mut a = s.take(4);
        assert!(a.iter().all(|v| v.is_nan()));
        a.fill(1.0);
        s.give(a);
        assert!(s.take(3).iter().all(|v| v.is_nan()));
    }
}
