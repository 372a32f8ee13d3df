//! The Gated DeltaNet mixer (spec §4): fused q/k/v projection, causal depthwise conv
//! with carried state, L2-normalised q/k, β and decay gates, grouped value heads, the
//! delta-rule core (chunked for multi-token forwards, recurrent for one token, as HF),
//! gated RMSNorm and the output projection.

pub mod delta_rule;

use super::norm::{gated_rms_norm, l2_norm, sigmoid, silu, softplus};
use crate::Result;
use crate::state::GdnState;
use delta_rule::HeadInputs;
use edge_core::par;
use edge_quant::linear::Linear;

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

    /// Runs `tokens` rows of `x`, carrying `state`, and writes `[tokens, hidden]` to `out`.
    pub fn forward(
        &self,
        x: &[f32],
        tokens: usize,
        state: &mut GdnState,
        out: &mut [f32],
    ) -> Result<()> {
        let c = self.channels();
        let (hk, hv, dk, dv) = (
            self.key_heads,
            self.value_heads,
            self.key_dim,
            self.value_dim,
        );
        let mut qkv = vec![0.0; tokens * c];
        let mut z = vec![0.0; tokens * hv * dv];
        let mut b = vec![0.0; tokens * hv];
        let mut a = vec![0.0; tokens * hv];
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

        let mixed = self.causal_conv(&qkv, tokens, &mut state.conv);

        // Gather per-head contiguous q, k, v; normalise q and k.
        let key_width = hk * dk;
        let mut q = vec![0.0; hk * tokens * dk];
        let mut k = vec![0.0; hk * tokens * dk];
        let mut v = vec![0.0; hv * tokens * dv];
        let q_scale = 1.0 / (dk as f32).sqrt();
        for t in 0..tokens {
            let row = &mixed[t * c..][..c];
            for h in 0..hk {
                let qd = &mut q[(h * tokens + t) * dk..][..dk];
                qd.copy_from_slice(&row[h * dk..][..dk]);
                l2_norm(qd);
                qd.iter_mut().for_each(|e| *e *= q_scale);
                let kd = &mut k[(h * tokens + t) * dk..][..dk];
                kd.copy_from_slice(&row[key_width + h * dk..][..dk]);
                l2_norm(kd);
            }
            for h in 0..hv {
                v[(h * tokens + t) * dv..][..dv]
                    .copy_from_slice(&row[2 * key_width + h * dv..][..dv]);
            }
        }
        let beta: Vec<f32> = (0..hv * tokens)
            .map(|i| sigmoid(b[(i % tokens) * hv + i / tokens]))
            .collect();
        let g: Vec<f32> = (0..hv * tokens)
            .map(|i| {
                let (h, t) = (i / tokens, i % tokens);
                self.neg_a[h] * softplus(a[t * hv + h] + self.dt_bias[h])
            })
            .collect();

        // The delta rule per value head; value head j reads key head j / (hv / hk).
        let group = hv / hk;
        let mut core = vec![0.0; hv * tokens * dv];
        let heads: Vec<_> = core
            .chunks_mut(tokens * dv)
            .zip(state.recurrent.chunks_mut(dk * dv))
            .enumerate()
            .collect();
        par::for_each(heads, |(j, (o, s))| {
            let kh = j / group;
            let inp = HeadInputs {
                q: &q[kh * tokens * dk..][..tokens * dk],
                k: &k[kh * tokens * dk..][..tokens * dk],
                v: &v[j * tokens * dv..][..tokens * dv],
                beta: &beta[j * tokens..][..tokens],
                g: &g[j * tokens..][..tokens],
                dk,
                dv,
            };
            if tokens == 1 {
                delta_rule::recurrent(&inp, s, o);
            } else {
                delta_rule::chunked(&inp, s, o);
            }
        });

        // Back to token-major [tokens, hv, dv], gated norm, output projection.
        let mut y = vec![0.0; tokens * hv * dv];
        for t in 0..tokens {
            for j in 0..hv {
                y[(t * hv + j) * dv..][..dv].copy_from_slice(&core[(j * tokens + t) * dv..][..dv]);
            }
        }
        gated_rms_norm(&mut y, &z, &self.norm_weight, self.eps);
        self.out_proj.forward(&y, tokens, out)?;
        Ok(())
    }

    /// Causal depthwise conv + SiLU over `tokens` rows of `qkv` (`[tokens, channels]`),
    /// continuing from and updating `conv_state` (`[kernel − 1, channels]`, oldest first).
    fn causal_conv(&self, qkv: &[f32], tokens: usize, conv_state: &mut [f32]) -> Vec<f32> {
        let c = self.channels();
        let kern = self.kernel;
        let hist = kern - 1;
        // Rows: the carried history, then the new tokens.
        let mut rows = Vec::with_capacity((hist + tokens) * c);
        rows.extend_from_slice(conv_state);
        rows.extend_from_slice(qkv);
        let mut out = vec![0.0; tokens * c];
        for (t, o) in out.chunks_exact_mut(c).enumerate() {
            for (i, w) in self.conv_taps.chunks_exact(c).enumerate() {
                let x = &rows[(t + i) * c..][..c];
                for ((oc, &wc), &xc) in o.iter_mut().zip(w).zip(x) {
                    *oc += wc * xc;
                }
            }
            o.iter_mut().for_each(|v| *v = silu(*v));
        }
        conv_state.copy_from_slice(&rows[tokens * c..]);
        out
    }
}
