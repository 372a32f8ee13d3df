//! The Gated DeltaNet mixer (spec §4): fused q/k/v projection, causal depthwise conv
//! with carried state, L2-normalised q/k, β and decay gates, grouped value heads, the
//! delta-rule core (chunked for multi-token spans, recurrent for one token, as HF),
//! gated RMSNorm and the output projection.

use crate::Result;
use crate::backend::{Backend, ForwardPlan, GdnInputs, GdnKept};
use crate::cpu::Cpu;
use edge_kvcache::CacheMemory;

/// One Gated DeltaNet mixer.
#[derive(Debug)]
pub struct GatedDeltaNet<B: Backend = Cpu> {
    /// `[2K + V, hidden]`: rows are Q, K, V blocks, each head-major.
    pub in_proj_qkv: B::Linear,
    /// `[V, hidden]`: the output gate z.
    pub in_proj_z: B::Linear,
    /// `[value_heads, hidden]`: β logits.
    pub in_proj_b: B::Linear,
    /// `[value_heads, hidden]`: decay input.
    pub in_proj_a: B::Linear,
    /// Depthwise conv weight, tap-major `[kernel, channels]` (the checkpoint stores
    /// `[channels, 1, kernel]`; see [`conv_taps_from_checkpoint`]), so the conv's inner
    /// loop runs over contiguous channels.
    pub conv_taps: B::Vector,
    /// `−exp(A_log)` per value head.
    pub neg_a: B::Vector,
    /// `dt_bias` per value head.
    pub dt_bias: B::Vector,
    /// Gated norm weight `[value_head_dim]` (plain, not zero-centred).
    pub norm_weight: B::Vector,
    /// `[hidden, V]`.
    pub out_proj: B::Linear,
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

/// The checkpoint's conv weight (`[channels, 1, kernel]`, flattened) in the tap-major
/// layout of [`GatedDeltaNet::conv_taps`].
pub fn conv_taps_from_checkpoint(weight: &[f32], channels: usize, kernel: usize) -> Vec<f32> {
    (0..kernel)
        .flat_map(|i| (0..channels).map(move |ch| weight[ch * kernel + i]))
        .collect()
}

impl<B: Backend> GatedDeltaNet<B> {
    /// `(key_heads, value_heads, key_dim, value_dim)`.
    pub fn dims(&self) -> (usize, usize, usize, usize) {
        (
            self.key_heads,
            self.value_heads,
            self.key_dim,
            self.value_dim,
        )
    }

    /// Conv channels: the q, k and v heads side by side.
    pub fn channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }

    /// Runs the rows of `x` (`[rows, hidden]`) as `plan` places them, carrying each
    /// span's conv window and recurrent state in `state`; writes `[rows, hidden]` to
    /// `out`. When the plan has token trees, returns the inputs a commit needs.
    pub fn forward(
        &self,
        be: &mut B,
        x: &B::Buf,
        plan: &ForwardPlan,
        state: &mut <B::Memory as CacheMemory>::Recurrent,
        out: &mut B::Buf,
    ) -> Result<Option<GdnKept<B>>> {
        let t = plan.tokens();
        let (hk, hv, dk, dv) = self.dims();
        let mut qkv = be.alloc(t * self.channels())?;
        let mut z = be.alloc(t * hv * dv)?;
        let mut b = be.alloc(t * hv)?;
        let mut a = be.alloc(t * hv)?;
        be.linear(
            &[
                &self.in_proj_qkv,
                &self.in_proj_z,
                &self.in_proj_b,
                &self.in_proj_a,
            ],
            x,
            t,
            &mut [&mut qkv, &mut z, &mut b, &mut a],
        )?;
        let mut q = be.alloc(hk * t * dk)?;
        let mut k = be.alloc(hk * t * dk)?;
        let mut v = be.alloc(hv * t * dv)?;
        be.gdn_conv(self, state, plan, &qkv, &mut q, &mut k, &mut v)?;
        let mut y = be.alloc(t * hv * dv)?;
        let inputs = GdnInputs {
            q: &q,
            k: &k,
            v: &v,
            b: &b,
            a: &a,
            z: &z,
        };
        be.gdn_recurrence(self, state, plan, inputs, &mut y)?;
        for buf in [q, k, v, z] {
            be.free(buf);
        }
        be.linear(&[&self.out_proj], &y, t, &mut [out])?;
        be.free(y);
        if plan.has_trees() {
            return Ok(Some(GdnKept { qkv, b, a }));
        }
        for buf in [qkv, b, a] {
            be.free(buf);
        }
        Ok(None)
    }
}
