//! Gated full attention (spec §5): interleaved query/gate projection, per-head
//! zero-centred q/k norms, partial RoPE, GQA causal softmax, sigmoid output gate.

use super::attention_block::{KvView, Queries, attend_queries};
use super::norm::{Gate, gate_in_place, rms_norm_zero_centred};
use super::rope::Rope;
use super::scratch::Scratch;
use super::simd::{axpy, dispatch, dot, weight_exp};
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
            let heads: Vec<_> = attn.chunks_mut(d).enumerate().collect();
            par::for_each(heads, |(head, o)| {
                attend_one(&q[head * d..][..d], &view(head), pos0 + 1, scale, o);
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

/// Causal softmax attention of one query over the first `visible` cached positions.
fn attend_one(q: &[f32], kv: &KvView, visible: usize, scale: f32, out: &mut [f32]) {
    dispatch!(attend_portable, (q: &[f32], kv: &KvView, visible: usize, scale: f32, out: &mut [f32]) {
        attend_body(q, kv, visible, scale, out)
    })
}

#[inline(always)]
fn attend_body(q: &[f32], kv: &KvView, visible: usize, scale: f32, out: &mut [f32]) {
    let d = q.len();
    // A plain loop, not `map(..).collect()`: the iterator's `fold` is compiled without
    // the caller's target features, and `dot` inlined there ran as SSE.
    let mut scores = vec![0.0f32; visible];
    for (s, score) in scores.iter_mut().enumerate() {
        *score = dot(q, &kv.keys[s * kv.stride + kv.offset..][..d]) * scale;
    }
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for s in scores.iter_mut() {
        *s = weight_exp(*s - max);
        sum += *s;
    }
    out.fill(0.0);
    let inv = 1.0 / sum;
    for (s, p) in scores.iter().enumerate() {
        axpy(p * inv, &kv.values[s * kv.stride + kv.offset..][..d], out);
    }
}

/// Rounds `x` to what an FP8 cache with `scale` gives back.
fn fp8_round_trip(x: &mut [f32], scale: f32) -> Result<()> {
    let mut codes = vec![0u8; x.len()];
    quantize_kv(x, scale, &mut codes)?;
    dequantize_kv(&codes, scale, x)?;
    Ok(())
}
