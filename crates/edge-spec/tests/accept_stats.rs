//! Tree acceptance is lossless: with a synthetic target over a vocabulary of 5, random
//! drafted trees verified by `accept` and then continued autoregressively emit token
//! pairs distributed exactly as plain sampling from the target (`p(x) · p(y | x)`),
//! by a chi-square test at p = 0.001. Deliberately wrong acceptance rules (accept
//! with probability min(1, 2·p); or draw the residual without conditioning on the
//! rejected drafts) must fail the same test by far, showing its power.

use edge_core::rng::SeededRng;
use edge_spec::{Acceptance, DraftTree, Result, Sampler, SamplingParams, accept};

const VOCAB: usize = 5;
const PROMPT: [u32; 3] = [4, 0, 2];
const RUNS: u64 = 20_000;

/// χ² quantiles at 0.999 for 1 … 24 degrees of freedom.
const CHI2_999: [f64; 24] = [
    10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588, 31.264, 32.909,
    34.528, 36.123, 37.697, 39.252, 40.790, 42.312, 43.820, 45.315, 46.797, 48.268, 49.728, 51.179,
];

/// splitmix64's finaliser, as a hash (of a context, or of a run's number into its
/// sampler's seed), not as a generator.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The synthetic target: logits in [-3.5, 2.5] from a hash of the context, so a
/// context has a few likely tokens and a few rare ones.
fn target_logits(context: &[u32]) -> [f32; VOCAB] {
    let h = context
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &t| mix(h ^ u64::from(t)));
    std::array::from_fn(|v| (mix(h ^ v as u64) >> 40) as f32 / (1 << 24) as f32 * 6.0 - 3.5)
}

/// A random tree of depth ≤ 3 (0 included: a bare root), 1–3 children per inner
/// node with distinct tokens, in breadth-first order. Like a real drafter's, the
/// children are the top of a noisy copy of the target (logits plus uniform noise in
/// [-2, 2]), likelier first.
fn random_tree(rng: &mut SeededRng) -> DraftTree {
    let max_depth = rng.below(4);
    let mut tree = DraftTree {
        tokens: vec![PROMPT[PROMPT.len() - 1]],
        parents: vec![None],
    };
    let mut depth = vec![0];
    let mut i = 0;
    while i < tree.tokens.len() {
        if depth[i] < max_depth {
            let target = target_logits(&context(&tree, i));
            let draft: Vec<f32> = (0..VOCAB)
                .map(|v| target[v] + rng.below(4001) as f32 / 1000.0 - 2.0)
                .collect();
            let mut ranked: Vec<u32> = (0..VOCAB as u32).collect();
            ranked.sort_by(|&a, &b| draft[b as usize].total_cmp(&draft[a as usize]));
            for &token in &ranked[..1 + rng.below(3)] {
                tree.tokens.push(token);
                tree.parents.push(Some(i));
                depth.push(depth[i] + 1);
            }
        }
        i += 1;
    }
    tree
}

/// The context after node `n`: the prompt and the drafted tokens down to `n`.
fn context(tree: &DraftTree, mut n: usize) -> Vec<u32> {
    let mut drafted = Vec::new();
    while let Some(p) = tree.parents[n] {
        drafted.push(tree.tokens[n]);
        n = p;
    }
    drafted.reverse();
    [&PROMPT[..], &drafted].concat()
}

type Rule = fn(&DraftTree, &[f32], usize, &mut Sampler) -> Result<Acceptance>;

/// A wrong acceptance rule, `accept` with one of two classic mistakes: `DOUBLED` keeps
/// a draft with probability min(1, 2·p) instead of p; `!CONDITIONED` does not condition
/// `p` on a rejected draft, so the residual draw can emit it again.
fn accept_wrong<const DOUBLED: bool, const CONDITIONED: bool>(
    tree: &DraftTree,
    logits: &[f32],
    vocab: usize,
    sampler: &mut Sampler,
) -> Result<Acceptance> {
    let (mut path, mut node) = (vec![0], 0);
    'walk: loop {
        let mut p = sampler.distribution(&logits[node * vocab..][..vocab])?;
        let mut rejected = tree.tokens[node];
        for c in (node + 1..tree.tokens.len()).filter(|&c| tree.parents[c] == Some(node)) {
            let keep = p.prob(tree.tokens[c]) * if DOUBLED { 2.0 } else { 1.0 };
            if sampler.uniform() < keep.min(1.0) {
                path.push(c);
                node = c;
                continue 'walk;
            }
            if CONDITIONED {
                p.remove(tree.tokens[c]);
            }
            rejected = tree.tokens[c];
        }
        let next = p.draw(sampler.uniform()).unwrap_or(rejected);
        return Ok(Acceptance { path, next });
    }
}

/// Verifies one random tree with `rule` and continues from the target to 3 tokens.
fn emit(tree: &DraftTree, sampler: &mut Sampler, rule: Rule) -> Vec<u32> {
    let logits: Vec<f32> = (0..tree.tokens.len())
        .flat_map(|n| target_logits(&context(tree, n)))
        .collect();
    let a = rule(tree, &logits, VOCAB, sampler).unwrap();
    assert!(a.path.windows(2).all(|w| tree.parents[w[1]] == Some(w[0])));
    let mut out: Vec<u32> = a.path[1..].iter().map(|&n| tree.tokens[n]).collect();
    out.push(a.next);
    while out.len() < 3 {
        let next = sampler.sample(&target_logits(&[&PROMPT[..], &out].concat()));
        out.push(next.unwrap());
    }
    out
}

/// χ² of the first two emitted tokens over `RUNS` runs against `p(x) · p(y | x)`, and
/// the critical value at p = 0.001 for its degrees of freedom (cells with expected
/// count < 5 pooled).
fn chi_square(base: SamplingParams, rule: Rule) -> (f64, f64) {
    let exact = Sampler::new(base).unwrap();
    let first = exact.distribution(&target_logits(&PROMPT)).unwrap();
    let mut expected = [0.0f64; VOCAB * VOCAB];
    for (&x, &px) in first.tokens.iter().zip(&first.probs) {
        let second = exact
            .distribution(&target_logits(&[&PROMPT[..], &[x]].concat()))
            .unwrap();
        for (&y, &py) in second.tokens.iter().zip(&second.probs) {
            expected[x as usize * VOCAB + y as usize] = RUNS as f64 * f64::from(px * py);
        }
    }
    let mut observed = [0u64; VOCAB * VOCAB];
    // The trees' own generator, independent of the samplers'.
    let mut trees = SeededRng::from_seed(0x5eed);
    for run in 0..RUNS {
        let tree = random_tree(&mut trees);
        let seed = mix(run ^ base.seed);
        let mut sampler = Sampler::new(SamplingParams { seed, ..base }).unwrap();
        let out = emit(&tree, &mut sampler, rule);
        observed[out[0] as usize * VOCAB + out[1] as usize] += 1;
    }
    // (observed, expected) cells, the small ones pooled until every cell reaches 5.
    let mut cells: Vec<(f64, f64)> = Vec::new();
    for (&o, &e) in observed.iter().zip(&expected) {
        if e == 0.0 {
            // A pair plain sampling never emits: any occurrence fails outright.
            if o > 0 {
                return (f64::INFINITY, 0.0);
            }
        } else {
            cells.push((o as f64, e));
        }
    }
    cells.sort_by(|a, b| a.1.total_cmp(&b.1));
    while cells.len() > 1 && cells[0].1 < 5.0 {
        let (o, e) = cells.remove(0);
        cells[0].0 += o;
        cells[0].1 += e;
        cells.sort_by(|a, b| a.1.total_cmp(&b.1));
    }
    assert!(cells.len() >= 2, "too few cells for a test");
    let chi2 = cells.iter().map(|&(o, e)| (o - e).powi(2) / e).sum();
    (chi2, CHI2_999[cells.len() - 2])
}

fn check(base: SamplingParams) {
    let (chi2, critical) = chi_square(base, accept);
    let (doubled, _) = chi_square(base, accept_wrong::<true, true>);
    let (unconditioned, _) = chi_square(base, accept_wrong::<false, false>);
    println!(
        "{base:?}: critical {critical:.2}; χ² accept {chi2:.2}, \
         min(1, 2p) rule {doubled:.2}, unconditioned residual {unconditioned:.2}"
    );
    assert!(chi2 < critical, "accept: χ² {chi2:.2} ≥ {critical:.2}");
    assert!(doubled > 5.0 * critical, "min(1, 2p): χ² only {doubled:.2}");
    assert!(
        unconditioned > 5.0 * critical,
        "no conditioning: χ² only {unconditioned:.2}"
    );
}

#[test]
fn tree_acceptance_is_lossless_at_temperature_1() {
    check(SamplingParams {
        temperature: 1.0,
        seed: 1,
        ..Default::default()
    });
}

#[test]
fn tree_acceptance_is_lossless_with_top_k_3() {
    check(SamplingParams {
        temperature: 1.0,
        top_k: 3,
        seed: 2,
        ..Default::default()
    });
}

#[test]
fn tree_acceptance_is_lossless_with_top_p_0_8() {
    check(SamplingParams {
        temperature: 1.0,
        top_p: 0.8,
        seed: 3,
        ..Default::default()
    });
}
