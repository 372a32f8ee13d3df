//! Calibration support: a shared cell that records the largest |x| a linear layer has
//! seen, from which ModelOpt-style `input_scale = amax / (6·448)` (NVFP4) or
//! `amax / 448` (FP8) is derived.

use std::sync::atomic::{AtomicU32, Ordering};

/// The running maximum of |x| over everything observed. Thread-safe; cheap to share.
#[derive(Debug, Default)]
pub struct AmaxObserver {
    bits: AtomicU32,
}

impl AmaxObserver {
    /// A fresh observer (amax 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds the absolute maximum of `x` into the running maximum (NaN is ignored).
    pub fn observe(&self, x: &[f32]) {
        let local = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // Non-negative floats order like their bit patterns, so an integer max works.
        self.bits.fetch_max(local.to_bits(), Ordering::Relaxed);
    }

    /// The maximum seen so far.
    pub fn amax(&self) -> f32 {
        f32::from_bits(self.bits.load(Ordering::Relaxed))
    }
}

impl PartialEq for AmaxObserver {
    /// Observers are identities: equal only to themselves.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_absolute_maximum() {
        let o = AmaxObserver::new();
        assert_eq!(o.amax(), 0.0);
        o.observe(&[1.0, -3.5, 2.0]);
        o.observe(&[0.5, f32::NAN]);
        assert_eq!(o.amax(), 3.5);
        o.observe(&[-7.0]);
        assert_eq!(o.amax(), 7.0);
    }
}
