//! The project's one seeded pseudo-random generator: [`SeededRng`].
//!
//! Everything in edge-llm that draws pseudo-random numbers from a seed uses it: the
//! sampler (a request's `seed`), the synthetic and random NVFP4 checkpoint writers,
//! benchmark data and test data. It is PCG-64 "fast" (`Pcg64Mcg`: a 128-bit
//! multiplicative congruential generator with the XSL-RR output function) from the
//! `rand_pcg` crate, seeded through `rand_core`'s `SeedableRng::seed_from_u64`, whose
//! output `rand_core` documents as value-stable. Both are pure integer arithmetic, so
//! a seed gives the same sequence on every machine, target and thread count.
//!
//! Not for cryptography: the outputs are predictable from a few of them.

use rand_core::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A deterministic generator: the same seed gives the same numbers everywhere.
///
/// ```
/// use edge_core::rng::SeededRng;
/// let (mut a, mut b) = (SeededRng::from_seed(7), SeededRng::from_seed(7));
/// assert_eq!(a.next_u64(), b.next_u64());
/// let u = a.next_f32();
/// assert!((0.0..1.0).contains(&u));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeededRng(Pcg64Mcg);

impl SeededRng {
    /// The generator for `seed`. Every `u64` is a good seed: nearby seeds (0, 1, 2, …)
    /// give unrelated sequences.
    pub fn from_seed(seed: u64) -> Self {
        SeededRng(Pcg64Mcg::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1): the top 24 bits of [`SeededRng::next_u64`] over 2²⁴, so
    /// every value is an exact multiple of 2⁻²⁴.
    #[inline]
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in [`lo`, `hi`): `lo + (hi − lo) · next_f32()`.
    #[inline]
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.next_f32()
    }

    /// Uniform in `0..n` (`n > 0`), by the widening multiply (Lemire): its bias,
    /// below `n / 2⁶⁴`, is far under anything a test or benchmark could see.
    ///
    /// # Panics
    /// If `n` is 0.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "SeededRng::below(0): the range is empty");
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fills `dest` with random bytes (each 8 from one [`SeededRng::next_u64`], little
    /// endian).
    pub fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest);
    }

    /// `n` random bytes, as [`SeededRng::fill_bytes`] writes them.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill_bytes(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator is PCG's `pcg64_fast`: from state 42 it gives the first outputs
    /// of the official PCG C test suite (the vector rand_pcg's own tests copy), and
    /// `seed_from_u64(0)` gives rand_pcg's recorded first output. A crate update that
    /// moved either would change every seeded sequence in the project.
    #[test]
    fn matches_the_published_pcg64_fast_vectors() {
        let mut rng = SeededRng(Pcg64Mcg::new(42));
        let first: Vec<u64> = (0..6).map(|_| rng.next_u64()).collect();
        assert_eq!(
            first,
            [
                0x63b4_a3a8_13ce_700a,
                0x3829_5420_0617_ab24,
                0xa7fd_85ae_3fe9_50ce,
                0xd715_286a_a288_7737,
                0x60c9_2fee_2e59_f32c,
                0x84c4_e96b_eff3_0017,
            ]
        );
        assert_eq!(
            SeededRng::from_seed(0).next_u64(),
            6_198_063_878_555_692_194
        );
    }

    #[test]
    fn a_seed_gives_one_sequence_and_seeds_differ() {
        let draw = |seed| {
            let mut r = SeededRng::from_seed(seed);
            (0..64).map(|_| r.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        // Neighbouring seeds share no output in their first 64 draws.
        let (a, b) = (draw(0), draw(1));
        assert!(a.iter().all(|x| !b.contains(x)));
    }

    #[test]
    fn floats_and_indices_stay_in_range_and_cover_it() {
        let mut rng = SeededRng::from_seed(11);
        let (mut lo, mut hi) = (1.0f32, 0.0f32);
        let mut counts = [0usize; 10];
        for _ in 0..100_000 {
            let u = rng.next_f32();
            assert!((0.0..1.0).contains(&u));
            assert_eq!(u * (1u32 << 24) as f32, (u * (1u32 << 24) as f32).floor());
            (lo, hi) = (lo.min(u), hi.max(u));
            counts[rng.below(10)] += 1;
            let v = rng.uniform(-0.5, 0.5);
            assert!((-0.5..0.5).contains(&v));
        }
        assert!(lo < 1e-3 && hi > 0.999, "{lo} {hi}");
        // 10,000 expected per bin, standard deviation ≈ 95: ±600 is over 6σ.
        assert!(
            counts.iter().all(|&c| c.abs_diff(10_000) < 600),
            "{counts:?}"
        );
    }

    #[test]
    fn bytes_are_the_words_little_endian() {
        let mut a = SeededRng::from_seed(5);
        let mut b = a.clone();
        let bytes = a.bytes(12);
        let (w0, w1) = (b.next_u64().to_le_bytes(), b.next_u64().to_le_bytes());
        assert_eq!(&bytes[..8], &w0);
        assert_eq!(&bytes[8..], &w1[..4]);
        // A partial word is used up: the next draw is the one after it.
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    #[should_panic(expected = "SeededRng::below(0)")]
    fn below_zero_panics() {
        SeededRng::from_seed(0).below(0);
    }
}
