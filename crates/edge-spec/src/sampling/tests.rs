//! The sampler's unit tests.

use super::*;

fn params(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        top_k,
        top_p,
        seed,
        ..SamplingParams::default()
    }
}

#[test]
fn greedy_is_argmax() {
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    assert!(s.is_greedy());
    assert_eq!(s.sample(&[0.1, 3.0, 2.0]).unwrap(), 1);
    assert_eq!(argmax(&[f32::NAN, 1.0, 1.0]), 1);
    let d = s.distribution(&[0.1, 3.0, 2.0]).unwrap();
    assert_eq!((d.tokens, d.probs), (vec![1], vec![1.0]));
}

#[test]
fn seeded_sampling_is_reproducible_and_follows_distribution() {
    let params = params(1.0, 0, 1.0, 42);
    let logits = [0.0f32, (3.0f32).ln()];
    let draw = |params| {
        let mut s = Sampler::new(params).unwrap();
        (0..4000)
            .map(|_| s.sample(&logits).unwrap())
            .collect::<Vec<_>>()
    };
    let a = draw(params);
    assert_eq!(a, draw(params));
    let ones = a.iter().filter(|&&t| t == 1).count() as f32 / 4000.0;
    assert!((ones - 0.75).abs() < 0.03, "{ones}");
}

#[test]
fn top_k_and_top_p_restrict_choices() {
    let logits = [5.0, 4.9, -10.0, 4.8];
    let mut s = Sampler::new(params(1.0, 2, 1.0, 1)).unwrap();
    for _ in 0..200 {
        assert!(s.sample(&logits).unwrap() < 2);
    }
    let mut s = Sampler::new(params(1.0, 0, 0.01, 1)).unwrap();
    for _ in 0..50 {
        assert_eq!(s.sample(&logits).unwrap(), 0);
    }
}

#[test]
fn bad_params_are_errors() {
    for (p, param) in [
        (params(-1.0, 0, 1.0, 0), "temperature"),
        (params(f32::NAN, 0, 1.0, 0), "temperature"),
        (params(0.0, 0, 0.0, 0), "top_p"),
    ] {
        assert!(matches!(
            Sampler::new(p),
            Err(crate::SpecError::InvalidSampling { param: got, .. }) if got == param
        ));
    }
    let mut s = Sampler::new(SamplingParams::default()).unwrap();
    assert!(matches!(
        s.sample(&[]),
        Err(crate::SpecError::NothingToSample { .. })
    ));
    assert!(matches!(
        s.distribution(&[]),
        Err(crate::SpecError::NothingToSample { .. })
    ));
}

#[test]
fn distribution_is_sorted_normalised_and_cut() {
    let s = Sampler::new(params(1.0, 3, 1.0, 0)).unwrap();
    let d = s.distribution(&[0.0, 2.0, -1.0, 1.0, -200.0]).unwrap();
    assert_eq!(d.tokens, vec![1, 3, 0]);
    assert!((d.probs.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    assert!(d.probs.windows(2).all(|w| w[0] >= w[1]));
    assert_eq!(d.prob(2), 0.0);
    // exp(-200) underflows: the token is left out of the support.
    let s = Sampler::new(params(1.0, 0, 1.0, 0)).unwrap();
    assert_eq!(s.distribution(&[0.0, -200.0]).unwrap().tokens, vec![0]);
    // top_p 0.6 over [0.5, 0.3, 0.2] keeps two tokens, renormalised.
    let s = Sampler::new(params(1.0, 0, 0.6, 0)).unwrap();
    let d = s
        .distribution(&[0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()])
        .unwrap();
    assert_eq!(d.tokens, vec![0, 1]);
    assert!((d.prob(0) - 0.625).abs() < 1e-6 && (d.prob(1) - 0.375).abs() < 1e-6);
    // NaN logits are never chosen; all NaN is an error.
    assert_eq!(s.distribution(&[f32::NAN, 1.0]).unwrap().tokens, vec![1]);
    assert!(matches!(
        s.distribution(&[f32::NAN]),
        Err(crate::SpecError::NothingToSample { .. })
    ));
}

#[test]
fn remove_renormalises_and_can_empty() {
    let mut d = Distribution {
        tokens: vec![4, 2, 7],
        probs: vec![0.5, 0.3, 0.2],
    };
    d.remove(9);
    assert_eq!(d.tokens, vec![4, 2, 7]);
    d.remove(4);
    assert_eq!(d.tokens, vec![2, 7]);
    assert!((d.prob(2) - 0.6).abs() < 1e-6 && (d.prob(7) - 0.4).abs() < 1e-6);
    assert_eq!(
        (d.draw(0.0), d.draw(0.59), d.draw(0.61)),
        (Some(2), Some(2), Some(7))
    );
    d.remove(2);
    d.remove(7);
    assert!(d.is_empty());
    assert_eq!(d.draw(0.5), None);
}

/// The sampler as it was before `distribution` existed: `r = u · mass` over the
/// kept prefix of the top-k softmax (with ties now ordered by the lower id, as the
/// sampler and the device's top-k order them).
fn legacy_sample(s: &mut Sampler, logits: &[f32]) -> u32 {
    let p = *s.params();
    if p.temperature == 0.0 {
        return argmax(logits);
    }
    let mut order: Vec<u32> = (0..logits.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        (logits[b as usize].total_cmp(&logits[a as usize])).then_with(|| a.cmp(&b))
    });
    if p.top_k > 0 {
        order.truncate(p.top_k);
    }
    let max = logits[order[0] as usize];
    let mut probs: Vec<f32> = order
        .iter()
        .map(|&i| ((logits[i as usize] - max) / p.temperature).exp())
        .collect();
    let total: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|q| *q /= total);
    let mut keep = probs.len();
    let mut cum = 0.0;
    for (i, q) in probs.iter().enumerate() {
        cum += q;
        if cum >= p.top_p {
            keep = i + 1;
            break;
        }
    }
    let mass: f32 = probs[..keep].iter().sum();
    let mut r = s.uniform() * mass;
    for (i, q) in probs[..keep].iter().enumerate() {
        r -= q;
        if r <= 0.0 {
            return order[i];
        }
    }
    order[keep - 1]
}

#[test]
fn sampling_draws_the_same_tokens_as_before_the_refactor() {
    let mut rng = Sampler::new(params(1.0, 0, 1.0, 7)).unwrap();
    let mut draws = 0;
    for (case, (t, k, p)) in [0.0, 0.3, 1.0, 2.5]
        .into_iter()
        .flat_map(|t| [0, 1, 3, 20].map(move |k| (t, k)))
        .flat_map(|(t, k)| [1.0, 0.9, 0.5].map(move |p| (t, k, p)))
        .enumerate()
    {
        let pr = params(t, k, p, case as u64);
        let (mut new, mut old) = (Sampler::new(pr).unwrap(), Sampler::new(pr).unwrap());
        for row in 0..100 {
            let vocab = 1 + row % 40;
            // Quantised logits (ties) over a wide range (underflow at low temperature).
            let logits: Vec<f32> = (0..vocab)
                .map(|_| ((rng.uniform() * 40.0).floor() - 20.0) * 0.5)
                .collect();
            for _ in 0..20 {
                assert_eq!(
                    new.sample(&logits).unwrap(),
                    legacy_sample(&mut old, &logits)
                );
                draws += 1;
            }
        }
    }
    assert_eq!(draws, 48 * 2000);
}

#[test]
fn min_p_drops_tokens_below_a_fraction_of_the_best() {
    // Probabilities ∝ 8, 4, 1: min_p 0.25 keeps the first two (floor 2 of 8).
    let logits = [8.0f32.ln(), 4.0f32.ln(), 1.0f32.ln()];
    let s = Sampler::new(SamplingParams {
        temperature: 1.0,
        min_p: 0.25,
        ..SamplingParams::default()
    })
    .unwrap();
    let d = s.distribution(&logits).unwrap();
    assert_eq!(d.tokens, vec![0, 1]);
    assert!((d.probs[0] - 2.0 / 3.0).abs() < 1e-6);
}

#[test]
fn penalties_follow_their_definitions() {
    let logits = [2.0f32, 1.0, -1.0, 0.5];
    // Presence and frequency: generated token 0 twice, token 2 once.
    let mut s = Sampler::new(SamplingParams {
        presence_penalty: 0.5,
        frequency_penalty: 0.25,
        ..SamplingParams::default()
    })
    .unwrap();
    assert_eq!(s.sample(&logits).unwrap(), 0);
    for t in [0, 0, 2] {
        s.observe(t);
    }
    // Token 0: 2 − 0.5 − 2·0.25 = 1.0; token 2: −1 − 0.5 − 0.25 = −1.75.
    let penalised = s.history.apply(s.params(), &logits);
    assert_eq!(&penalised[..], &[1.0, 1.0, -1.75, 0.5]);
    // Repetition: prompt token 3 and generated token 0; positive logits divide,
    // negative ones multiply.
    let mut s = Sampler::new(SamplingParams {
        repetition_penalty: 2.0,
        ..SamplingParams::default()
    })
    .unwrap();
    s.set_prompt(&[3, 2]);
    s.observe(0);
    let penalised = s.history.apply(s.params(), &logits);
    assert_eq!(&penalised[..], &[1.0, 1.0, -2.0, 0.25]);
    // Greedy follows the penalised logits.
    let mut s = Sampler::new(SamplingParams {
        frequency_penalty: 2.0,
        ..SamplingParams::default()
    })
    .unwrap();
    s.observe(0);
    assert_eq!(s.sample(&logits).unwrap(), 1);
    assert!(s.params().has_penalties());
    assert!(!SamplingParams::default().has_penalties());
    for bad in [
        SamplingParams {
            presence_penalty: 2.5,
            ..SamplingParams::default()
        },
        SamplingParams {
            repetition_penalty: 0.0,
            ..SamplingParams::default()
        },
        SamplingParams {
            min_p: 1.5,
            ..SamplingParams::default()
        },
    ] {
        assert!(
            matches!(Sampler::new(bad), Err(SpecError::InvalidSampling { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn logprobs_are_the_models_log_softmax() {
    let logits = [1.0f32, 3.0, 2.0, 3.0];
    let e = TokenLogprob::of(&logits, 2, 2);
    let z: f32 = logits.iter().map(|l| l.exp()).sum();
    assert!((e.logprob - (2.0f32.exp() / z).ln()).abs() < 1e-5);
    assert_eq!(e.top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3]);
}
