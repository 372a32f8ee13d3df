//! The CPU Gated DeltaNet kernels over a batch's spans: the causal conv (one task per
//! q, k and v head of each span) and the recurrence (one task per value head of each
//! span), each span carrying its own conv window and recurrent state.

use super::conv::{ConvRange, conv_range};
use super::delta_rule::{self, HeadInputs};
use super::norm::{gated_rms_norm, l2_norm, sigmoid, softplus};
use super::scratch::Scratch;
use crate::Result;
use crate::backend::{ForwardPlan, GdnParams};
use edge_core::par;
use edge_kvcache::memory::HostRecurrent;
use rayon::prelude::*;

/// What the kernels read of a layer.
type Layer<'a> = GdnParams<'a, super::Cpu>;

/// Causal depthwise conv + SiLU over each span's rows of `qkv` (`[rows, channels]`),
/// continuing from and updating its conv window (`[kernel − 1, channels]`, oldest
/// first); writes per span head-major `q`, `k` (`[heads, rows, head_dim]`, L2-normalised,
/// `q` scaled by `1/√dk`) and `v`.
pub fn conv(
    layer: &Layer<'_>,
    state: &mut HostRecurrent,
    plan: &ForwardPlan,
    qkv: &[f32],
    (q, k, v): (&mut [f32], &mut [f32], &mut [f32]),
) -> Result<()> {
    let c = layer.shape.channels();
    let (hk, hv, dk, dv) = dims(layer);
    let mut slots = state.slots_mut(&plan.slots())?;
    // Each head's output and channel range, in channel order: q, k, then v heads, for
    // every span.
    let mut ranges: Vec<(bool, usize, ConvRange<'_>)> =
        Vec::with_capacity(plan.spans.len() * (2 * hk + hv));
    let (mut q, mut k, mut v) = (q, k, v);
    for (s, (span, (conv_state, _))) in plan.spans.iter().zip(slots.iter_mut()).enumerate() {
        let n = span.len();
        let (qs, qt) = std::mem::take(&mut q).split_at_mut(hk * n * dk);
        let (ks, kt) = std::mem::take(&mut k).split_at_mut(hk * n * dk);
        let (vs, vt) = std::mem::take(&mut v).split_at_mut(hv * n * dv);
        (q, k, v) = (qt, kt, vt);
        if span.tree.is_some() {
            // Tree rows take their windows along their paths (`gdn_tree`).
            continue;
        }
        let outs = qs.chunks_mut(n * dk).map(|o| (true, o));
        let outs = outs.chain(ks.chunks_mut(n * dk).map(|o| (true, o)));
        let outs = outs.chain(vs.chunks_mut(n * dv).map(|o| (false, o)));
        let first_range = ranges.len();
        let mut first = 0;
        for (normalise, out) in outs {
            let width = out.len() / n;
            ranges.push((
                normalise,
                s,
                ConvRange {
                    first,
                    history: Vec::with_capacity(layer.shape.kernel - 1),
                    out,
                },
            ));
            first += width;
        }
        for row in conv_state.chunks_exact_mut(c) {
            let mut rest = row;
            for (_, _, range) in &mut ranges[first_range..] {
                let width = range.out.len() / n;
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(width);
                range.history.push(mine);
                rest = tail;
            }
        }
    }
    let q_scale = 1.0 / (dk as f32).sqrt();
    par::for_each(ranges, |(normalise, s, mut range)| {
        let span = &plan.spans[s];
        let input = &qkv[span.rows.start * c..span.rows.end * c];
        conv_range(input, span.len(), layer.conv_taps, &mut range);
        if normalise {
            // Query ranges come first: scale those.
            let scale = if range.first < hk * dk { q_scale } else { 1.0 };
            for row in range.out.chunks_exact_mut(dk) {
                l2_norm(row);
                row.iter_mut().for_each(|e| *e *= scale);
            }
        }
    });
    Ok(())
}

/// `(key_heads, value_heads, key_dim, value_dim)` of a layer.
pub fn dims(layer: &Layer<'_>) -> (usize, usize, usize, usize) {
    let s = layer.shape;
    (s.key_heads, s.value_heads, s.key_dim, s.value_dim)
}

/// The conv's outputs and the token-major gate inputs of a delta rule (see
/// [`crate::backend::GdnInputs`]).
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub b: &'a [f32],
    pub a: &'a [f32],
}

/// The delta rule per value head of each span (value head j reads key head
/// j / (hv / hk)), then its gated norm with output gate `z`; writes `[rows, hv · dv]`
/// token-major to `out`.
pub fn recurrence(
    layer: &Layer<'_>,
    state: &mut HostRecurrent,
    plan: &ForwardPlan,
    (x, z): (Inputs<'_>, &[f32]),
    out: &mut [f32],
    scratch: &mut Scratch,
) -> Result<()> {
    let (hk, hv, dk, dv) = dims(layer);
    let group = hv / hk;
    let t = plan.tokens();
    // Each span's cores are head-major `[hv, rows, dv]`; for one-row spans that is
    // already the token-major output. Tree spans are `gdn_tree`'s: their rows here are
    // left alone.
    let chains = || plan.spans.iter().filter(|s| s.tree.is_none());
    let all_single = chains().all(|s| s.len() == 1);
    let mut core = if all_single {
        None
    } else {
        Some(scratch.take(hv * t * dv))
    };
    let target: &mut [f32] = match &mut core {
        Some(c) => c,
        None => out,
    };
    let mut slots = state.slots_mut(&plan.slots())?;
    let mut items = Vec::with_capacity(plan.spans.len() * hv);
    let mut rest = target;
    for (span, (_, recurrent)) in plan.spans.iter().zip(slots.iter_mut()) {
        let n = span.len();
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(hv * n * dv);
        rest = tail;
        if span.tree.is_some() {
            continue;
        }
        let heads = mine.chunks_mut(n * dv).zip(recurrent.chunks_mut(dk * dv));
        items.extend(heads.enumerate().map(|(j, (o, s))| (span, j, o, s)));
    }
    par::for_each(items, |(span, j, o, s)| {
        let (r0, n) = (span.rows.start, span.len());
        let kh = j / group;
        let beta: Vec<f32> = (0..n).map(|t| sigmoid(x.b[(r0 + t) * hv + j])).collect();
        let g: Vec<f32> = (0..n)
            .map(|t| layer.neg_a[j] * softplus(x.a[(r0 + t) * hv + j] + layer.dt_bias[j]))
            .collect();
        let inp = HeadInputs {
            q: &x.q[(r0 * hk + kh * n) * dk..][..n * dk],
            k: &x.k[(r0 * hk + kh * n) * dk..][..n * dk],
            v: &x.v[(r0 * hv + j * n) * dv..][..n * dv],
            beta: &beta,
            g: &g,
            dk,
            dv,
        };
        if n == 1 {
            delta_rule::recurrent(&inp, s, o);
        } else {
            delta_rule::chunked(&inp, s, o);
        }
        for (t, row) in o.chunks_exact_mut(dv).enumerate() {
            let zrow = &z[((r0 + t) * hv + j) * dv..][..dv];
            gated_rms_norm(row, zrow, layer.norm_weight, layer.eps);
        }
    });
    // Back to token-major `[rows, hv, dv]`.
    if let Some(core) = core {
        let per_row: Vec<(usize, &mut [f32])> = out.chunks_mut(hv * dv).enumerate().collect();
        per_row.into_par_iter().for_each(|(row, yt)| {
            let Some(span) = chains().find(|s| s.rows.contains(&row)) else {
                return;
            };
            let (r0, n) = (span.rows.start, span.len());
            let t = row - r0;
            for (j, yd) in yt.chunks_exact_mut(dv).enumerate() {
                yd.copy_from_slice(&core[(r0 * hv + j * n + t) * dv..][..dv]);
            }
        });
        scratch.give(core);
    }
    Ok(())
}
