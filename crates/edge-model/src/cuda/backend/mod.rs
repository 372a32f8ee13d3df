//! The CUDA [`Backend`]: the model's orchestration ([`crate::Qwen35Model`], the layers)
//! runs unchanged on one GPU, each operation mapped onto a launch wrapper of
//! [`crate::cuda`] on the device's stream, with activations in pooled device buffers
//! ([`DeviceBuf`]), weights uploaded once ([`WeightUpload`](crate::WeightUpload), see
//! [`CudaLinear`]) and the cache in device memory ([`CudaCacheMemory`]).
//!
//! ```no_run
//! # fn main() -> edge_model::Result<()> {
//! use edge_core::cuda::KernelCache;
//! use edge_kvcache::CacheConfig;
//! use edge_model::cuda::CudaBackend;
//! use edge_model::{ActivationMode, LogitRows, Qwen35Model, Session};
//!
//! let host = Qwen35Model::load("models/demo".as_ref(), ActivationMode::Bf16)?;
//! let mut gpu = CudaBackend::new(0, KernelCache::disabled())?;
//! let model = host.to_backend(&mut gpu)?;
//! let mut session = Session::with_backend(&model, gpu, CacheConfig::default())?;
//! let out = session.forward(&[1, 2, 3], LogitRows::Last)?;
//! # let _ = out; Ok(()) }
//! ```
//!
//! Launches are asynchronous; a failed launch or allocation is returned by the
//! operation that made it, and a fault inside a kernel by the next synchronising call
//! (a download, the logits). The CPU-only calibration hook ([`Backend::observe_kv`]) is
//! refused: calibrate on the CPU.

mod buffers;
mod plans;
mod weights;

pub use buffers::DeviceBuf;
pub use weights::{CudaEmbedding, CudaLinear, CudaVector};

use super::gdn::{GdnHeads, GdnLayer};
use super::memory::{CudaCacheMemory, DeviceKv, DeviceRecurrent};
use super::{KvPages, PagedAttention, rope};
use crate::backend::{
    AttentionParams, AttentionShape, Backend, ForwardPlan, Gate, GdnInputs, GdnParams, GdnShape,
    KvObserver, SpanPlan,
};
use crate::{ModelError, Result};
use buffers::BufferPool;
use edge_core::cuda::{CudaDevice, DeviceSlice, KernelCache};
use edge_kvcache::{CacheConfig, CacheSpec, PoolCapacity};
use plans::{Mirror, PlanUploads};
use std::sync::Arc;

/// Bytes of freed activation buffers the pool keeps by default.
pub const DEFAULT_POOL_BYTES: usize = 256 << 20;

/// The CUDA backend on one device. Keep one per thread of control (an engine, a
/// session), as with the CPU backend: its buffer pool and plan uploads are its own.
pub struct CudaBackend {
    dev: Arc<CudaDevice>,
    pool: BufferPool,
    plans: PlanUploads,
    /// The rows' positions (every attention layer of a pass takes the same).
    positions: Mirror<u32>,
    /// The rotary inverse frequencies (every attention layer of a model shares them).
    inv_freq: Mirror<f32>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.dev)
            .field("pooled_bytes", &self.pool.pooled_bytes())
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// The backend on GPU `ordinal`, compiling kernels through `cache`. Fails with a
    /// clear error when no driver, no such device or no NVRTC is found.
    pub fn new(ordinal: usize, cache: KernelCache) -> Result<Self> {
        Ok(Self::on(CudaDevice::new(ordinal, cache)?))
    }

    /// The backend on GPU `ordinal`, with compiled kernels kept in
    /// [`KernelCache::user_default_dir`] (not kept when there is no such folder).
    pub fn with_default_cache(ordinal: usize) -> Result<Self> {
        Self::for_device(edge_core::Device::Cuda(ordinal))
    }

    /// The backend on `device`: a GPU (kernels kept in the default cache, as
    /// [`CudaBackend::with_default_cache`]) or the emulated device with every kernel of
    /// the workspace ([`super::emulated_device`]); the CPU is an error.
    pub fn for_device(device: edge_core::Device) -> Result<Self> {
        let cache =
            KernelCache::user_default_dir().map_or_else(KernelCache::disabled, KernelCache::in_dir);
        Ok(Self::on(CudaDevice::open(
            device,
            &super::HOST_KERNEL_TABLES,
            cache,
        )?))
    }

    /// The backend on an opened device.
    pub fn on(dev: Arc<CudaDevice>) -> Self {
        CudaBackend {
            dev,
            pool: BufferPool::new(DEFAULT_POOL_BYTES),
            plans: PlanUploads::default(),
            positions: Mirror::new(),
            inv_freq: Mirror::new(),
        }
    }

    /// The device.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// Waits for every launch so far and returns the first fault among them.
    pub fn synchronize(&self) -> Result<()> {
        Ok(self.dev.synchronize()?)
    }
}

/// The operands of an operation, all empty (a zero-row call: nothing to launch) or all
/// allocated.
fn operands<'a, const N: usize>(
    op: &'static str,
    bufs: [&'a DeviceBuf; N],
) -> Result<Option<[&'a DeviceSlice<f32>; N]>> {
    let present = bufs.iter().filter(|b| !b.is_empty()).count();
    match present {
        0 => Ok(None),
        n if n == N => Ok(Some(bufs.map(|b| b.slice().expect("non-empty")))),
        _ => Err(ModelError::OperandMismatch {
            op,
            reason: format!(
                "some operands are empty and others not ({:?})",
                bufs.map(DeviceBuf::len)
            ),
        }),
    }
}

/// The written operand of an operation whose inputs are allocated.
fn written<'a>(op: &'static str, buf: &'a mut DeviceBuf) -> Result<&'a mut DeviceSlice<f32>> {
    buf.slice_mut().ok_or_else(|| ModelError::OperandMismatch {
        op,
        reason: "the output is empty and the inputs are not".into(),
    })
}

/// The one written operand of an operation, or `None` when the call has no rows.
fn output<'a>(
    op: &'static str,
    buf: &'a mut DeviceBuf,
    inputs_empty: bool,
) -> Result<Option<&'a mut DeviceSlice<f32>>> {
    match (buf.slice_mut(), inputs_empty) {
        (None, true) => Ok(None),
        (Some(s), false) => Ok(Some(s)),
        (s, _) => Err(ModelError::OperandMismatch {
            op,
            reason: format!(
                "the output is {} and the inputs {}",
                if s.is_some() { "allocated" } else { "empty" },
                if inputs_empty { "empty" } else { "allocated" }
            ),
        }),
    }
}

/// Cache slots (`page · block + row`) of `moves` between cache rows of `span`.
fn slot_moves(
    plan: &ForwardPlan,
    span: &SpanPlan,
    moves: &[(usize, usize)],
) -> Result<Vec<(u32, u32)>> {
    let slot = |r: usize| -> Result<u32> {
        let (page, row) = plan.cache_slot(span, r);
        crate::error::dim_u32("kv copy", "slot", page.index() * plan.block_size + row)
    };
    moves
        .iter()
        .map(|&(a, b)| Ok((slot(a)?, slot(b)?)))
        .collect()
}

impl Backend for CudaBackend {
    type Buf = DeviceBuf;
    type Linear = CudaLinear;
    type Vector = CudaVector;
    type Embedding = CudaEmbedding;
    type Memory = CudaCacheMemory;

    /// Pools preallocated from the configuration ([`PoolCapacity::for_config`]: with a
    /// sequence limit, slots for those sequences and pages for the rest of the budget;
    /// without, each pool sized for the whole budget).
    fn cache_memory(&mut self, spec: &CacheSpec, config: &CacheConfig) -> Result<CudaCacheMemory> {
        let capacity = PoolCapacity::for_config(spec, config);
        CudaCacheMemory::new(&self.dev, spec, capacity)
    }

    fn pass<R: Send>(&mut self, _tokens: usize, f: impl FnOnce(&mut Self) -> R + Send) -> R {
        f(self)
    }

    fn alloc(&mut self, len: usize) -> Result<DeviceBuf> {
        self.pool.take(&self.dev, len)
    }

    fn buf_len(&self, buf: &DeviceBuf) -> usize {
        buf.len()
    }

    fn free(&mut self, buf: DeviceBuf) {
        self.pool.give(buf);
    }

    fn upload(&mut self, values: &[f32]) -> Result<DeviceBuf> {
        if values.is_empty() {
            return Ok(DeviceBuf::empty());
        }
        Ok(DeviceBuf::from_slice(self.dev.upload(values)?))
    }

    fn download(&mut self, buf: &DeviceBuf) -> Result<Vec<f32>> {
        match buf.slice() {
            None => Ok(Vec::new()),
            Some(s) => Ok(self.dev.download(s)?),
        }
    }

    /// The argmax kernel on the device; only the ids come back.
    fn argmax_rows(&mut self, logits: &DeviceBuf, vocab: usize) -> Result<Vec<u32>> {
        let Some(l) = logits.slice() else {
            return Ok(Vec::new());
        };
        // A zero-length allocation is not valid: a malformed length reaches argmax's
        // own check with one id of room.
        let rows = l.len() / vocab.max(1);
        let mut ids = self.dev.zeros::<u32>(rows.max(1))?;
        super::argmax(&self.dev, l, vocab, &mut ids)?;
        let mut ids = self.dev.download(&ids)?;
        ids.truncate(rows);
        Ok(ids)
    }

    /// The top-k kernel at temperature 1 on the device: only `k` candidates and the
    /// softmax statistics of each row come back (log Σ eˡ = max + ln Σ e^{l − max}).
    fn top_logits_rows(
        &mut self,
        logits: &DeviceBuf,
        vocab: usize,
        k: usize,
    ) -> Result<Vec<crate::TopLogits>> {
        let Some(l) = logits.slice() else {
            return Ok(Vec::new());
        };
        if k == 0 || k > super::MAX_TOP_K {
            // Nothing to reduce, or more than the kernel keeps: the host's way.
            let host = self.download(logits)?;
            return Ok(crate::logits::top_logits_per_row(&host, vocab, k));
        }
        let top = super::top_k(&self.dev, l, vocab, k, 1.0)?;
        Ok((0..top.counts.len())
            .map(|r| {
                let n = top.counts[r] as usize;
                crate::TopLogits {
                    ids: top.ids[r * k..][..n].to_vec(),
                    logits: top.values[r * k..][..n].to_vec(),
                    log_sum_exp: top.max[r] + top.sum[r].ln(),
                }
            })
            .collect())
    }

    fn gather_rows(&mut self, x: &DeviceBuf, width: usize, rows: &[usize]) -> Result<DeviceBuf> {
        let mut out = self.alloc(rows.len() * width)?;
        let Some(dst) = out.slice_mut() else {
            return Ok(out);
        };
        let [src] = operands("gather_rows", [x])?.ok_or_else(|| ModelError::OperandMismatch {
            op: "gather_rows",
            reason: "rows of an empty buffer".into(),
        })?;
        let host: Vec<u32> = (rows.iter())
            .map(|&r| crate::error::dim_u32("gather_rows", "row", r))
            .collect::<Result<_>>()?;
        let on_device = self.dev.upload(&host)?;
        super::gather_rows(&self.dev, src, width, &on_device, &host, dst)?;
        Ok(out)
    }

    fn embed(&mut self, table: &CudaEmbedding, tokens: &[u32], out: &mut DeviceBuf) -> Result<()> {
        let Some(dst) = output("embed", out, tokens.is_empty())? else {
            return Ok(());
        };
        let ids = self.dev.upload(tokens)?;
        super::embed_bf16(&self.dev, &table.table, table.hidden, &ids, tokens, dst)
    }

    fn linear(
        &mut self,
        layers: &[&CudaLinear],
        x: &DeviceBuf,
        rows: usize,
        outs: &mut [&mut DeviceBuf],
    ) -> Result<()> {
        let Some([x]) = operands("linear", [x])? else {
            return Ok(());
        };
        for (layer, out) in layers.iter().zip(outs.iter_mut()) {
            let y = written("linear", out)?;
            layer.forward(self, x, rows, y)?;
        }
        Ok(())
    }

    fn rms_norm(
        &mut self,
        x: &DeviceBuf,
        weight: &CudaVector,
        eps: f32,
        out: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([x]) = operands("rms_norm", [x])? else {
            return Ok(());
        };
        let y = written("rms_norm", out)?;
        super::rms_norm(&self.dev, x, &weight.0, eps, y)
    }

    fn add(&mut self, x: &mut DeviceBuf, y: &DeviceBuf) -> Result<()> {
        let Some([y]) = operands("add", [y])? else {
            return Ok(());
        };
        let x = written("add", x)?;
        super::add(&self.dev, x, y)
    }

    fn gate(&mut self, gate: Gate, g: &DeviceBuf, x: &mut DeviceBuf) -> Result<()> {
        let Some([g]) = operands("gate", [g])? else {
            return Ok(());
        };
        let x = written("gate", x)?;
        super::gate(&self.dev, gate, g, x)
    }

    fn concat_rows(
        &mut self,
        a: &DeviceBuf,
        b: &DeviceBuf,
        width: usize,
        out: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([a, b]) = operands("concat_rows", [a, b])? else {
            return Ok(());
        };
        let y = written("concat_rows", out)?;
        super::concat_rows(&self.dev, a, b, width, y)
    }

    fn attention_inputs(
        &mut self,
        params: &AttentionParams<'_, Self>,
        qg: &DeviceBuf,
        k: &mut DeviceBuf,
        positions: &[u32],
        q: &mut DeviceBuf,
        gate: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([qg]) = operands("attention_inputs", [qg])? else {
            return Ok(());
        };
        let dev = &self.dev;
        let on_device = self.positions.get(dev, positions)?;
        let inv_freq = self.inv_freq.get(dev, params.rope.inv_freq())?;
        let norms = rope::AttentionNorms {
            heads: params.shape.heads,
            kv_heads: params.shape.kv_heads,
            head_dim: params.shape.head_dim,
            q_norm: &params.q_norm.0,
            k_norm: &params.k_norm.0,
            inv_freq,
            eps: params.eps,
        };
        let k = written("attention_inputs", k)?;
        let q = written("attention_inputs", q)?;
        let gate = written("attention_inputs", gate)?;
        super::attention_inputs(dev, &norms, qg, k, on_device, q, gate)
    }

    fn observe_kv(&mut self, _observer: &KvObserver, _k: &DeviceBuf, _v: &DeviceBuf) -> Result<()> {
        Err(ModelError::Unsupported {
            backend: "cuda",
            what: "FP8 KV calibration (calibrate on the CPU backend)".into(),
        })
    }

    fn store_kv(
        &mut self,
        kv: &mut DeviceKv,
        plan: &ForwardPlan,
        k: &DeviceBuf,
        v: &DeviceBuf,
    ) -> Result<()> {
        let Some([k, v]) = operands("store_kv", [k, v])? else {
            return Ok(());
        };
        let dev = self.dev.clone();
        let rows = self.plans.attention(&dev, plan)?;
        super::kv_store(&dev, &mut kv.layer_mut(), rows, k, v)
    }

    fn copy_kv_rows(
        &mut self,
        kv: &mut DeviceKv,
        plan: &ForwardPlan,
        span: &SpanPlan,
        moves: &[(usize, usize)],
    ) -> Result<()> {
        let moves = slot_moves(plan, span, moves)?;
        super::kv_copy_rows(&self.dev, &mut kv.layer_mut(), &moves)
    }

    fn attend(
        &mut self,
        shape: AttentionShape,
        kv: &DeviceKv,
        plan: &ForwardPlan,
        q: &DeviceBuf,
        out: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([q]) = operands("attend", [q])? else {
            return Ok(());
        };
        let dev = self.dev.clone();
        let rows = self.plans.attention(&dev, plan)?;
        let pages: KvPages<'_> = kv.pages();
        let paged = PagedAttention {
            pages,
            kv_heads: shape.kv_heads,
            group: shape.group(),
            head_dim: shape.head_dim,
        };
        let out = written("attend", out)?;
        super::attention_rows(&dev, &paged, rows, q, out)
    }

    fn gdn_conv(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut DeviceRecurrent,
        plan: &ForwardPlan,
        qkv: &DeviceBuf,
        q: &mut DeviceBuf,
        k: &mut DeviceBuf,
        v: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([qkv]) = operands("gdn_conv", [qkv])? else {
            return Ok(());
        };
        let dev = self.dev.clone();
        let spans = self.plans.gdn(&dev, plan)?;
        let (windows, _) = state.pools_mut();
        let q = written("gdn_conv", q)?;
        let k = written("gdn_conv", k)?;
        let v = written("gdn_conv", v)?;
        super::gdn_conv(
            &dev,
            gdn_heads(params.shape),
            &params.conv_taps.0,
            windows,
            spans,
            qkv,
            (q, k, v),
        )
    }

    fn gdn_recurrence(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut DeviceRecurrent,
        plan: &ForwardPlan,
        x: GdnInputs<'_, Self>,
        z: &DeviceBuf,
        out: &mut DeviceBuf,
    ) -> Result<()> {
        let Some([q, k, v, b, a, z]) = operands("gdn_recurrence", [x.q, x.k, x.v, x.b, x.a, z])?
        else {
            return Ok(());
        };
        let dev = self.dev.clone();
        let spans = self.plans.gdn(&dev, plan)?;
        let (_, states) = state.pools_mut();
        let inputs = super::GdnInputs { q, k, v, b, a, z };
        let out = written("gdn_recurrence", out)?;
        super::gdn_recurrence(&dev, &gdn_layer(params), states, spans, &inputs, out)
    }

    /// The recurrence kernel with its output dropped: it steps each row's state in
    /// order, as a decode does. The output gate only shapes that output, so `z` is an
    /// unwritten buffer.
    fn gdn_advance(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut DeviceRecurrent,
        plan: &ForwardPlan,
        x: GdnInputs<'_, Self>,
    ) -> Result<()> {
        let width = plan.tokens() * params.shape.value_heads * params.shape.value_dim;
        let (z, mut out) = (self.alloc(width)?, self.alloc(width)?);
        let result = self.gdn_recurrence(params, state, plan, x, &z, &mut out);
        self.free(z);
        self.free(out);
        result
    }
}

fn gdn_heads(shape: GdnShape) -> GdnHeads {
    GdnHeads {
        key_heads: shape.key_heads,
        value_heads: shape.value_heads,
        key_dim: shape.key_dim,
        value_dim: shape.value_dim,
    }
}

fn gdn_layer<'a>(params: &GdnParams<'a, CudaBackend>) -> GdnLayer<'a> {
    GdnLayer {
        heads: gdn_heads(params.shape),
        neg_a: &params.neg_a.0,
        dt_bias: &params.dt_bias.0,
        norm_weight: &params.norm_weight.0,
        eps: params.eps,
    }
}
