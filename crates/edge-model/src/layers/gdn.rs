//! The Gated DeltaNet mixer (spec §4): fused q/k/v projection, causal depthwise conv
//! with carried state, L2-normalised q/k, β and decay gates, grouped value heads, the
//! delta-rule core (chunked for multi-token spans, recurrent for one token, as HF),
//! gated RMSNorm and the output projection.

use crate::Result;
use crate::backend::{Backend, ForwardPlan, GdnInputs, GdnKept, GdnParams, GdnShape, SpanPlan};
use edge_kvcache::CacheMemory;

/// One Gated DeltaNet mixer.
#[derive(Debug)]
pub struct GatedDeltaNet<B: Backend> {
    /// `[2K + V, hidden]`: rows are Q, K, V blocks, each head-major.
    pub(crate) in_proj_qkv: B::Linear,
    /// `[V, hidden]`: the output gate z.
    pub(crate) in_proj_z: B::Linear,
    /// `[value_heads, hidden]`: β logits.
    pub(crate) in_proj_b: B::Linear,
    /// `[value_heads, hidden]`: decay input.
    pub(crate) in_proj_a: B::Linear,
    /// Depthwise conv weight, tap-major `[kernel, channels]` (the checkpoint stores
    /// `[channels, 1, kernel]`; see [`conv_taps_from_checkpoint`]), so the conv's inner
    /// loop runs over contiguous channels.
    pub(crate) conv_taps: B::Vector,
    /// `−exp(A_log)` per value head.
    pub(crate) neg_a: B::Vector,
    /// `dt_bias` per value head.
    pub(crate) dt_bias: B::Vector,
    /// Gated norm weight `[value_head_dim]` (plain, not zero-centred).
    pub(crate) norm_weight: B::Vector,
    /// `[hidden, V]`.
    pub(crate) out_proj: B::Linear,
    /// Heads, head widths and conv kernel size.
    pub(crate) shape: GdnShape,
    /// Norm epsilon.
    pub(crate) eps: f32,
}

/// The checkpoint's conv weight (`[channels, 1, kernel]`, flattened) in the tap-major
/// layout of [`GatedDeltaNet::conv_taps`].
pub fn conv_taps_from_checkpoint(weight: &[f32], channels: usize, kernel: usize) -> Vec<f32> {
    (0..kernel)
        .flat_map(|i| (0..channels).map(move |ch| weight[ch * kernel + i]))
        .collect()
}

impl<B: Backend> GatedDeltaNet<B> {
    /// What the Gated DeltaNet operations read of the layer.
    pub fn params(&self) -> GdnParams<'_, B> {
        GdnParams {
            shape: self.shape,
            conv_taps: &self.conv_taps,
            neg_a: &self.neg_a,
            dt_bias: &self.dt_bias,
            norm_weight: &self.norm_weight,
            eps: self.eps,
        }
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
        let s = self.shape;
        let (hv, dv) = (s.value_heads, s.value_dim);
        let params = self.params();
        let mut qkv = be.alloc(t * s.channels())?;
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
        let conv = self.conv(be, &params, state, plan, &qkv)?;
        let mut y = be.alloc(t * hv * dv)?;
        be.gdn_recurrence(&params, state, plan, conv.inputs(&b, &a), &z, &mut y)?;
        conv.free(be);
        be.free(z);
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

    /// Advances `span`'s conv window and recurrent state along `path` (rows of the
    /// span, root first, each the child of the one before) from what `kept` holds of
    /// the pass: the accepted path of a token tree. The path's kept rows run as one
    /// chain through the conv, which advances the window, then through
    /// [`Backend::gdn_advance`]; nothing is projected again.
    pub fn commit(
        &self,
        be: &mut B,
        state: &mut <B::Memory as CacheMemory>::Recurrent,
        span: &SpanPlan,
        kept: &GdnKept<B>,
        path: &[usize],
    ) -> Result<()> {
        if path.is_empty() {
            return Ok(());
        }
        let s = self.shape;
        let params = self.params();
        let rows: Vec<usize> = path.iter().map(|&r| span.rows.start + r).collect();
        let n = rows.len();
        let qkv = be.gather_rows(&kept.qkv, s.channels(), &rows)?;
        let b = be.gather_rows(&kept.b, s.value_heads, &rows)?;
        let a = be.gather_rows(&kept.a, s.value_heads, &rows)?;
        let chain = ForwardPlan::gdn_chain(span, n);
        let conv = self.conv(be, &params, state, &chain, &qkv)?;
        be.gdn_advance(&params, state, &chain, conv.inputs(&b, &a))?;
        conv.free(be);
        for buf in [qkv, b, a] {
            be.free(buf);
        }
        Ok(())
    }

    /// The causal conv of the plan's `qkv` rows, split into fresh q, k and v buffers.
    fn conv(
        &self,
        be: &mut B,
        params: &GdnParams<'_, B>,
        state: &mut <B::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        qkv: &B::Buf,
    ) -> Result<ConvOut<B>> {
        let (t, s) = (plan.tokens(), self.shape);
        let mut q = be.alloc(t * s.key_heads * s.key_dim)?;
        let mut k = be.alloc(t * s.key_heads * s.key_dim)?;
        let mut v = be.alloc(t * s.value_heads * s.value_dim)?;
        be.gdn_conv(params, state, plan, qkv, &mut q, &mut k, &mut v)?;
        Ok(ConvOut { q, k, v })
    }
}

/// The conv's q, k and v rows, on their way into the delta rule.
struct ConvOut<B: Backend> {
    q: B::Buf,
    k: B::Buf,
    v: B::Buf,
}

impl<B: Backend> ConvOut<B> {
    /// The delta rule's inputs: these rows with the projected `b` and `a`.
    fn inputs<'a>(&'a self, b: &'a B::Buf, a: &'a B::Buf) -> GdnInputs<'a, B> {
        GdnInputs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            b,
            a,
        }
    }

    fn free(self, be: &mut B) {
        for buf in [self.q, self.k, self.v] {
            be.free(buf);
        }
    }
}
