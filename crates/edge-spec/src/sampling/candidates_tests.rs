//! [`Sampler::distribution_from_candidates`] against [`Sampler::distribution`] on the
//! full row, with candidates built as the device builds them.

use super::*;
use proptest::prelude::*;

/// The device's top-k on the host: the `k` largest non-NaN logits (ties by the lower
/// id) and the full row's softmax sum at `temperature`, summed in index order (another
/// order than the sampler's, as on the device).
fn top(logits: &[f32], k: usize, temperature: f32) -> (Vec<u32>, Vec<f32>, bool, f32) {
    let mut order: Vec<u32> = (0..logits.len() as u32)
        .filter(|&i| !logits[i as usize].is_nan())
        .collect();
    order.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then_with(|| a.cmp(&b))
    });
    let complete = order.len() <= k;
    let max = order.first().map_or(0.0, |&i| logits[i as usize]);
    let sum = (logits.iter().filter(|l| !l.is_nan()))
        .map(|&l| {
            if l == max {
                1.0
            } else {
                ((l - max) / temperature).exp()
            }
        })
        .sum();
    order.truncate(k);
    let values = order.iter().map(|&i| logits[i as usize]).collect();
    (order, values, complete, sum)
}

fn params(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplingParams {
    SamplingParams {
        temperature,
        top_k,
        top_p,
        min_p,
        ..SamplingParams::default()
    }
}

proptest! {
    #[test]
    fn candidates_give_the_full_rows_distribution(
        raw in prop::collection::vec(-8i32..8, 20..300),
        k in prop::sample::select(vec![1usize, 8, 32, 64]),
        temperature in prop::sample::select(vec![0.0f32, 0.3, 1.0, 1.7]),
        top_k in prop::sample::select(vec![0usize, 1, 5, 40, 100]),
        top_p in prop::sample::select(vec![0.2f32, 0.6, 0.95, 1.0]),
        min_p in prop::sample::select(vec![0.0f32, 0.05, 0.3]),
    ) {
        // Coarse logits: plenty of ties, some across the candidates' edge.
        let logits: Vec<f32> = raw.iter().map(|&v| v as f32 * 0.75).collect();
        let s = Sampler::new(params(temperature, top_k, top_p, min_p)).unwrap();
        let t = if temperature == 0.0 { 1.0 } else { temperature };
        let (ids, values, complete, sum) = top(&logits, k, t);
        let c = Candidates { ids: &ids, logits: &values, complete, sum };
        let full = s.distribution(&logits).unwrap();
        match s.distribution_from_candidates(&c).unwrap() {
            Some(d) => {
                let exact = temperature == 0.0 || complete || (top_k > 0 && top_k <= k);
                if exact {
                    prop_assert_eq!(d, full);
                } else {
                    // The cuts used another sum (never a cut that rounding could move):
                    // the same support, probabilities equal up to rounding.
                    prop_assert_eq!(&d.tokens, &full.tokens);
                    for (a, b) in d.probs.iter().zip(&full.probs) {
                        prop_assert!((a - b).abs() <= 1e-5 * b.max(1e-30), "{} vs {}", a, b);
                    }
                }
            }
            None => {
                // Only an incomplete list defers to the full row: top_k past it, or no
                // cut that is certain inside it.
                prop_assert!(!complete && (top_k == 0 || top_k > k));
            }
        }
    }
}

#[test]
fn a_nucleus_inside_the_candidates_needs_no_more() {
    // Two of 1000 logits hold almost all the mass: the top-p 0.9 cut is inside them.
    let mut logits = vec![0.0f32; 1000];
    logits[7] = 12.0;
    logits[3] = 11.0;
    let s = Sampler::new(params(1.0, 0, 0.9, 0.0)).unwrap();
    let (ids, values, complete, sum) = top(&logits, 2, 1.0);
    let c = Candidates {
        ids: &ids,
        logits: &values,
        complete,
        sum,
    };
    let d = s
        .distribution_from_candidates(&c)
        .unwrap()
        .expect("decided by the head");
    let full = s.distribution(&logits).unwrap();
    assert_eq!(d.tokens, full.tokens);
    assert_eq!(d.tokens, vec![7, 3]);
    // A nucleus past the head (top_p 1: every token) is not decided by it.
    let all = Sampler::new(params(1.0, 0, 1.0, 0.0)).unwrap();
    assert_eq!(all.distribution_from_candidates(&c).unwrap(), None);
}

#[test]
fn penalties_and_bad_candidates() {
    let penalised = SamplingParams {
        temperature: 1.0,
        presence_penalty: 0.5,
        ..SamplingParams::default()
    };
    let c = Candidates {
        ids: &[1, 0],
        logits: &[2.0, 1.0],
        complete: true,
        sum: 1.4,
    };
    let s = Sampler::new(penalised).unwrap();
    assert_eq!(
        s.distribution_from_candidates(&c).unwrap(),
        None,
        "penalties need the row"
    );
    let s = Sampler::new(params(1.0, 0, 1.0, 0.0)).unwrap();
    let bad = Candidates { ids: &[1], ..c };
    assert!(matches!(
        s.distribution_from_candidates(&bad),
        Err(crate::SpecError::CandidateMismatch { ids: 1, .. })
    ));
    let empty = Candidates {
        ids: &[],
        logits: &[],
        complete: true,
        sum: 0.0,
    };
    assert!(
        s.distribution_from_candidates(&empty).is_err(),
        "every logit NaN"
    );
    let greedy = Sampler::new(SamplingParams::default()).unwrap();
    let d = greedy
        .distribution_from_candidates(&empty)
        .unwrap()
        .unwrap();
    assert_eq!(
        d.tokens,
        vec![0],
        "greedy on a NaN row picks 0, as argmax does"
    );
}

proptest! {
    /// Sampling from a row's `top_k` most likely tokens (what a pass returns for
    /// `LogitRows::Top`) draws what sampling from the full row draws, with the same
    /// randomness.
    #[test]
    fn sampling_from_the_top_tokens_draws_as_the_full_row(
        raw in prop::collection::vec(-8i32..8, 20..300),
        temperature in prop::sample::select(vec![0.0f32, 0.3, 1.0, 1.7]),
        top_k in prop::sample::select(vec![1usize, 5, 40, 400]),
        top_p in prop::sample::select(vec![0.2f32, 0.6, 0.95, 1.0]),
        min_p in prop::sample::select(vec![0.0f32, 0.05, 0.3]),
        seed in 0u64..1000,
    ) {
        let logits: Vec<f32> = raw.iter().map(|&v| v as f32 * 0.75).collect();
        let p = SamplingParams { seed, ..params(temperature, top_k, top_p, min_p) };
        let (mut full, mut top) = (Sampler::new(p).unwrap(), Sampler::new(p).unwrap());
        prop_assert!(top.top_tokens_suffice());
        let row = TopLogits::of(&logits, top_k);
        for _ in 0..4 {
            prop_assert_eq!(full.sample(&logits).unwrap(), top.sample_top(&row).unwrap());
        }
        prop_assert_eq!(full.uniform(), top.uniform());
    }
}

/// Without `top_k`, or with a penalty, the top tokens do not determine a sampled
/// draw: a typed error.
#[test]
fn sampling_from_the_top_tokens_needs_top_k_and_no_penalty() {
    let row = TopLogits::of(&[0.0, 1.0, 2.0], 2);
    let mut open = Sampler::new(params(0.8, 0, 1.0, 0.0)).unwrap();
    assert!(!open.top_tokens_suffice());
    assert!(matches!(
        open.sample_top(&row),
        Err(crate::SpecError::NeedsFullRow)
    ));
    let penalised = SamplingParams {
        repetition_penalty: 1.2,
        ..params(0.8, 2, 1.0, 0.0)
    };
    assert!(matches!(
        Sampler::new(penalised).unwrap().sample_top(&row),
        Err(crate::SpecError::NeedsFullRow)
    ));
    // Greedy needs neither: the first candidate.
    assert_eq!(
        Sampler::new(params(0.0, 0, 1.0, 0.0))
            .unwrap()
            .sample_top(&row)
            .unwrap(),
        2
    );
}
