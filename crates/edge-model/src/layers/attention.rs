//! Gated full attention (spec §5): interleaved query/gate projection, per-head
//! zero-centred q/k norms, partial RoPE, GQA causal softmax, sigmoid output gate.

use super::attention_block::{KvView, Queries, attend_queries};
use super::norm::{Gate, gate_in_place, rms_norm_zero_centred};
use super::rope::Rope;
use super::scratch::Scratch;
use super::simd::{axpy, dispatch, dot, prefetch_row, weight_exp};
use crate::Result;
use crate::state::AttentionState;
use edge_core::par;
use edge_quant::fp8::kv::{KvScales, dequantize_kv, quantize_kv};
use edge_quant::linear::{AmaxObserver, Linear};
use rayon::prelude::*;
use std::sync::Arc;

/// One gated full-attention mixer.
#[derive(Debug)]
pub struct GatedAttention {
    /// `[heads · 2 · head_dim, hidden]`, query and gate interleaved per head.
    pub q_proj: Linear,
    /// `[kv_heads · head_dim, hidden]`.
    pub k_proj: Linear,
    /// `[kv_heads · head_dim, hidden]`.
    pub v_proj: Linear,
    /// `[hidden, heads · head_dim]`.
    pub o_proj: Linear,
    /// Per-head query norm weight `[head_dim]` (zero-centred).
    pub q_norm: Vec<f32>,
    /// Per-head key norm weight `[head_dim]` (zero-centred).
    pub k_norm: Vec<f32>,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width.
    pub head_dim: usize,
    /// Norm epsilon.
    pub eps: f32,
    /// Rotary embedding.
    pub rope: Rope,
    /// When set, records the amax of keys (after norm and RoPE) and values
    /// (calibration of FP8 KV-cache scales).
    pub kv_observer: Option<KvObserver>,
    /// When set, keys and values are rounded through FP8 E4M3 with these scales before
    /// they enter the cache, exactly as an FP8 KV cache stores them.
    pub kv_fp8: Option<KvScales>,
}

/// Amax recorders for one attention layer's keys and values.
#[derive(Clone, Debug, Default)]
pub struct KvObserver {
    /// Keys, after norm and RoPE (what the cache stores).
    pub k: Arc<AmaxObserver>,
    /// Values.
    pub v: Arc<AmaxObserver>,
}

/// One token's query, gate and key rows, numbered, as the preparation loop yields them.
type TokenRows<'a> = (usize, ((&'a mut [f32], &'a mut [f32]), &'a mut [f32]));

/// Tokens from which the per-token preparation of queries and keys runs in parallel.
const PAR_MIN_TOKENS: usize = 16;

impl GatedAttention {
    /// Runs `tokens` rows of `x` starting at absolute position `state.len()`, appending
    /// their keys and values to `state`, and writes `[tokens, hidden]` to `out`, with
    /// its work buffers from `scratch`.
    pub fn forward(
        &self,
        x: &[f32],
        tokens: usize,
        state: &mut AttentionState,
        out: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let (h, hkv, d) = (self.heads, self.kv_heads, self.head_dim);
        let pos0 = state.len();
        let mut qg = scratch.take(tokens * h * 2 * d);
        let mut k = scratch.take(tokens * hkv * d);
        let mut v = scratch.take(tokens * hkv * d);
        Linear::forward_shared(
            &[&self.q_proj, &self.k_proj, &self.v_proj],
            x,
            tokens,
            &mut [&mut qg, &mut k, &mut v],
        )?;

        // Split interleaved [q | gate] per head; normalise and rotate q and k: per
        // token, in parallel for prompts.
        let mut q = scratch.take(tokens * h * d);
        let mut gate = scratch.take(tokens * h * d);
        let prepare = |(t, ((qt, gt), kt)): TokenRows<'_>| {
            let src = &qg[t * h * 2 * d..][..h * 2 * d];
            for ((qd, gd), s) in qt
                .chunks_exact_mut(d)
                .zip(gt.chunks_exact_mut(d))
                .zip(src.chunks_exact(2 * d))
            {
                qd.copy_from_slice(&s[..d]);
                gd.copy_from_slice(&s[d..]);
            }
            rms_norm_zero_centred(qt, &self.q_norm, self.eps);
            self.rope.apply(qt, d, pos0 + t);
            rms_norm_zero_centred(kt, &self.k_norm, self.eps);
            self.rope.apply(kt, d, pos0 + t);
        };
        let rows = q
            .chunks_mut(h * d)
            .zip(gate.chunks_mut(h * d))
            .zip(k.chunks_mut(hkv * d))
            .enumerate();
        if tokens >= PAR_MIN_TOKENS {
            rows.collect::<Vec<_>>().into_par_iter().for_each(prepare);
        } else {
            rows.for_each(prepare);
        }
        if let Some(obs) = &self.kv_observer {
            obs.k.observe(&k);
            obs.v.observe(&v);
        }
        if let Some(scales) = &self.kv_fp8 {
            fp8_round_trip(&mut k, scales.k_scale)?;
            fp8_round_trip(&mut v, scales.v_scale)?;
        }
        state.append(&k, &v);
        scratch.give_all([qg, k, v]);

        let mut attn = scratch.take(tokens * h * d);
        let scale = 1.0 / (d as f32).sqrt();
        let group = h / hkv;
        let (keys, values) = (state.keys(), state.values());
        let view = |head: usize| KvView {
            keys,
            values,
            stride: hkv * d,
            offset: (head / group) * d,
        };
        if tokens == 1 {
            // The query heads sharing a KV head read its keys and values once, as
            // one item; where there are more threads than KV heads, each group is
            // split so that every thread gets an item.
            let split = rayon::current_num_threads().div_ceil(hkv).clamp(1, group);
            let per = group.div_ceil(split);
            let items: Vec<(usize, &mut [f32])> = (attn.chunks_mut(group * d).enumerate())
                .flat_map(|(j, o)| {
                    let parts = o.chunks_mut(per * d).enumerate();
                    parts.map(move |(k, o)| (j * group + k * per, o))
                })
                .collect();
            par::for_each(items, |(first, o)| {
                let qs = &q[first * d..][..o.len()];
                attend_group(qs, &view(first), pos0 + 1, scale, d, o);
            });
        } else {
            // Prompts: per head, blocks of queries as small matmuls.
            let per_head: Vec<Vec<f32>> = (0..h)
                .into_par_iter()
                .map(|head| {
                    let mut o = vec![0.0; tokens * d];
                    let qs = Queries {
                        q: &q[head * d..],
                        stride: h * d,
                        count: tokens,
                        dim: d,
                        pos0,
                        scale,
                    };
                    attend_queries(&qs, &view(head), &mut o);
                    o
                })
                .collect();
            for (head, o) in per_head.iter().enumerate() {
                for (t, row) in o.chunks_exact(d).enumerate() {
                    attn[(t * h + head) * d..][..d].copy_from_slice(row);
                }
            }
        }
        gate_in_place(Gate::Sigmoid, &gate, &mut attn);
        self.o_proj.forward(&attn, tokens, out)?;
        scratch.give_all([q, gate, attn]);
        Ok(())
    }
}

/// Causal softmax attention over the first `visible` cached positions of one KV head
/// for the query heads in `qs` (`[heads, d]`, `d` the head dimension), written to
/// `out` (`[heads, d]`): each key and value row is read once for all of them.
fn attend_group(qs: &[f32], kv: &KvView, visible: usize, scale: f32, d: usize, out: &mut [f32]) {
    dispatch!(attend_portable, (qs: &[f32], kv: &KvView, visible: usize, scale: f32, d: usize, out: &mut [f32]) {
        attend_group_body(qs, kv, visible, scale, d, out)
    })
}

#[inline(always)]
fn attend_group_body(
    qs: &[f32],
    kv: &KvView,
    visible: usize,
    scale: f32,
    d: usize,
    out: &mut [f32],
) {
    let heads = qs.len() / d;
    // Plain loops, not `map(..).collect()`: an iterator's `fold` is compiled without
    // the caller's target features, and `dot` inlined there ran as SSE.
    let mut scores = vec![0.0f32; heads * visible];
    // One KV head's rows are `stride` apart in the cache; the hardware prefetcher
    // does not keep up with that walk, so rows AHEAD positions on are requested early.
    const AHEAD: usize = 8;
    let at = |s: usize| s * kv.stride + kv.offset;
    // Row `s` of `cache`, cut short (possibly empty) past its end: for prefetches only.
    let clipped = |cache: &[f32], s: usize| cache.len().min(at(s))..cache.len().min(at(s) + d);
    for s in 0..visible {
        prefetch_row(&kv.keys[clipped(kv.keys, s + AHEAD)]);
        let key = &kv.keys[at(s)..][..d];
        for (g, q) in qs.chunks_exact(d).enumerate() {
            scores[g * visible + s] = dot(q, key) * scale;
        }
    }
    for head_scores in scores.chunks_exact_mut(visible.max(1)) {
        let max = head_scores
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for s in head_scores.iter_mut() {
            *s = weight_exp(*s - max);
            sum += *s;
        }
        let inv = 1.0 / sum;
        head_scores.iter_mut().for_each(|p| *p *= inv);
    }
    out.fill(0.0);
    for s in 0..visible {
        prefetch_row(&kv.values[clipped(kv.values, s + AHEAD)]);
        let value = &kv.values[at(s)..][..d];
        for (g, o) in out.chunks_exact_mut(d).enumerate() {
            axpy(scores[g * visible + s], value, o);
        }
    }
}

/// Rounds `x` to what an FP8 cache with `scale` gives back.
fn fp8_round_trip(x: &mut [f32], scale: f32) -> Result<()> {
    let mut codes = vec![0u8; x.len()];
    quantize_kv(x, scale, &mut codes)?;
    dequantize_kv(&codes, scale, x)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Query heads attended together give each head's own attention exactly, and
    /// match a direct softmax computation.
    #[test]
    fn grouped_heads_match_single_heads_and_softmax() {
        let (d, positions, heads) = (16, 37, 3);
        let stride = 2 * d;
        let wave = |i: usize, f: f32| ((i as f32) * f).sin();
        let keys: Vec<f32> = (0..positions * stride).map(|i| wave(i, 0.37)).collect();
        let values: Vec<f32> = (0..positions * stride).map(|i| wave(i, 0.91)).collect();
        let qs: Vec<f32> = (0..heads * d).map(|i| wave(i, 1.3)).collect();
        let kv = KvView {
            keys: &keys,
            values: &values,
            stride,
            offset: d,
        };
        let (visible, scale) = (29, 0.25);
        let mut together = vec![f32::NAN; heads * d];
        attend_group(&qs, &kv, visible, scale, d, &mut together);
        for (g, q) in qs.chunks_exact(d).enumerate() {
            let mut alone = vec![f32::NAN; d];
            attend_group(q, &kv, visible, scale, d, &mut alone);
            assert_eq!(alone, together[g * d..][..d], "head {g}");
            // Softmax in f64 over the visible positions of KV head 1.
            let key = |s: usize| &keys[s * stride + d..][..d];
            let logits: Vec<f64> = (0..visible)
                .map(|s| {
                    q.iter()
                        .zip(key(s))
                        .map(|(a, b)| (a * b) as f64)
                        .sum::<f64>()
                        * 0.25
                })
                .collect();
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for (k, got) in alone.iter().enumerate() {
                let want: f64 = (0..visible)
                    .map(|s| w[s] / total * values[s * stride + d + k] as f64)
                    .sum();
                assert!(
                    (*got as f64 - want).abs() < 1e-5,
                    "head {g}, {k}: {got} vs {want}"
                );
            }
        }
    }
}
