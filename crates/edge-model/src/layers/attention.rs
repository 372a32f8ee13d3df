//! Gated full attention (spec §5): interleaved query/gate projection, per-head
//! zero-centred q/k norms, partial RoPE, GQA causal softmax over the paged cache,
//! sigmoid output gate.

use crate::Result;
use crate::backend::{AttentionParams, AttentionShape, Backend, ForwardPlan, Gate, KvObserver};
use crate::rope::Rope;
use edge_kvcache::CacheMemory;
use edge_quant::fp8::kv::KvScales;

/// One gated full-attention mixer.
#[derive(Debug)]
pub struct GatedAttention<B: Backend> {
    /// `[heads · 2 · head_dim, hidden]`, query and gate interleaved per head.
    pub(crate) q_proj: B::Linear,
    /// `[kv_heads · head_dim, hidden]`.
    pub(crate) k_proj: B::Linear,
    /// `[kv_heads · head_dim, hidden]`.
    pub(crate) v_proj: B::Linear,
    /// `[hidden, heads · head_dim]`.
    pub(crate) o_proj: B::Linear,
    /// Per-head query norm weight `[head_dim]` (zero-centred).
    pub(crate) q_norm: B::Vector,
    /// Per-head key norm weight `[head_dim]` (zero-centred).
    pub(crate) k_norm: B::Vector,
    /// Heads and head width.
    pub(crate) shape: AttentionShape,
    /// Norm epsilon.
    pub(crate) eps: f32,
    /// Rotary embedding.
    pub(crate) rope: Rope,
    /// The checkpoint's FP8 KV-cache scales (`k_proj.k_scale`, `v_proj.v_scale`; 1.0
    /// where absent), used when the cache stores FP8 pages.
    pub(crate) kv_scales: KvScales,
    /// When set, records the amax of keys (after norm and RoPE) and values
    /// (calibration of FP8 KV-cache scales).
    pub(crate) kv_observer: Option<KvObserver>,
}

impl<B: Backend> GatedAttention<B> {
    /// What [`Backend::attention_inputs`] reads of the layer.
    pub fn params(&self) -> AttentionParams<'_, B> {
        AttentionParams {
            shape: self.shape,
            q_norm: &self.q_norm,
            k_norm: &self.k_norm,
            eps: self.eps,
            rope: &self.rope,
        }
    }

    /// Runs the rows of `x` (`[rows, hidden]`) as `plan` places them, storing their
    /// keys and values in `kv` and attending over each sequence's cached rows; writes
    /// `[rows, hidden]` to `out`.
    pub fn forward(
        &self,
        be: &mut B,
        x: &B::Buf,
        plan: &ForwardPlan,
        kv: &mut <B::Memory as CacheMemory>::Kv,
        out: &mut B::Buf,
    ) -> Result<()> {
        let t = plan.tokens();
        let AttentionShape {
            heads: h,
            kv_heads: hkv,
            head_dim: d,
        } = self.shape;
        let mut qg = be.alloc(t * h * 2 * d)?;
        let mut k = be.alloc(t * hkv * d)?;
        let mut v = be.alloc(t * hkv * d)?;
        be.linear(
            &[&self.q_proj, &self.k_proj, &self.v_proj],
            x,
            t,
            &mut [&mut qg, &mut k, &mut v],
        )?;
        let mut q = be.alloc(t * h * d)?;
        let mut gate = be.alloc(t * h * d)?;
        be.attention_inputs(
            &self.params(),
            &qg,
            &mut k,
            &plan.positions,
            &mut q,
            &mut gate,
        )?;
        if let Some(obs) = &self.kv_observer {
            be.observe_kv(obs, &k, &v)?;
        }
        be.store_kv(kv, plan, &k, &v)?;
        for buf in [qg, k, v] {
            be.free(buf);
        }
        let mut attn = be.alloc(t * h * d)?;
        be.attend(self.shape, kv, plan, &q, &mut attn)?;
        be.gate(Gate::Sigmoid, &gate, &mut attn)?;
        be.linear(&[&self.o_proj], &attn, t, &mut [out])?;
        for buf in [q, gate, attn] {
            be.free(buf);
        }
        Ok(())
    }
}
