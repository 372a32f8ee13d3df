//! The Gated DeltaNet mixer (spec §4): fused q/k/v projection, causal depthwise conv
//! with carried state, L2-normalised q/k, β and decay gates, grouped value heads, the
//! delta-rule core (chunked for multi-token forwards, recurrent for one token, as HF),
//! gated RMSNorm and the output projection.

mod conv;
pub mod delta_rule;

use super::norm::{gated_rms_norm, l2_norm, sigmoid, softplus};
use super::scratch::{Scratch, ScratchBuf};
use crate::Result;
use crate::state::GdnState;
use conv::{ConvRange, conv_range};
use delta_rule::HeadInputs;
use edge_core::par;
use edge_quant::linear::Linear;
use rayon::prelude::*;

/// One Gated DeltaNet mixer.
#[derive(Debug)]
pub struct GatedDeltaNet {
    /// `[2K + V, hidden]`: rows are Q, K, V blocks, each head-major.
    pub in_proj_qkv: Linear,
    /// `[V, hidden]`: the output gate z.
    pub in_proj_z: Linear,
    /// `[value_heads, hidden]`: β logits.
    pub in_proj_b: Linear,
    /// `[value_heads, hidden]`: decay input.
    pub in_proj_a: Linear,
    /// Depthwise conv weight, tap-major `[kernel, channels]` (the checkpoint stores
    /// `[channels, 1, kernel]`; see [`GatedDeltaNet::conv_taps_from_checkpoint`]), so the
    /// conv's inner loop runs over contiguous channels.
    pub conv_taps: Vec<f32>,
    /// `−exp(A_log)` per value head.
    pub neg_a: Vec<f32>,
    /// `dt_bias` per value head.
    pub dt_bias: Vec<f32>,
    /// Gated norm weight `[value_head_dim]` (plain, not zero-centred).
    pub norm_weight: Vec<f32>,
    /// `[hidden, V]`.
    pub out_proj: Linear,
    /// Query/key heads.
    pub key_heads: usize,
    /// Value heads.
    pub value_heads: usize,
    /// Key head width.
    pub key_dim: usize,
    /// Value head width.
    pub value_dim: usize,
    /// Conv kernel size.
    pub kernel: usize,
    /// Norm epsilon.
    pub eps: f32,
}

impl GatedDeltaNet {
    /// The checkpoint's conv weight (`[channels, 1, kernel]`, flattened) in the
    /// tap-major layout of [`GatedDeltaNet::conv_taps`].
    pub fn conv_taps_from_checkpoint(weight: &[f32], channels: usize, kernel: usize) -> Vec<f32> {
        (0..kernel)
            .flat_map(|i| (0..channels).map(move |ch| weight[ch * kernel + i]))
            .collect()
    }

    fn channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }

    /// Runs `tokens` rows of `x`, carrying `state`, and writes `[tokens, hidden]` to `out`,
    /// with its work buffers from `scratch`.
    pub fn forward(
        &self,
        x: &[f32],
        tokens: usize,
        state: &mut GdnState,
        out: &mut [f32],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let c = self.channels();
        let (hk, hv, dk, dv) = (
            self.key_heads,
            self.value_heads,
            self.key_dim,
            self.value_dim,
        );
        let mut qkv = scratch.take(tokens * c);
        let mut z = scratch.take(tokens * hv * dv);
        let mut b = scratch.take(tokens * hv);
        let mut a = scratch.take(tokens * hv);
        Linear::forward_shared(
            &[
                &self.in_proj_qkv,
                &self.in_proj_z,
                &self.in_proj_b,
                &self.in_proj_a,
            ],
            x,
            tokens,
            &mut [&mut qkv, &mut z, &mut b, &mut a],
        )?;

        let (q, k, v) = self.conv_heads(&qkv, tokens, &mut state.conv, scratch);
        scratch.give(qkv);

        // The delta rule per value head (value head j reads key head j / (hv / hk)),
        // then its gated norm: all per head, on the team's threads.
        let group = hv / hk;
        let mut core = scratch.take(hv * tokens * dv);
        let heads: Vec<_> = core
            .chunks_mut(tokens * dv)
            .zip(state.recurrent.chunks_mut(dk * dv))
            .enumerate()
            .collect();
        par::for_each(heads, |(j, (o, s))| {
            let kh = j / group;
            let beta: Vec<f32> = (0..tokens).map(|t| sigmoid(b[t * hv + j])).collect();
            let g: Vec<f32> = (0..tokens)
                .map(|t| self.neg_a[j] * softplus(a[t * hv + j] + self.dt_bias[j]))
                .collect();
            let inp = HeadInputs {
                q: &q[kh * tokens * dk..][..tokens * dk],
                k: &k[kh * tokens * dk..][..tokens * dk],
                v: &v[j * tokens * dv..][..tokens * dv],
                beta: &beta,
                g: &g,
                dk,
                dv,
            };
            if tokens == 1 {
                delta_rule::recurrent(&inp, s, o);
            } else {
                delta_rule::chunked(&inp, s, o);
            }
            for (t, row) in o.chunks_exact_mut(dv).enumerate() {
                let zrow = &z[(t * hv + j) * dv..][..dv];
                gated_rms_norm(row, zrow, &self.norm_weight, self.eps);
            }
        });

        scratch.give_all([q, k, v, z, b, a]);

        // Back to token-major [tokens, hv, dv] (the same layout for one token) and
        // the output projection.
        if tokens == 1 {
            self.out_proj.forward(&core, tokens, out)?;
            scratch.give(core);
            return Ok(());
        }
        let mut y = scratch.take(tokens * hv * dv);
        y.par_chunks_mut(hv * dv).enumerate().for_each(|(t, yt)| {
            for (j, yd) in yt.chunks_exact_mut(dv).enumerate() {
                yd.copy_from_slice(&core[(j * tokens + t) * dv..][..dv]);
            }
        });
        self.out_proj.forward(&y, tokens, out)?;
        scratch.give_all([core, y]);
        Ok(())
    }

    /// Causal depthwise conv + SiLU over `tokens` rows of `qkv` (`[tokens, channels]`),
    /// continuing from and updating `conv_state` (`[kernel − 1, channels]`, oldest
    /// first), as head-major `(q, k, v)` (`[heads, tokens, head_dim]` each) with q and
    /// k L2-normalised and q scaled by `1/√dk`: one task per q, k and v head.
    fn conv_heads(
        &self,
        qkv: &[f32],
        tokens: usize,
        conv_state: &mut [f32],
        scratch: &mut Scratch,
    ) -> (ScratchBuf, ScratchBuf, ScratchBuf) {
        let c = self.channels();
        let (hk, hv, dk, dv) = (
            self.key_heads,
            self.value_heads,
            self.key_dim,
            self.value_dim,
        );
        let mut q = scratch.take(hk * tokens * dk);
        let mut k = scratch.take(hk * tokens * dk);
        let mut v = scratch.take(hv * tokens * dv);
        // Each head's output and channel range, in channel order: q, k, then v heads.
        let mut ranges: Vec<(bool, ConvRange<'_>)> = Vec::with_capacity(2 * hk + hv);
        let outs = q.chunks_mut(tokens * dk).map(|o| (true, o));
        let outs = outs.chain(k.chunks_mut(tokens * dk).map(|o| (true, o)));
        let outs = outs.chain(v.chunks_mut(tokens * dv).map(|o| (false, o)));
        let mut first = 0;
        for (normalise, out) in outs {
            ranges.push((
                normalise,
                ConvRange {
                    first,
                    history: Vec::with_capacity(self.kernel - 1),
                    out,
                },
            ));
            first += ranges.last().map_or(0, |(_, r)| r.out.len() / tokens);
        }
        for row in conv_state.chunks_exact_mut(c) {
            let mut rest = row;
            for (_, range) in &mut ranges {
                let width = range.out.len() / tokens;
                let (mine, tail) = std::mem::take(&mut rest).split_at_mut(width);
                range.history.push(mine);
                rest = tail;
            }
        }
        let q_scale = 1.0 / (dk as f32).sqrt();
        par::for_each(ranges, |(normalise, mut range)| {
            conv_range(qkv, tokens, &self.conv_taps, &mut range);
            if normalise {
                // Query ranges come first: scale those.
                let scale = if range.first < hk * dk { q_scale } else { 1.0 };
                for row in range.out.chunks_exact_mut(dk) {
                    l2_norm(row);
                    row.iter_mut().for_each(|e| *e *= scale);
                }
            }
        });
        (q, k, v)
    }
}
