//! What the layer operations read of a layer: its dimensions and parameter vectors in
//! the backend's own types, never the layer structs themselves, so a backend knows
//! nothing of how the model is put together.

use super::Backend;
use crate::rope::Rope;
use edge_quant::linear::AmaxObserver;
use std::sync::Arc;

/// A gated attention layer's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Head width.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Query heads per key/value head (grouped-query attention).
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads.max(1)
    }
}

/// What [`Backend::attention_inputs`] reads of an attention layer: the per-head q/k
/// norms and the rotary embedding.
pub struct AttentionParams<'a, B: Backend> {
    /// The layer's dimensions.
    pub shape: AttentionShape,
    /// Per-head query norm weight `[head_dim]` (zero-centred).
    pub q_norm: &'a B::Vector,
    /// Per-head key norm weight `[head_dim]` (zero-centred).
    pub k_norm: &'a B::Vector,
    /// Norm epsilon.
    pub eps: f32,
    /// The rotary embedding.
    pub rope: &'a Rope,
}

/// Amax recorders for one attention layer's keys (after norm and RoPE: what the cache
/// stores) and values: the calibration of FP8 KV-cache scales.
#[derive(Clone, Debug, Default)]
pub struct KvObserver {
    /// Keys.
    pub k: Arc<AmaxObserver>,
    /// Values.
    pub v: Arc<AmaxObserver>,
}

/// A Gated DeltaNet layer's dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GdnShape {
    /// Query/key heads.
    pub key_heads: usize,
    /// Value heads (a multiple of the key heads).
    pub value_heads: usize,
    /// Key head width.
    pub key_dim: usize,
    /// Value head width.
    pub value_dim: usize,
    /// Conv kernel size.
    pub kernel: usize,
}

impl GdnShape {
    /// Conv channels: the q, k and v heads side by side.
    pub fn channels(&self) -> usize {
        2 * self.key_heads * self.key_dim + self.value_heads * self.value_dim
    }

    /// Value heads per key head.
    pub fn group(&self) -> usize {
        self.value_heads / self.key_heads.max(1)
    }
}

/// What the Gated DeltaNet operations read of a layer: its dimensions and its
/// parameter vectors.
pub struct GdnParams<'a, B: Backend> {
    /// The layer's dimensions.
    pub shape: GdnShape,
    /// Depthwise conv taps, tap-major `[kernel, channels]`.
    pub conv_taps: &'a B::Vector,
    /// `−exp(A_log)` per value head.
    pub neg_a: &'a B::Vector,
    /// `dt_bias` per value head.
    pub dt_bias: &'a B::Vector,
    /// Gated norm weight `[value_dim]` (plain, not zero-centred).
    pub norm_weight: &'a B::Vector,
    /// Norm epsilon.
    pub eps: f32,
}

/// The inputs of a Gated DeltaNet delta rule after the conv: head-major per span `q`,
/// `k` (`[heads, rows, key_dim]`) and `v`; token-major `b`, `a` (β and decay logits,
/// `[rows, value_heads]`).
pub struct GdnInputs<'a, B: Backend> {
    /// Queries, L2-normalised and scaled by `1/√key_dim`.
    pub q: &'a B::Buf,
    /// Keys, L2-normalised.
    pub k: &'a B::Buf,
    /// Values.
    pub v: &'a B::Buf,
    /// β logits.
    pub b: &'a B::Buf,
    /// Decay inputs.
    pub a: &'a B::Buf,
}

/// What a Gated DeltaNet layer keeps of a pass with token trees, so that committing an
/// accepted path advances its conv window and state without re-running the path's
/// forward: the pre-conv `[rows, channels]` projections and the `[rows, value_heads]`
/// β and decay inputs of every row of the batch.
pub struct GdnKept<B: Backend> {
    /// Pre-conv q/k/v projections.
    pub qkv: B::Buf,
    /// β logits.
    pub b: B::Buf,
    /// Decay inputs.
    pub a: B::Buf,
}
