//! Where a prompt's prefill passes are cut, which cut points get a snapshot, and the
//! fingerprint that makes a restored prefix bit-exact.
//!
//! A forward pass's f32 results depend on which tokens run together (the GDN chunk
//! boundaries, the GEMM's token tiles, the blocked prompt attention). So a request's
//! passes are cut at points fixed by the request alone: every multiple of the prefill
//! chunk, every reuse point the caller marks, and the prompt's end. A snapshot taken at
//! a cut point, by a request whose cut points below it were the same, holds exactly
//! the state this request's own uncached prefill would reach there: restoring it and
//! running the remaining passes gives the uncached result bit for bit. The
//! fingerprint ([`PrefillPlan::tag`]) hashes the cut points below a snapshot, so a
//! lookup can tell.

/// The prefill schedule of one prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefillPlan {
    /// Cut points in `(0, len]`, ascending; the last is the prompt's end.
    cuts: Vec<usize>,
    /// `tags[i]`: fingerprint of `cuts[..i]` (and the salt).
    tags: Vec<u64>,
    /// Whether a snapshot is taken at `cuts[i]`.
    snapshot: Vec<bool>,
}

/// FNV-1a over 64-bit words.
fn mix(hash: u64, word: u64) -> u64 {
    let mut h = hash;
    for b in word.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl PrefillPlan {
    /// The plan of a `len`-token prompt prefilled in chunks of `chunk` tokens, with the
    /// caller's `reuse_points`, a stride snapshot every `stride` chunks (0: none), and
    /// `salt` folded into every fingerprint (whatever else decides what the cache
    /// holds, e.g. whether MTP rows are computed).
    pub fn new(len: usize, chunk: usize, reuse_points: &[usize], stride: usize, salt: u64) -> Self {
        let chunk = chunk.max(1);
        let marked = |p: usize| reuse_points.contains(&p);
        let mut cuts: Vec<usize> = (1..len.div_ceil(chunk)).map(|i| i * chunk).collect();
        cuts.extend(reuse_points.iter().copied().filter(|&p| p > 0 && p <= len));
        cuts.push(len);
        cuts.sort_unstable();
        cuts.dedup();
        let mut tags = Vec::with_capacity(cuts.len());
        let mut hash = mix(0xcbf2_9ce4_8422_2325, salt);
        for &c in &cuts {
            tags.push(hash);
            hash = mix(hash, c as u64);
        }
        let snapshot = (cuts.iter())
            .map(|&c| {
                let strided = stride > 0 && c % (stride * chunk) == 0;
                c == len || marked(c) || strided
            })
            .collect();
        PrefillPlan {
            cuts,
            tags,
            snapshot,
        }
    }

    /// The fingerprint a snapshot at `position` must carry to be restored exactly, or
    /// `None` where `position` is not a cut point.
    pub fn tag(&self, position: usize) -> Option<u64> {
        self.cuts
            .binary_search(&position)
            .ok()
            .map(|i| self.tags[i])
    }

    /// The passes after `start` (a cut point, or 0): `(from, to, snapshot at to)`.
    pub fn passes_from(&self, start: usize) -> impl Iterator<Item = (usize, usize, bool)> + '_ {
        let first = self.cuts.partition_point(|&c| c <= start);
        let froms = std::iter::once(start).chain(self.cuts[first..].iter().copied());
        froms
            .zip(self.cuts[first..].iter().copied())
            .zip(self.snapshot[first..].iter().copied())
            .map(|((a, b), s)| (a, b, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_chunks_marks_and_the_end() {
        let p = PrefillPlan::new(20, 8, &[3, 8, 25, 0], 2, 7);
        let passes: Vec<_> = p.passes_from(0).collect();
        assert_eq!(
            passes,
            vec![(0, 3, true), (3, 8, true), (8, 16, true), (16, 20, true)]
        );
        let plain = PrefillPlan::new(20, 8, &[], 0, 7);
        assert_eq!(
            plain.passes_from(0).collect::<Vec<_>>(),
            vec![(0, 8, false), (8, 16, false), (16, 20, true)]
        );
        // From a restored cut point.
        assert_eq!(
            p.passes_from(8).collect::<Vec<_>>(),
            vec![(8, 16, true), (16, 20, true)]
        );
        assert_eq!(p.passes_from(20).count(), 0);
        assert_eq!(p.tag(5), None);
    }

    #[test]
    fn tags_depend_on_the_cuts_below_only() {
        let a = PrefillPlan::new(40, 16, &[5], 0, 1);
        let b = PrefillPlan::new(60, 16, &[5, 35], 0, 1);
        let c = PrefillPlan::new(60, 16, &[6], 0, 1);
        // Same cuts below 32: same tag; a different mark below it: another tag.
        assert_eq!(a.tag(32), b.tag(32));
        assert_ne!(a.tag(32), c.tag(32));
        // A different salt (e.g. MTP rows) changes every tag.
        assert_ne!(a.tag(16), PrefillPlan::new(40, 16, &[5], 0, 2).tag(16));
        // The end of `a` is not a cut of `b`.
        assert_eq!(b.tag(40), None);
    }
}
