//! The narrow interface between the model's orchestration and a device.
//!
//! The layers ([`crate::layers`]) and the model ([`crate::Qwen35Model`]) are written
//! once, over [`Backend`]: they allocate buffers, call its operations in order and
//! never touch a value. A backend owns its buffers ([`Backend::Buf`]), the form its
//! weights take on the device, and the device memory of the cache
//! ([`Backend::Memory`]). The CPU backend ([`crate::cpu::Cpu`]) is the reference every
//! other backend is tested against.

use crate::Result;
use crate::layers::attention::{GatedAttention, KvObserver};
use crate::layers::gdn::GatedDeltaNet;
use edge_kvcache::{BlockId, CacheConfig, CacheMemory, CacheSpec, SlotId};
use std::fmt::Debug;
use std::ops::Range;

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

/// One sequence's share of a forward pass, as the layer operations see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanPlan {
    /// Its rows of the batch.
    pub rows: Range<usize>,
    /// The cache row (= position) of its first row; row `i` of the span is cache row
    /// `first + i` and attends to cache rows `0..=first + i`.
    pub first: usize,
    /// Its pages, covering at least cache rows `0..first + rows.len()`.
    pub pages: Vec<BlockId>,
    /// Its recurrent-state slot.
    pub slot: SlotId,
    /// For a token tree: where its rows are stored and what they see (`first` is then
    /// the committed end, and every row also sees the rows before it).
    pub tree: Option<TreePlan>,
}

/// A token-tree span's layout as the operations see it (see
/// [`crate::TreeLayout`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    /// Per row: its cache row as an offset from the committed end.
    pub slots: Vec<u32>,
    /// Per row: the offsets past the committed end that its attention sees.
    pub visible: Vec<u64>,
    /// Per row: its parent row within the span (`None` for a root, whose recurrent
    /// inputs continue the committed state).
    pub parents: Vec<Option<u32>>,
}

impl TreePlan {
    /// Cache rows past the committed end that the tree touches.
    pub fn extent(&self) -> usize {
        self.slots
            .iter()
            .map(|&s| s as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Row `row`'s path from its root, root first.
    pub fn path(&self, row: usize) -> Vec<usize> {
        let mut path = vec![row];
        while let Some(p) = self.parents[*path.last().expect("non-empty")] {
            path.push(p as usize);
        }
        path.reverse();
        path
    }
}

impl SpanPlan {
    /// Rows in the span.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True for an empty span (never in a validated plan).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Everything the layer operations need to know about a batch besides its
/// activations: where each row goes in the cache and whose state it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardPlan {
    /// The spans, in row order.
    pub spans: Vec<SpanPlan>,
    /// The position of each row (RoPE).
    pub positions: Vec<u32>,
    /// Tokens per KV page.
    pub block_size: usize,
}

impl ForwardPlan {
    /// Rows of the batch.
    pub fn tokens(&self) -> usize {
        self.positions.len()
    }

    /// The page and row within it where batch row `row` of `span` is cached.
    pub fn kv_slot(&self, span: &SpanPlan, row: usize) -> (BlockId, usize) {
        let offset = match &span.tree {
            Some(tree) => tree.slots[row] as usize,
            None => row,
        };
        self.cache_slot(span, span.first + offset)
    }

    /// The page and row within it of cache row `r` of `span`'s sequence.
    pub fn cache_slot(&self, span: &SpanPlan, r: usize) -> (BlockId, usize) {
        (span.pages[r / self.block_size], r % self.block_size)
    }

    /// True when some span is a token tree.
    pub fn has_trees(&self) -> bool {
        self.spans.iter().any(|s| s.tree.is_some())
    }

    /// The state slots of the spans, in order.
    pub fn slots(&self) -> Vec<SlotId> {
        self.spans.iter().map(|s| s.slot).collect()
    }

    /// One chain span of `rows` rows on `span`'s state slot: what a tree commit runs its
    /// accepted path through to advance the Gated DeltaNet (its ops read only the spans'
    /// rows and slots; the plan has no pages).
    pub fn gdn_chain(span: &SpanPlan, rows: usize) -> ForwardPlan {
        ForwardPlan {
            spans: vec![SpanPlan {
                rows: 0..rows,
                first: span.first,
                pages: Vec::new(),
                slot: span.slot,
                tree: None,
            }],
            positions: vec![0; rows],
            block_size: 1,
        }
    }
}

/// The inputs of a Gated DeltaNet recurrence after the conv: head-major per span
/// `q`, `k` (`[heads, rows, key_dim]`) and `v`; token-major `b`, `a` (β and decay
/// logits, `[rows, value_heads]`) and `z` (`[rows, value_heads · value_dim]`).
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
    /// Output gate.
    pub z: &'a B::Buf,
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
        layer: &GatedAttention<Self>,
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
        layer: &GatedAttention<Self>,
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
        layer: &GatedDeltaNet<Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        qkv: &Self::Buf,
        q: &mut Self::Buf,
        k: &mut Self::Buf,
        v: &mut Self::Buf,
    ) -> Result<()>;
    /// The gates, the delta rule (carrying each span's recurrent state) and the gated
    /// norm: `out` is `[rows, value_heads · value_dim]`, token-major. A tree span's
    /// rows each continue the committed state along their ancestor path (without a
    /// state per row) and leave the state unchanged.
    fn gdn_recurrence(
        &mut self,
        layer: &GatedDeltaNet<Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        plan: &ForwardPlan,
        inputs: GdnInputs<'_, Self>,
        out: &mut Self::Buf,
    ) -> Result<()>;
    /// Advances `span`'s conv window and recurrent state along `path` (rows of the
    /// span, root first, each the child of the one before) from what `kept` holds:
    /// the accepted path of a token tree.
    fn gdn_commit(
        &mut self,
        layer: &GatedDeltaNet<Self>,
        state: &mut <Self::Memory as CacheMemory>::Recurrent,
        span: &SpanPlan,
        kept: &GdnKept<Self>,
        path: &[usize],
    ) -> Result<()>;
}
