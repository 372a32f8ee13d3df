//! The narrow interface between the model's orchestration and a device.
//!
//! The layers (`layers/`) and the model ([`crate::Qwen35Model`]) are written
//! once, over [`Backend`]: they allocate buffers, call its operations in order and
//! never touch a value. A backend owns its buffers ([`Backend::Buf`]), the form its
//! weights take on the device, and the device memory of the cache
//! ([`Backend::Memory`]). The CPU backend ([`crate::cpu::Cpu`]) is the reference every
//! other backend is tested against.

mod params;
mod plan;

pub use params::{
    AttentionParams, AttentionShape, GdnInputs, GdnKept, GdnParams, GdnShape, KvObserver,
};
pub use plan::{ForwardPlan, SpanPlan, TreePlan};

use crate::Result;
use edge_kvcache::{CacheConfig, CacheMemory, CacheSpec};
use std::fmt::Debug;

/// How [`Backend::gate`] gates its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// `x ← silu(g) · x` (SwiGLU: `g` the gate projection, `x` the up projection).
    Silu,
    /// `x ← sigmoid(g) · x` (the attention output gate).
    Sigmoid,
}

/// Shape facts of a linear layer's weights, whatever device holds them.
pub trait LinearShape {
    /// Output features (rows).
    fn out_features(&self) -> usize;
    /// Input features.
    fn in_features(&self) -> usize;
    /// Bytes of stored weights (what one pass reads).
    fn weight_bytes(&self) -> usize;
}

impl LinearShape for edge_quant::linear::Linear {
    fn out_features(&self) -> usize {
        edge_quant::linear::Linear::out_features(self)
    }
    fn in_features(&self) -> usize {
        edge_quant::linear::Linear::in_features(self)
    }
    fn weight_bytes(&self) -> usize {
        edge_quant::linear::Linear::weight_bytes(self)
    }
}

/// A device the model runs on: buffers, weights in the device's form, cache memory,
/// and the operations the layers are made of.
///
/// Buffers hold f32 activations, row-major. Operations do not check shapes beyond
/// what would be unsafe: the layers call them with the shapes their weights fix at
/// load time. Every operation that touches a device can fail (out of memory, a failed
/// launch, a lost device) and returns the error; the CPU backend's only errors are
/// those of its weights and cache.
pub trait Backend: Sized + Send {
    /// An activation buffer on the device.
    type Buf: Send + Sync;
    /// A linear layer's weights on the device.
    type Linear: LinearShape + Debug + Send + Sync;
    /// A parameter vector (norm weights, conv taps, gate parameters) on the device.
    type Vector: Debug + Send + Sync;
    /// The token embedding table on the device.
    type Embedding: Debug + Send + Sync;
    /// Where the cache lives.
    type Memory: CacheMemory;

    /// Empty cache memory on this backend's device for `spec`, serving a cache
    /// configured by `config` (a device memory may size its pools from
    /// `config.budget_bytes`); give it to [`edge_kvcache::PagedCache::with_memory`].
    fn cache_memory(&mut self, spec: &CacheSpec, config: &CacheConfig) -> Result<Self::Memory>;

    /// Runs one forward pass of `tokens` rows (the CPU backend puts it on its worker
    /// threads; a GPU backend would capture or launch it on its stream).
    fn pass<R: Send>(&mut self, tokens: usize, f: impl FnOnce(&mut Self) -> R + Send) -> R;

    /// A buffer of `len` values whose contents are unspecified.
    fn alloc(&mut self, len: usize) -> Result<Self::Buf>;
    /// Values a buffer holds.
    fn buf_len(&self, buf: &Self::Buf) -> usize;
    /// Gives a buffer back for reuse.
    fn free(&mut self, buf: Self::Buf);
    /// A buffer holding `values`.
    fn upload(&mut self, values: &[f32]) -> Result<Self::Buf>;
    /// The values of a buffer.
    fn download(&mut self, buf: &Self::Buf) -> Result<Vec<f32>>;
    /// Rows `rows` of the `width`-wide rows of `x`, in that order.
    fn gather_rows(&mut self, x: &Self::Buf, width: usize, rows: &[usize]) -> Result<Self::Buf>;

    /// Embeddings of `tokens` (ids already checked against the vocabulary).
    fn embed(&mut self, table: &Self::Embedding, tokens: &[u32], out: &mut Self::Buf)
    -> Result<()>;
    /// `outs[i] = x · layers[i]ᵀ` for `rows` rows of `x`: layers that share an input
    /// run as one pass over it.
    fn linear(
        &mut self,
        layers: &[&Self::Linear],
        x: &Self::Buf,
        rows: usize,
        outs: &mut [&mut Self::Buf],
    ) -> Result<()>;
    /// Zero-centred RMSNorm of each `weight`-wide row: `x · rsqrt(mean(x²) + eps) ·
    /// (1 + w)`.
    fn rms_norm(
        &mut self,
        x: &Self::Buf,
        weight: &Self::Vector,
        eps: f32,
        out: &mut Self::Buf,
    ) -> Result<()>;
    /// `x += y`.
    fn add(&mut self, x: &mut Self::Buf, y: &Self::Buf) -> Result<()>;
    /// `x ← f(g) · x` element-wise.
    fn gate(&mut self, gate: Gate, g: &Self::Buf, x: &mut Self::Buf) -> Result<()>;
    /// Row `i` of `out` is row `i` of `a` followed by row `i` of `b` (both `width`
    /// wide).
    fn concat_rows(
        &mut self,
        a: &Self::Buf,
        b: &Self::Buf,
        width: usize,
        out: &mut Self::Buf,
    ) -> Result<()>;

    /// Splits the interleaved query/gate projection `qg` into `q` and `gate`, and
    /// applies the per-head q/k norms and partial RoPE at `positions` to `q` and `k`
    /// (in place).
    fn attention_inputs(
        &mut self,
        params: &AttentionParams<'_, Self>,
        qg: &Self::Buf,
        k: &mut Self::Buf,
        positions: &[u32],
        q: &mut Self::Buf,
        gate: &mut Self::Buf,
    ) -> Result<()>;
    /// Records the largest |key| and |value| (FP8 KV calibration).
    fn observe_kv(&mut self, observer: &KvObserver, k: &Self::Buf, v: &Self::Buf) -> Result<()>;
    /// Stores each row's keys and values in its cache row.
    fn store_kv(
        &mut self,
        kv: &mut <Self::Memory as CacheMemory>::Kv,
        plan: &ForwardPlan,
        k: &Self::Buf,
        v: &Self::Buf,
    ) -> Result<()>;
    /// Copies cached rows `(from, to)` of `span`'s sequence, in order (tree
    /// speculation's commit gathering accepted rows into place).
    fn copy_kv_rows(
        &mut self,
        kv: &mut <Self::Memory as CacheMemory>::Kv,
        plan: &ForwardPlan,
        span: &SpanPlan,
        moves: &[(usize, usize)],
    ) -> Result<()>;
    /// Logits of `rows` rows of `x` through `lm_head`, on the host (`[rows, vocab]`).
    fn logits(&mut self, lm_head: &Self::Linear, x: &Self::Buf, rows: usize) -> Result<Vec<f32>> {
        let mut out = self.alloc(rows * lm_head.out_features())?;
        self.linear(&[lm_head], x, rows, &mut [&mut out])?;
        let host = self.download(&out);
        self.free(out);
        host
    }

    /// The greedy token ([`crate::argmax`]: the first maximum, never NaN) of each
    /// `vocab`-wide row of `logits`, on the host; the buffer stays the caller's. The
    /// default downloads the rows; a device backend reduces them where they are.
    fn argmax_rows(&mut self, logits: &Self::Buf, vocab: usize) -> Result<Vec<u32>> {
        let host = self.download(logits)?;
        Ok(host.chunks_exact(vocab.max(1)).map(crate::argmax).collect())
    }

    /// The `k` most likely tokens of each `vocab`-wide row of `logits`
    /// ([`crate::TopLogits::of`]), on the host. The default downloads the rows; a device
    /// backend reduces them where they are.
    fn top_logits_rows(
        &mut self,
        logits: &Self::Buf,
        vocab: usize,
        k: usize,
    ) -> Result<Vec<crate::TopLogits>> {
        let host = self.download(logits)?;
        Ok(crate::logits::top_logits_per_row(&host, vocab, k))
    }

    /// Causal attention of each row's queries over its sequence's cached rows
    /// (through the page table), `[rows, heads · head_dim]`.
    fn attend(
        &mut self,
        shape: AttentionShape,
        kv: &<Self::Memory as CacheMemory>::Kv,
        plan: &ForwardPlan,
        q: &Self::Buf,
        out: &mut Self::Buf,
    ) -> Result<()>;

    /// The Gated DeltaNet's causal conv + SiLU over each span's rows of `qkv`,
    /// continuing and updating each span's conv window; writes head-major `q`, `k`
    /// (L2-normalised, `q` scaled) and `v` per span. A tree span's rows each take
    /// their window along their ancestor path and leave the window unchanged.
    #[allow(clippy::too_many_arguments)]
    fn gdn_conv(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        qkv: &Self::Buf,
        q: &mut Self::Buf,
        k: &mut Self::Buf,
        v: &mut Self::Buf,
    ) -> Result<()>;
    /// The gates, the delta rule (carrying each span's recurrent state) and the gated
    /// norm with output gate `z` (`[rows, value_heads · value_dim]`): `out` is `[rows,
    /// value_heads · value_dim]`, token-major. A tree span's rows each continue the
    /// committed state along their ancestor path (without a state per row) and leave
    /// the state unchanged.
    fn gdn_recurrence(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        inputs: GdnInputs<'_, Self>,
        z: &Self::Buf,
        out: &mut Self::Buf,
    ) -> Result<()>;
    /// Advances each span's recurrent state over its rows by the delta rule, with no
    /// output: what a token tree's commit runs its accepted path through
    /// (`GatedDeltaNet::commit` in `layers/gdn.rs`), so a backend may use the
    /// formulation its tree verification used, keeping the committed state consistent
    /// with the outputs already verified. `plan` has no token trees.
    fn gdn_advance(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        inputs: GdnInputs<'_, Self>,
    ) -> Result<()>;
}
