//! [`Engine`]: the one generation driver. It owns a model, a backend and a paged cache
//! and runs the requests in flight step by step: each request restores the longest
//! usable cached prefix, prefills the rest in passes cut by its [`PrefillPlan`]
//! (keeping snapshots for later requests), then decodes. One step runs the decode rows
//! of every decoding request and one prefill pass in a single forward (continuous
//! batching); a request that speculates (MTP chain or token tree, lossless for greedy
//! and sampled requests alike) runs its own verification forward.

mod active;
mod admit;
mod builder;
pub mod handle;
mod plan;
mod request;
mod schedule;
mod step;

pub use active::{Event, EventSink, RequestId};
pub use admit::MAX_TOP_LOGPROBS;
pub use builder::EngineBuilder;
pub use plan::PrefillPlan;
pub use request::{EngineStats, GenerateOutput, GenerateRequest, StopReason};

use crate::{Result, RuntimeError};
use active::{Active, Phase};
use edge_kvcache::{CacheConfig, PagedCache};
use edge_model::{Backend, Cpu, Qwen35Model};
use edge_spec::SpecConfig;
use std::sync::Arc;

/// Which cached prefixes a request may resume from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReusePolicy {
    /// Only snapshots at this request's own cut points taken with the same cuts below
    /// them (see [`PrefillPlan`]): output is bit-identical to running without the
    /// cache. Requests that mark their message ends as reuse points (as the chat path
    /// does) lose nothing by it.
    #[default]
    Exact,
    /// Any snapshot on the prompt's path (e.g. an earlier prompt's end that this
    /// request does not mark): more reuse for unmarked prompts, at the price of f32
    /// summation-order differences from an uncached run.
    Longest,
}

impl std::str::FromStr for ReusePolicy {
    type Err = RuntimeError;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "exact" => Ok(ReusePolicy::Exact),
            "longest" => Ok(ReusePolicy::Longest),
            _ => Err(RuntimeError::UnknownValue {
                what: "reuse policy",
                value: s.to_string(),
                expected: "exact or longest",
            }),
        }
    }
}

/// How an engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Requests decoding or prefilling at once (more wait in [`handle::EngineHandle`]'s
    /// queue).
    pub max_sequences: usize,
    /// The paged cache: page size, KV dtype, byte budget, prefix reuse on or off, and
    /// its own sequence limit (`EngineBuilder::build_cuda` sets it to
    /// `max_sequences`).
    pub cache: CacheConfig,
    /// Tokens per prefill pass (passes are cut at its multiples).
    pub prefill_chunk: usize,
    /// Tokens reserved for a request's decoding when it is placed in the cache (or
    /// fewer when its `max_new_tokens` is smaller); past them its pages grow as it
    /// decodes. When the budget cannot hold a running request's next rows, the newest
    /// request is preempted: its pages go back, and it waits to resume by recomputing
    /// its prompt and the tokens it had generated (from cached snapshots where it
    /// can). Larger values preempt less and admit fewer requests at once.
    pub decode_reserve: usize,
    /// A snapshot every this many prefill chunks (0: only at reuse points and prompt
    /// ends).
    pub snapshot_stride: usize,
    /// Which cached prefixes a request may resume from.
    pub reuse: ReusePolicy,
    /// MTP speculation (the model needs an MTP head); requests that record logits
    /// decode token by token.
    pub speculation: Option<SpecConfig>,
}

impl Default for EngineConfig {
    /// 8 sequences in flight, the cache's defaults (f32 pages of 32 tokens, 4 GiB, prefix
    /// reuse on), 512-token prefill chunks, 256 tokens reserved for decoding, no stride
    /// snapshots, exact reuse, no speculation.
    fn default() -> Self {
        EngineConfig {
            max_sequences: 8,
            cache: CacheConfig::default(),
            prefill_chunk: 512,
            decode_reserve: 256,
            snapshot_stride: 0,
            reuse: ReusePolicy::Exact,
            speculation: None,
        }
    }
}

/// A model with its backend and cache, running the requests in flight.
pub struct Engine<B: Backend> {
    model: Arc<Qwen35Model<B>>,
    backend: B,
    cache: PagedCache<B::Memory>,
    config: EngineConfig,
    stats: EngineStats,
    /// Requests placed in the cache, in submission order.
    active: Vec<Active<B>>,
    /// Requests checked and waiting for room (new ones, preempted ones), in submission
    /// order: they are placed oldest first.
    waiting: std::collections::VecDeque<Active<B>>,
    /// When the waiting requests' callers were last asked whether they are there.
    probed: std::time::Instant,
    next_id: u64,
}

impl<B: Backend> std::fmt::Debug for Engine<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .field("running", &self.active.len())
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

impl Engine<Cpu> {
    /// An engine on the CPU backend.
    pub fn new(model: impl Into<Arc<Qwen35Model<Cpu>>>, config: EngineConfig) -> Result<Self> {
        Self::with_backend(model.into(), Cpu::new(), config)
    }
}

impl<B: Backend> Engine<B> {
    /// An engine on `backend`. Errors if the configuration cannot work (speculation
    /// on a model without an MTP head, a zero prefill chunk or sequence limit, a
    /// budget too small for one block).
    pub fn with_backend(
        model: Arc<Qwen35Model<B>>,
        mut backend: B,
        config: EngineConfig,
    ) -> Result<Self> {
        if config.prefill_chunk == 0 || config.max_sequences == 0 {
            return Err(RuntimeError::InvalidConfig {
                reason: "the prefill chunk and the sequence limit must be at least 1".into(),
            });
        }
        if let Some(spec) = config.speculation {
            if model.mtp().is_none() {
                return Err(edge_spec::SpecError::NoMtpHead.into());
            }
            spec.validate()?;
        }
        let memory = backend.cache_memory(&model.cache_spec(&config.cache), &config.cache)?;
        let cache = PagedCache::with_memory(memory, config.cache)?;
        Ok(Engine {
            model,
            backend,
            cache,
            config,
            stats: EngineStats::default(),
            active: Vec::new(),
            waiting: Default::default(),
            probed: std::time::Instant::now(),
            next_id: 0,
        })
    }

    /// The model.
    pub fn model(&self) -> &Qwen35Model<B> {
        &self.model
    }

    /// The backend (e.g. to reach its device).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Totals over the requests served.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// The cache (its counters, bytes by kind, reference checks).
    pub fn cache(&self) -> &PagedCache<B::Memory> {
        &self.cache
    }

    /// Drops every cached prefix.
    pub fn clear_prefix_cache(&mut self) {
        self.cache.clear_prefixes();
    }

    /// Requests submitted and not finished: running, or waiting for room in the cache.
    pub fn in_flight(&self) -> usize {
        self.active.len() + self.waiting.len()
    }

    /// Requests submitted and waiting for room in the cache (new ones, or preempted
    /// ones that will resume).
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Whether a request submitted now would be placed at once: fewer than
    /// `max_sequences` running and none waiting for room. An [`handle::EngineHandle`]
    /// keeps later requests in its own queue until then.
    pub fn has_room(&self) -> bool {
        self.waiting.is_empty() && self.active.len() < self.config.max_sequences
    }

    /// The most tokens (prompt and generated) one request can hold: the model's
    /// context, or fewer when the cache budget holds fewer rows for one sequence.
    /// A request asking for more is an [`RuntimeError::ExceedsCache`] error; a caller
    /// with no limit of its own (an API request without `max_tokens`) asks for this.
    pub fn max_request_tokens(&self) -> usize {
        let ctx = self.model.config().max_position_embeddings;
        let lookahead = self.lookahead(true);
        ctx.min(self.cache.max_rows().saturating_sub(lookahead))
    }

    /// Runs one request to completion (the only one in flight: call it on an idle
    /// engine, or use [`Engine::submit`] and [`Engine::step`]). A malformed request,
    /// or one the whole cache budget could never hold ([`RuntimeError::ExceedsCache`]),
    /// fails before any work with a typed error; the cache is left as it was except
    /// for snapshots it may have evicted or gained.
    pub fn generate(&mut self, req: &GenerateRequest) -> Result<GenerateOutput> {
        let result = Arc::new(std::sync::Mutex::new(None));
        let slot = result.clone();
        let sink: EventSink = Box::new(move |event| {
            if let Event::Finished(r) = event {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            }
            true
        });
        let id = self.submit(req.clone(), Some(sink))?;
        while self.holds(id) {
            self.step();
        }
        let finished = result.lock().unwrap_or_else(|p| p.into_inner()).take();
        finished.unwrap_or_else(|| {
            Err(RuntimeError::Internal(
                "the request ended without a result".into(),
            ))
        })
    }

    /// Starts a request: checks it, then places it in the cache (its rows reserved,
    /// its longest usable cached prefix restored) when there is room, or leaves it
    /// waiting for room, placed by a later step. Its events go to `sink` as steps run.
    /// Input errors (a malformed request, one the whole cache budget could never
    /// hold) come back here, before any work, and send no event.
    pub fn submit(&mut self, req: GenerateRequest, sink: Option<EventSink>) -> Result<RequestId> {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let mut request = self.check(id, req, sink)?;
        if request.req.max_new_tokens == 0 {
            request.end(StopReason::Length);
            self.finish(request, Ok(()));
        } else {
            self.waiting.push_back(request);
            self.place_waiting();
        }
        Ok(id)
    }

    /// Whether request `id` is in flight (running or waiting).
    fn holds(&self, id: RequestId) -> bool {
        let mut all = self.active.iter().chain(&self.waiting);
        all.any(|a| a.id == id)
    }

    /// Cancels a request in flight: it ends with [`StopReason::Cancelled`] and its
    /// pages go back to the pool. Unknown ids are ignored.
    pub fn cancel(&mut self, id: RequestId) {
        if let Some(a) = self.active.iter_mut().find(|a| a.id == id) {
            a.end(StopReason::Cancelled);
        }
        let at = self.waiting.iter().position(|a| a.id == id);
        if let Some(mut a) = at.and_then(|at| self.waiting.remove(at)) {
            a.end(StopReason::Cancelled);
            self.finish(a, Ok(()));
        }
        self.finish_done();
    }

    /// Ends the requests waiting for room with `error` (they never ran, like the
    /// requests still queued in front of the engine when it shuts down).
    fn refuse_waiting(&mut self, error: impl Fn() -> RuntimeError) {
        while let Some(a) = self.waiting.pop_front() {
            self.finish(a, Err(error()));
        }
    }

    /// Cancels every request in flight (running and waiting).
    pub fn cancel_all(&mut self) {
        let ids: Vec<RequestId> = self
            .active
            .iter()
            .chain(&self.waiting)
            .map(|a| a.id)
            .collect();
        for id in ids {
            self.cancel(id);
        }
    }

    /// Releases the requests that are done and sends their results.
    fn finish_done(&mut self) {
        let mut i = 0;
        while i < self.active.len() {
            if matches!(self.active[i].phase, Phase::Done) {
                let mut a = self.active.remove(i);
                let status = a.error.take().map_or(Ok(()), Err);
                self.finish(a, status);
            } else {
                i += 1;
            }
        }
    }

    /// Ends `a`: frees what it holds, updates the totals and sends its result.
    fn finish(&mut self, mut a: Active<B>, status: Result<()>) {
        self.stop_speculating(&mut a);
        if let Some(t) = a.decode_start {
            a.out.decode_ms = t.elapsed().as_secs_f64() * 1e3;
        }
        let released = a.seq.take().map_or(Ok(()), |seq| self.cache.release(seq));
        let result = status
            .and_then(|()| released.map_err(RuntimeError::from))
            .map(|()| std::mem::replace(&mut a.out, empty_output(0)));
        if let Ok(out) = &result {
            self.stats.requests += 1;
            self.stats.prompt_tokens += out.prompt_tokens as u64;
            self.stats.cached_tokens += out.cached_tokens as u64;
            self.stats.generated_tokens += out.tokens.len() as u64;
        }
        a.send(Event::Finished(result));
    }
}

impl<B: Backend> Engine<B> {
    /// Ends `a`'s speculator (freeing its device buffers), adding its counters to the
    /// request's.
    fn stop_speculating(&mut self, a: &mut Active<B>) {
        if let Some(mut s) = a.speculator.take() {
            s.finish(&mut self.backend);
            let stats = a.out.speculation.get_or_insert_with(Default::default);
            stats.add(&s.stats());
        }
    }
}

/// An output with nothing generated yet.
fn empty_output(prompt_tokens: usize) -> GenerateOutput {
    GenerateOutput {
        tokens: Vec::new(),
        logits: None,
        stop: StopReason::Length,
        prompt_tokens,
        cached_tokens: 0,
        prefill_ms: 0.0,
        decode_ms: 0.0,
        speculation: None,
        logprobs: None,
    }
}
