//! The CPU backend: the reference every other backend is tested against, and a
//! usable runtime (runtime-dispatched AVX-512 / AVX2 / NEON kernels, rayon threads).

mod attention;
mod attention_paged;
pub(crate) mod conv;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod decode_attention;
pub(crate) mod delta_rule;
pub(crate) mod delta_tree;
mod gdn;
mod gdn_tree;
pub(crate) mod kv_rows;
#[cfg(target_arch = "x86_64")]
mod matmul_x86;
pub(crate) mod norm;
pub mod scratch;
pub(crate) mod simd;

pub use scratch::{Scratch, ScratchBuf};

/// Decode (one-row) attention: the query heads `qs` (`[heads, head_dim]`, the heads
/// that share KV head `head`) over the first `visible` cached rows of that KV head in
/// a sequence whose page table is `pages`, written to `out` (`[heads, head_dim]`),
/// with scores scaled by `1/√head_dim`. The kernel a decode step runs per KV head, on
/// its own for benchmarks (feature `bench`).
#[cfg(feature = "bench")]
pub fn attend_decode(
    qs: &[f32],
    kv: &HostKv,
    pages: &[edge_kvcache::BlockId],
    head: usize,
    visible: usize,
    out: &mut [f32],
) {
    attention::attend_decode(qs, kv, pages, head, visible, out);
}

use crate::Result;
use crate::backend::{
    AttentionParams, AttentionShape, Backend, ForwardPlan, Gate, GdnInputs, GdnParams, KvObserver,
    SpanPlan,
};
use crate::weights::Embedding;
use crate::{Qwen35Model, Session, WeightUpload};
use edge_core::par;
use edge_kvcache::memory::{HostKv, HostRecurrent};
use edge_kvcache::{CacheConfig, CacheSpec, HostMemory};
use edge_quant::linear::Linear;

/// The CPU backend. It owns the pool of work buffers its passes reuse ([`Scratch`]):
/// keep one per thread of control (an engine, a session) so that decode steps
/// allocate nothing.
#[derive(Debug, Default)]
pub struct Cpu {
    scratch: Scratch,
}

impl Cpu {
    /// A backend with an empty buffer pool.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend whose buffers come from `scratch` (e.g. [`Scratch::poisoned`] in
    /// tests).
    pub fn with_scratch(scratch: Scratch) -> Self {
        Cpu { scratch }
    }

    /// The buffer pool.
    pub fn scratch(&self) -> &Scratch {
        &self.scratch
    }
}

/// Forward passes of at most this many tokens (decode steps, short verification
/// batches) run with a spinning team ([`par::spinning`]): their parallel regions are
/// short enough that waking a sleeping rayon worker for each costs more than the other
/// core spinning. Longer passes keep rayon, whose prompt loops (the bf16 GEMM, prompt
/// attention) do not go through [`par::for_each`].
const SPIN_MAX_TOKENS: usize = 4;

/// Runs a forward pass of `tokens` tokens, `f`, on a rayon worker thread. A forward
/// pass opens a few hundred parallel regions; started from a thread outside the pool,
/// each would park the caller and wake a worker (two context switches per region,
/// measured at ~15% of decode time on two cores). From a worker, regions run inline
/// and only split work is stolen.
fn on_worker<R: Send>(tokens: usize, f: impl FnOnce() -> R + Send) -> R {
    let pass = || {
        if tokens <= SPIN_MAX_TOKENS {
            par::spinning(f)
        } else {
            f()
        }
    };
    if rayon::current_thread_index().is_some() {
        pass()
    } else {
        rayon::scope(|_| pass())
    }
}

impl Backend for Cpu {
    type Buf = ScratchBuf;
    type Linear = Linear;
    type Vector = Vec<f32>;
    type Embedding = Embedding;
    type Memory = HostMemory;

    fn cache_memory(&mut self, spec: &CacheSpec, _config: &CacheConfig) -> Result<HostMemory> {
        Ok(HostMemory::new(spec)?)
    }

    fn pass<R: Send>(&mut self, tokens: usize, f: impl FnOnce(&mut Self) -> R + Send) -> R {
        on_worker(tokens, || f(self))
    }

    fn alloc(&mut self, len: usize) -> Result<ScratchBuf> {
        Ok(self.scratch.take(len))
    }

    fn buf_len(&self, buf: &ScratchBuf) -> usize {
        buf.len()
    }

    fn free(&mut self, buf: ScratchBuf) {
        self.scratch.give(buf);
    }

    fn upload(&mut self, values: &[f32]) -> Result<ScratchBuf> {
        let mut buf = self.scratch.take(values.len());
        buf.copy_from_slice(values);
        Ok(buf)
    }

    fn download(&mut self, buf: &ScratchBuf) -> Result<Vec<f32>> {
        Ok(buf.to_vec())
    }

    fn gather_rows(&mut self, x: &ScratchBuf, width: usize, rows: &[usize]) -> Result<ScratchBuf> {
        let mut out = self.scratch.take(rows.len() * width);
        for (o, &r) in out.chunks_exact_mut(width).zip(rows) {
            o.copy_from_slice(&x[r * width..][..width]);
        }
        Ok(out)
    }

    fn embed(&mut self, table: &Embedding, tokens: &[u32], out: &mut ScratchBuf) -> Result<()> {
        let h = out.len() / tokens.len().max(1);
        for (row, &tok) in out.chunks_exact_mut(h).zip(tokens) {
            table.lookup(tok, row)?;
        }
        Ok(())
    }

    fn linear(
        &mut self,
        layers: &[&Linear],
        x: &ScratchBuf,
        rows: usize,
        outs: &mut [&mut ScratchBuf],
    ) -> Result<()> {
        if let ([layer], [out]) = (layers, &mut *outs) {
            return Ok(layer.forward(x, rows, out)?);
        }
        let mut slices: Vec<&mut [f32]> = outs.iter_mut().map(|b| &mut ***b).collect();
        Ok(Linear::forward_shared(layers, x, rows, &mut slices)?)
    }

    fn logits(&mut self, lm_head: &Linear, x: &ScratchBuf, rows: usize) -> Result<Vec<f32>> {
        let mut out = vec![0.0; rows * lm_head.out_features()];
        lm_head.forward(x, rows, &mut out)?;
        Ok(out)
    }

    fn rms_norm(
        &mut self,
        x: &ScratchBuf,
        weight: &Vec<f32>,
        eps: f32,
        out: &mut ScratchBuf,
    ) -> Result<()> {
        norm::rms_norm_zero_centred_into(x, weight, eps, out);
        Ok(())
    }

    fn add(&mut self, x: &mut ScratchBuf, y: &ScratchBuf) -> Result<()> {
        norm::add_in_place(x, y);
        Ok(())
    }

    fn gate(&mut self, gate: Gate, g: &ScratchBuf, x: &mut ScratchBuf) -> Result<()> {
        norm::gate_in_place(gate, g, x);
        Ok(())
    }

    fn concat_rows(
        &mut self,
        a: &ScratchBuf,
        b: &ScratchBuf,
        width: usize,
        out: &mut ScratchBuf,
    ) -> Result<()> {
        let rows = out.chunks_exact_mut(2 * width);
        for ((o, x), y) in rows.zip(a.chunks_exact(width)).zip(b.chunks_exact(width)) {
            o[..width].copy_from_slice(x);
            o[width..].copy_from_slice(y);
        }
        Ok(())
    }

    fn attention_inputs(
        &mut self,
        params: &AttentionParams<'_, Self>,
        qg: &ScratchBuf,
        k: &mut ScratchBuf,
        positions: &[u32],
        q: &mut ScratchBuf,
        gate: &mut ScratchBuf,
    ) -> Result<()> {
        attention::prepare(params, qg, k, positions, q, gate);
        Ok(())
    }

    fn observe_kv(&mut self, observer: &KvObserver, k: &ScratchBuf, v: &ScratchBuf) -> Result<()> {
        observer.k.observe(k);
        observer.v.observe(v);
        Ok(())
    }

    fn store_kv(
        &mut self,
        kv: &mut HostKv,
        plan: &ForwardPlan,
        k: &ScratchBuf,
        v: &ScratchBuf,
    ) -> Result<()> {
        attention::store(kv, plan, k, v)
    }

    fn attend(
        &mut self,
        shape: AttentionShape,
        kv: &HostKv,
        plan: &ForwardPlan,
        q: &ScratchBuf,
        out: &mut ScratchBuf,
    ) -> Result<()> {
        attention::attend(shape, kv, plan, q, out);
        Ok(())
    }

    fn gdn_conv(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut HostRecurrent,
        plan: &ForwardPlan,
        qkv: &ScratchBuf,
        q: &mut ScratchBuf,
        k: &mut ScratchBuf,
        v: &mut ScratchBuf,
    ) -> Result<()> {
        gdn::conv(params, state, plan, qkv, (&mut *q, &mut *k, &mut *v))?;
        if plan.has_trees() {
            gdn_tree::conv(params, state, plan, qkv, (q, k, v))?;
        }
        Ok(())
    }

    fn gdn_recurrence(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut HostRecurrent,
        plan: &ForwardPlan,
        x: GdnInputs<'_, Self>,
        z: &ScratchBuf,
        out: &mut ScratchBuf,
    ) -> Result<()> {
        let inputs = host_inputs(&x);
        gdn::recurrence(params, state, plan, (inputs, z), out, &mut self.scratch)?;
        if plan.has_trees() {
            gdn_tree::recurrence(params, state, plan, (inputs, z), out)?;
        }
        Ok(())
    }

    fn gdn_advance(
        &mut self,
        params: &GdnParams<'_, Self>,
        state: &mut HostRecurrent,
        plan: &ForwardPlan,
        x: GdnInputs<'_, Self>,
    ) -> Result<()> {
        gdn_tree::advance(params, state, plan, host_inputs(&x))
    }

    fn copy_kv_rows(
        &mut self,
        kv: &mut HostKv,
        plan: &ForwardPlan,
        span: &SpanPlan,
        moves: &[(usize, usize)],
    ) -> Result<()> {
        for &(from, to) in moves {
            kv.copy_row(plan.cache_slot(span, from), plan.cache_slot(span, to))?;
        }
        Ok(())
    }
}

/// The delta rule's inputs as the CPU kernels take them.
fn host_inputs<'a>(x: &GdnInputs<'a, Cpu>) -> gdn::Inputs<'a> {
    gdn::Inputs {
        q: x.q,
        k: x.k,
        v: x.v,
        b: x.b,
        a: x.a,
    }
}

/// The CPU "uploads" by copying: `to_backend(&mut Cpu)` is a deep copy, which the tests
/// use to check the walk itself.
impl WeightUpload for Cpu {
    fn upload_linear(&mut self, linear: &Linear) -> Result<Linear> {
        Ok(linear.clone())
    }

    fn upload_vector(&mut self, values: &[f32]) -> Result<Vec<f32>> {
        Ok(values.to_vec())
    }

    fn upload_embedding(&mut self, table: &Embedding) -> Result<Embedding> {
        Ok(table.clone())
    }
}

impl<'m> Session<'m, Cpu> {
    /// A session on the CPU backend with a cache configured by `config` (prefix
    /// snapshots are never taken by a session).
    pub fn new(model: &'m Qwen35Model<Cpu>, config: CacheConfig) -> Result<Self> {
        Self::with_backend(model, Cpu::new(), config)
    }
}
