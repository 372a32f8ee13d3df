//! The CPU Gated DeltaNet kernels for token trees: each row's conv window and
//! recurrent state follow its ancestor path from the committed state, which stays
//! unchanged; a commit then advances the state along the accepted path from the kept
//! inputs.
//!
//! The conv runs the one-token conv's operations on each row's window. The delta rule
//! never builds a state per row: [`delta_tree`] computes every row from the committed
//! state and its ancestors' low-rank updates (one sweep over the state for the whole
//! tree), and a commit applies the accepted path's updates in one more sweep.

use super::delta_tree::{self, TreeHead};
use super::gdn;
use super::norm::{gated_rms_norm, l2_norm, sigmoid, silu, softplus};
use crate::Result;
use crate::backend::{ForwardPlan, GdnParams};
use edge_core::par;
use edge_kvcache::memory::HostRecurrent;

/// What the kernels read of a layer.
type Layer<'a> = GdnParams<'a, super::Cpu>;

/// Conv + SiLU of each tree span's rows, each over the window of its own path (the
/// committed window, then its ancestors' rows); writes the span's head-major `q`, `k`
/// (L2-normalised, `q` scaled) and `v` blocks as [`gdn::conv`] lays them out.
pub fn conv(
    layer: &Layer<'_>,
    state: &mut HostRecurrent,
    plan: &ForwardPlan,
    qkv: &[f32],
    (q, k, v): (&mut [f32], &mut [f32], &mut [f32]),
) -> Result<()> {
    let c = layer.shape.channels();
    let (hk, hv, dk, dv) = gdn::dims(layer);
    let hist = layer.shape.kernel - 1;
    let q_scale = 1.0 / (dk as f32).sqrt();
    let slots = state.slots_mut(&plan.slots())?;
    let mut out = vec![0.0f32; c];
    for (span, (window, _)) in plan.spans.iter().zip(&slots) {
        let Some(tree) = &span.tree else { continue };
        let (n, r0) = (span.len(), span.rows.start);
        for i in 0..n {
            let path = tree.path(i);
            // The `kernel` rows ending at row i: committed window rows, then path rows.
            let virt = |t: usize| -> &[f32] {
                let start = (hist + path.len()) - layer.shape.kernel + t;
                match start.checked_sub(hist) {
                    Some(p) => &qkv[(r0 + path[p]) * c..][..c],
                    None => &window[start * c..][..c],
                }
            };
            out.fill(0.0);
            for t in 0..layer.shape.kernel {
                let (w, x) = (&layer.conv_taps[t * c..][..c], virt(t));
                for ((o, &wc), &xc) in out.iter_mut().zip(w).zip(x) {
                    *o += wc * xc;
                }
            }
            out.iter_mut().for_each(|o| *o = silu(*o));
            // Scatter into the span's head-major blocks: q heads, k heads, v heads.
            for head in 0..2 * hk + hv {
                let (dst, d, at, scale) = match head {
                    h if h < hk => (&mut *q, dk, (r0 * hk + h * n + i) * dk, Some(q_scale)),
                    h if h < 2 * hk => {
                        let h = h - hk;
                        (&mut *k, dk, (r0 * hk + h * n + i) * dk, Some(1.0))
                    }
                    h => {
                        let h = h - 2 * hk;
                        (&mut *v, dv, (r0 * hv + h * n + i) * dv, None)
                    }
                };
                let first = if head < 2 * hk {
                    head * dk
                } else {
                    2 * hk * dk + (head - 2 * hk) * dv
                };
                let row = &mut dst[at..][..d];
                row.copy_from_slice(&out[first..][..d]);
                if let Some(scale) = scale {
                    l2_norm(row);
                    row.iter_mut().for_each(|e| *e *= scale);
                }
            }
        }
    }
    Ok(())
}

/// The delta rule and gated norm of each tree span's rows: row `i` continues the
/// committed state along its path ([`delta_tree`]), which stays unchanged; writes its
/// `[value_heads · value_dim]` output row of `out` (token-major).
pub fn recurrence(
    layer: &Layer<'_>,
    state: &mut HostRecurrent,
    plan: &ForwardPlan,
    (x, z): (gdn::Inputs<'_>, &[f32]),
    out: &mut [f32],
) -> Result<()> {
    let (hk, hv, dk, dv) = gdn::dims(layer);
    let slots = state.slots_mut(&plan.slots())?;
    let mut items = Vec::new();
    for (span, (_, committed)) in plan.spans.iter().zip(&slots) {
        if let Some(tree) = &span.tree {
            for j in 0..hv {
                items.push((span, tree, j, &committed[j * dk * dv..][..dk * dv]));
            }
        }
    }
    // One output block per item, so the items run through `par::for_each` (the
    // decode step's spinning team when there is one).
    let mut results: Vec<Vec<f32>> = (items.iter())
        .map(|(span, ..)| vec![0.0f32; span.len() * dv])
        .collect();
    let x = &x;
    let work: Vec<_> = items.iter().zip(results.iter_mut()).collect();
    par::for_each(work, |(&(span, tree, j, committed), o)| {
        let (n, r0) = (span.len(), span.rows.start);
        let rows: Vec<usize> = (r0..r0 + n).collect();
        let (beta, g) = gates(layer, x.b, x.a, j, &rows);
        let kh = j / (hv / hk);
        let head = TreeHead {
            q: &x.q[(r0 * hk + kh * n) * dk..][..n * dk],
            k: &x.k[(r0 * hk + kh * n) * dk..][..n * dk],
            v: &x.v[(r0 * hv + j * n) * dv..][..n * dv],
            beta: &beta,
            g: &g,
            parents: &tree.parents,
            dk,
            dv,
        };
        delta_tree::outputs(&head, committed, o);
    });
    for (&(span, _, j, _), o) in items.iter().zip(&results) {
        for (i, row) in o.chunks_exact(dv).enumerate() {
            let r = span.rows.start + i;
            let y = &mut out[(r * hv + j) * dv..][..dv];
            y.copy_from_slice(row);
            gated_rms_norm(
                y,
                &z[(r * hv + j) * dv..][..dv],
                layer.norm_weight,
                layer.eps,
            );
        }
    }
    Ok(())
}

/// Value head `j`'s write strengths `β` and log decays `g` of batch `rows`.
fn gates(
    layer: &Layer<'_>,
    b: &[f32],
    a: &[f32],
    j: usize,
    rows: &[usize],
) -> (Vec<f32>, Vec<f32>) {
    let hv = layer.shape.value_heads;
    let beta = rows.iter().map(|&r| sigmoid(b[r * hv + j])).collect();
    let g = (rows.iter())
        .map(|&r| layer.neg_a[j] * softplus(a[r * hv + j] + layer.dt_bias[j]))
        .collect();
    (beta, g)
}

/// Advances each (chain) span's state over its rows (root first) by the tree
/// formulation's commit ([`delta_tree::advance`]): the state a verification of those
/// rows as a tree path continued from, so a commit stays consistent with the outputs
/// already verified.
pub fn advance(
    layer: &Layer<'_>,
    state: &mut HostRecurrent,
    plan: &ForwardPlan,
    x: gdn::Inputs<'_>,
) -> Result<()> {
    let (hk, hv, dk, dv) = gdn::dims(layer);
    let mut slots = state.slots_mut(&plan.slots())?;
    let mut items = Vec::with_capacity(plan.spans.len() * hv);
    for (span, (_, recurrent)) in plan.spans.iter().zip(slots.iter_mut()) {
        debug_assert!(span.tree.is_none(), "advance runs chains");
        let heads = recurrent.chunks_mut(dk * dv).enumerate();
        items.extend(heads.map(|(j, s)| (span, j, s)));
    }
    par::for_each(items, |(span, j, s)| {
        let (n, r0) = (span.len(), span.rows.start);
        let rows: Vec<usize> = (r0..r0 + n).collect();
        let (beta, g) = gates(layer, x.b, x.a, j, &rows);
        let chain: Vec<Option<u32>> = (0..n as u32).map(|i| i.checked_sub(1)).collect();
        let kh = j / (hv / hk);
        let head = TreeHead {
            q: &x.q[(r0 * hk + kh * n) * dk..][..n * dk],
            k: &x.k[(r0 * hk + kh * n) * dk..][..n * dk],
            v: &x.v[(r0 * hv + j * n) * dv..][..n * dv],
            beta: &beta,
            g: &g,
            parents: &chain,
            dk,
            dv,
        };
        delta_tree::advance(&head, s);
    });
    Ok(())
}
