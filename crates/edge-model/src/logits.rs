//! Reductions over a row of logits that decoding and speculation run per token:
//! vectorised, since a row is the vocabulary wide and a speculation step reads
//! several.

use crate::math::exp;
use edge_core::simd::dispatch;

/// Index of the largest logit of a row (the first one on ties; NaN never wins, and a
/// row of NaN gives 0): greedy decoding, and the choices speculation verifies.
pub fn argmax(logits: &[f32]) -> u32 {
    let max = max_of(logits);
    logits.iter().position(|&x| x == max).unwrap_or(0) as u32
}

/// `ln Σ eˣ` over the row (the log-softmax normaliser), with the maximum subtracted
/// first; NaN entries are skipped.
pub fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = max_of(logits);
    if max == f32::NEG_INFINITY {
        return max;
    }
    let mut sum = 0.0;
    sum_exp(logits, max, &mut sum);
    sum.ln() + max
}

/// A row of logits reduced to its most likely tokens: their ids and logits, most likely
/// first (ties: the lower id first, as [`argmax`]; NaN never), and the whole row's
/// [`log_sum_exp`]. What a pass returns for [`crate::LogitRows::Top`] rows: enough to
/// sample with a `top_k` of at most its length and to score drafts, without the row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopLogits {
    /// Token ids, most likely first.
    pub ids: Vec<u32>,
    /// Their logits.
    pub logits: Vec<f32>,
    /// `ln Σ eˣ` over the whole row (the log-softmax normaliser).
    pub log_sum_exp: f32,
}

impl TopLogits {
    /// The `k` largest entries of `row` (fewer when it has fewer non-NaN ones). One
    /// pass keeps the best `k` in a small sorted buffer (k is a handful).
    pub fn of(row: &[f32], k: usize) -> Self {
        let k = k.min(row.len());
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
        for (i, &l) in row.iter().enumerate() {
            if l.is_nan() {
                continue;
            }
            // Strictly better than the current k-th: equal logits keep the earlier,
            // lower id ahead.
            if best.len() == k && !(k > 0 && l > best[k - 1].1) {
                continue;
            }
            let at = best.partition_point(|&(_, b)| b >= l);
            best.insert(at, (i as u32, l));
            best.truncate(k);
        }
        let (ids, logits) = best.into_iter().unzip();
        TopLogits {
            ids,
            logits,
            log_sum_exp: log_sum_exp(row),
        }
    }

    /// `(token, log-probability)` pairs, most likely first.
    pub fn log_probs(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        (self.ids.iter().zip(&self.logits)).map(|(&t, &l)| (t, l - self.log_sum_exp))
    }
}

/// The `k` largest entries of `log_softmax(logits)` as `(token, log-probability)`,
/// most likely first (ties: the lower token id first, as argmax; NaN never):
/// [`TopLogits::of`]'s, as log-probabilities.
pub fn top_log_probs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    TopLogits::of(logits, k).log_probs().collect()
}

/// [`TopLogits::of`] each `vocab`-wide row of `logits`.
pub(crate) fn top_logits_per_row(logits: &[f32], vocab: usize, k: usize) -> Vec<TopLogits> {
    (logits.chunks_exact(vocab.max(1)))
        .map(|row| TopLogits::of(row, k))
        .collect()
}

/// `Σ e^{x − max}` over the non-NaN entries, into `sum`.
fn sum_exp(logits: &[f32], max: f32, sum: &mut f32) {
    dispatch!(sum_exp_portable, (logits: &[f32], max: f32, sum: &mut f32) {
        let mut lanes = [0.0f32; 16];
        let mut chunks = logits.chunks_exact(16);
        for c in &mut chunks {
            for (t, &x) in lanes.iter_mut().zip(c) {
                let e = exp(x - max);
                *t += if e.is_nan() { 0.0 } else { e };
            }
        }
        let tail: f32 = (chunks.remainder().iter())
            .map(|&x| exp(x - max))
            .filter(|e| !e.is_nan())
            .sum();
        *sum = lanes.iter().sum::<f32>() + tail;
    })
}

/// The largest non-NaN entry (−∞ for none), in 16 lanes.
fn max_of(logits: &[f32]) -> f32 {
    let mut max = f32::NEG_INFINITY;
    max_into(logits, &mut max);
    max
}

fn max_into(logits: &[f32], max: &mut f32) {
    dispatch!(max_portable, (logits: &[f32], max: &mut f32) {
        let mut lanes = [f32::NEG_INFINITY; 16];
        let mut chunks = logits.chunks_exact(16);
        for c in &mut chunks {
            for (m, &x) in lanes.iter_mut().zip(c) {
                *m = if x > *m { x } else { *m };
            }
        }
        *max = (chunks.remainder().iter().chain(&lanes))
            .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_maximum_and_skips_nan() {
        assert_eq!(argmax(&[f32::NAN, 1.0, 1.0]), 1);
        assert_eq!(argmax(&[0.5, 3.0, 2.0]), 1);
        let mut long: Vec<f32> = (0..1000).map(|i| ((i * 37) % 101) as f32).collect();
        long[777] = 500.0;
        long[900] = 500.0;
        assert_eq!(argmax(&long), 777);
        assert_eq!(argmax(&[f32::NAN; 20]), 0);
    }

    #[test]
    fn log_sum_exp_matches_the_definition() {
        let row: Vec<f32> = (0..1003)
            .map(|i| ((i as f32) * 0.37).sin() * 20.0)
            .collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let want =
            (row.iter().map(|&x| f64::from(x - max).exp()).sum::<f64>()).ln() + f64::from(max);
        assert!((f64::from(log_sum_exp(&row)) - want).abs() < 1e-5);
        let mut with_nan = row.clone();
        with_nan[5] = f32::NAN;
        assert!(log_sum_exp(&with_nan).is_finite());
    }

    #[test]
    fn top_k_is_sorted_log_softmax() {
        let logits = [1.0f32, 3.0, 3.0, -2.0, 0.5];
        let top = top_log_probs(&logits, 3);
        assert_eq!(
            top.iter().map(|t| t.0).collect::<Vec<_>>(),
            vec![1, 2, 0],
            "ties go to the lower id, as argmax"
        );
        let z: f32 = logits.iter().map(|l| l.exp()).sum();
        assert!((top[0].1 - (3.0f32.exp() / z).ln()).abs() < 1e-6);
        assert_eq!(top_log_probs(&logits, 9).len(), 5);
        let with_nan = [0.0, f32::NAN, 1.0];
        let ids: Vec<u32> = top_log_probs(&with_nan, 3).iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![2, 0], "NaN is never drafted");
    }
}
