//! The gated delta rule over a token tree, from the committed state, without a state
//! per node.
//!
//! Along a path `a₁ … a_m` from the committed state `S₀`, with `G_a` the sum of the
//! log decays `g` on the path up to `a`, the state after `a` is
//! `S_a = e^{G_a} S₀ + Σ_{b ≤ a} e^{G_a − G_b} k_b δ_bᵀ`. So a node `n` with parent
//! `p` needs only `S₀ᵀk_n` and `S₀ᵀq_n` (one sweep over `S₀` for the whole tree) and
//! its ancestors' `k_b`, `δ_b`:
//! `S_pᵀk_n = e^{G_p} S₀ᵀk_n + Σ_{b ≤ p} e^{G_p − G_b} (k_b·k_n) δ_b`, then
//! `δ_n = β_n (v_n − e^{g_n} S_pᵀk_n)` and `o_n = e^{g_n} S_pᵀq_n + (k_n·q_n) δ_n`,
//! the single-token recurrence's update and output. Committing a path is one more
//! sweep: `S ← e^{G_m} S₀ + Σ_b e^{G_m − G_b} k_b δ_bᵀ`.

use super::simd::{axpy, dispatch, dot, flush_negligible, weight_exp};

/// One value head's inputs for the rows of a tree (row-major per node): `q`, `k`
/// `[n, dk]` (normalised, `q` scaled), `v` `[n, dv]`, `beta`, `g` `[n]`, and each
/// row's parent (`None`: continues the committed state).
pub struct TreeHead<'a> {
    /// Queries.
    pub q: &'a [f32],
    /// Keys.
    pub k: &'a [f32],
    /// Values.
    pub v: &'a [f32],
    /// Write strengths.
    pub beta: &'a [f32],
    /// Log decays.
    pub g: &'a [f32],
    /// Parents (earlier rows).
    pub parents: &'a [Option<u32>],
    /// Key width.
    pub dk: usize,
    /// Value width.
    pub dv: usize,
}

/// Every row's output (`[n, dv]` into `out`), from the committed `state` (`[dk, dv]`),
/// which is only read.
pub fn outputs(x: &TreeHead, state: &[f32], out: &mut [f32]) {
    dispatch!(outputs_portable, (x: &TreeHead, state: &[f32], out: &mut [f32]) {
        let n = x.beta.len();
        let (sk, sq) = project(x, state, true);
        deltas(x, &sk, Some((&sq, &mut *out)));
        debug_assert_eq!(out.len(), n * x.dv);
    })
}

/// Advances `state` along `x`'s rows, which form one path root first (each row's
/// parent is the row before it).
pub fn advance(x: &TreeHead, state: &mut [f32]) {
    dispatch!(advance_portable, (x: &TreeHead, state: &mut [f32]) {
        let (dk, dv) = (x.dk, x.dv);
        let n = x.beta.len();
        let (sk, _) = project(x, state, false);
        let (delta, cum) = deltas(x, &sk, None);
        let last = cum[n - 1];
        let weights: Vec<f32> = cum.iter().map(|&c| weight_exp(last - c)).collect();
        let decay = weight_exp(last);
        for (r, row) in state.chunks_exact_mut(dv).enumerate().take(dk) {
            row.iter_mut().for_each(|s| *s *= decay);
            for b in 0..n {
                axpy(weights[b] * x.k[b * dk + r], &delta[b * dv..][..dv], row);
            }
            row.iter_mut().for_each(|s| *s = flush_negligible(*s));
        }
    })
}

/// `S₀ᵀk` of every row (and `S₀ᵀq` when `queries`), `[n, dv]` each: one sweep over
/// the state rows, each row meeting every node while it is in L1.
#[inline(always)]
fn project(x: &TreeHead, state: &[f32], queries: bool) -> (Vec<f32>, Vec<f32>) {
    let (dk, dv) = (x.dk, x.dv);
    let n = x.beta.len();
    let mut sk = vec![0.0f32; n * dv];
    let mut sq = vec![0.0f32; if queries { n * dv } else { 0 }];
    for (r, row) in state.chunks_exact(dv).enumerate().take(dk) {
        for i in 0..n {
            axpy(x.k[i * dk + r], row, &mut sk[i * dv..][..dv]);
            if queries {
                axpy(x.q[i * dk + r], row, &mut sq[i * dv..][..dv]);
            }
        }
    }
    (sk, sq)
}

/// Each row's update `δ` (`[n, dv]`) and cumulative log decay; with `outputs`
/// (`S₀ᵀq` and the output buffer), each row's output too.
#[inline(always)]
fn deltas(
    x: &TreeHead,
    sk: &[f32],
    mut outputs: Option<(&[f32], &mut [f32])>,
) -> (Vec<f32>, Vec<f32>) {
    let (dk, dv) = (x.dk, x.dv);
    let n = x.beta.len();
    let mut delta = vec![0.0f32; n * dv];
    let mut cum = vec![0.0f32; n];
    let mut u = vec![0.0f32; dv];
    let mut w = vec![0.0f32; dv];
    let mut path = Vec::new();
    for i in 0..n {
        let parent = x.parents.get(i).copied().flatten().map(|p| p as usize);
        let cum_p = parent.map_or(0.0, |p| cum[p]);
        cum[i] = cum_p + x.g[i];
        // The ancestors, root first.
        path.clear();
        let mut a = parent;
        while let Some(b) = a {
            path.push(b);
            a = x.parents.get(b).copied().flatten().map(|p| p as usize);
        }
        let (ki, qi) = (&x.k[i * dk..][..dk], &x.q[i * dk..][..dk]);
        let base = weight_exp(cum_p);
        u.iter_mut()
            .zip(&sk[i * dv..][..dv])
            .for_each(|(u, &s)| *u = base * s);
        if let Some((sq, _)) = &outputs {
            w.iter_mut()
                .zip(&sq[i * dv..][..dv])
                .for_each(|(w, &s)| *w = base * s);
        }
        for &b in path.iter().rev() {
            let kb = &x.k[b * dk..][..dk];
            let weight = weight_exp(cum_p - cum[b]);
            let db = &delta[b * dv..][..dv];
            axpy(weight * dot(kb, ki), db, &mut u);
            if outputs.is_some() {
                axpy(weight * dot(kb, qi), db, &mut w);
            }
        }
        let decay = weight_exp(x.g[i]);
        let di = &mut delta[i * dv..][..dv];
        for ((d, &vj), &uj) in di.iter_mut().zip(&x.v[i * dv..][..dv]).zip(&u) {
            *d = x.beta[i] * (vj - decay * uj);
        }
        if let Some((_, out)) = outputs.as_mut() {
            let kq = dot(ki, qi);
            let o = &mut out[i * dv..][..dv];
            for ((o, &wj), &dj) in o.iter_mut().zip(&w).zip(&delta[i * dv..][..dv]) {
                *o = decay * wj + kq * dj;
            }
        }
    }
    (delta, cum)
}

#[cfg(test)]
mod tests {
    use super::super::delta_rule::{HeadInputs, recurrent};
    use super::*;

    fn wave(i: usize, f: f32) -> f32 {
        ((i as f32) * f).sin()
    }

    /// Against the single-token recurrence run along each row's path.
    #[test]
    fn rows_and_paths_match_the_token_recurrence() {
        let (dk, dv) = (16, 8);
        let parents = [
            None,
            Some(0),
            Some(0),
            Some(1),
            Some(1),
            Some(3),
            None,
            Some(6),
        ];
        let n = parents.len();
        let norm = |v: &mut [f32]| {
            let s = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= s);
        };
        let mut q: Vec<f32> = (0..n * dk).map(|i| wave(i, 0.7)).collect();
        let mut k: Vec<f32> = (0..n * dk).map(|i| wave(i, 1.9)).collect();
        q.chunks_mut(dk).for_each(norm);
        k.chunks_mut(dk).for_each(norm);
        let v: Vec<f32> = (0..n * dv).map(|i| wave(i, 0.31)).collect();
        let beta: Vec<f32> = (0..n).map(|i| 0.3 + 0.5 * wave(i, 2.1).abs()).collect();
        let g: Vec<f32> = (0..n).map(|i| -0.05 - 0.4 * wave(i, 1.3).abs()).collect();
        let state: Vec<f32> = (0..dk * dv).map(|i| 0.5 * wave(i, 0.17)).collect();
        let head = TreeHead {
            q: &q,
            k: &k,
            v: &v,
            beta: &beta,
            g: &g,
            parents: &parents,
            dk,
            dv,
        };
        let mut out = vec![0.0; n * dv];
        outputs(&head, &state, &mut out);
        for i in 0..n {
            let mut path = vec![i];
            while let Some(p) = parents[*path.last().unwrap()] {
                path.push(p as usize);
            }
            path.reverse();
            let pick = |x: &[f32], w: usize| -> Vec<f32> {
                path.iter()
                    .flat_map(|&r| x[r * w..][..w].to_vec())
                    .collect()
            };
            let (pq, pk, pv) = (pick(&q, dk), pick(&k, dk), pick(&v, dv));
            let (pb, pg) = (pick(&beta, 1), pick(&g, 1));
            let inp = HeadInputs {
                q: &pq,
                k: &pk,
                v: &pv,
                beta: &pb,
                g: &pg,
                dk,
                dv,
            };
            let mut s = state.clone();
            let mut o = vec![0.0; path.len() * dv];
            recurrent(&inp, &mut s, &mut o);
            let got = &out[i * dv..][..dv];
            let want = &o[(path.len() - 1) * dv..];
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() < 1e-5, "row {i}: {a} vs {b}");
            }
            // Advancing along the path gives the recurrence's state.
            let chain: Vec<Option<u32>> = (0..path.len())
                .map(|j| j.checked_sub(1).map(|p| p as u32))
                .collect();
            let along = TreeHead {
                q: &pq,
                k: &pk,
                v: &pv,
                beta: &pb,
                g: &pg,
                parents: &chain,
                dk,
                dv,
            };
            let mut advanced = state.clone();
            advance(&along, &mut advanced);
            for (a, b) in advanced.iter().zip(&s) {
                assert!((a - b).abs() < 1e-5, "state after row {i}: {a} vs {b}");
            }
        }
    }
}
