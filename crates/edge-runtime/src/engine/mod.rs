//! [`Engine`]: the one generation driver. It owns a model, a backend and a paged cache;
//! each request restores the longest usable cached prefix, prefills the rest in passes
//! cut by its [`PrefillPlan`] (keeping snapshots for later requests), then decodes
//! token by token or with MTP speculation (a chain or a token tree, lossless for
//! greedy and sampled requests alike).

mod plan;
mod request;

pub use plan::PrefillPlan;
pub use request::{EngineStats, GenerateOutput, GenerateRequest, StopReason};

use crate::sampling::Sampler;
use crate::{Result, RuntimeError};
use edge_kvcache::{CacheConfig, PagedCache, PrefixCandidate, SeqId, SequenceCache, SnapshotData};
use edge_model::{Backend, Cpu, LogitRows, Qwen35Model, StepBatch};
use edge_spec::{SpecConfig, Speculator};
use std::sync::Arc;
use std::time::Instant;

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
            _ => Err(RuntimeError::InvalidRequest(format!(
                "unknown reuse policy `{s}` (expected exact or longest)"
            ))),
        }
    }
}

/// How an engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// The paged cache: page size, KV dtype, byte budget, prefix reuse on or off.
    pub cache: CacheConfig,
    /// Tokens per prefill pass (passes are cut at its multiples).
    pub prefill_chunk: usize,
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
    /// The cache's defaults (f32 pages of 32 tokens, 4 GiB, prefix reuse on), 512-token
    /// prefill chunks, no stride snapshots, exact reuse, no speculation.
    fn default() -> Self {
        EngineConfig {
            cache: CacheConfig::default(),
            prefill_chunk: 512,
            snapshot_stride: 0,
            reuse: ReusePolicy::Exact,
            speculation: None,
        }
    }
}

/// A model with its backend and cache, serving one request at a time.
#[derive(Debug)]
pub struct Engine<B: Backend = Cpu> {
    model: Arc<Qwen35Model<B>>,
    backend: B,
    cache: PagedCache<B::Memory>,
    config: EngineConfig,
    stats: EngineStats,
}

impl Engine<Cpu> {
    /// An engine on the CPU backend.
    pub fn new(model: impl Into<Arc<Qwen35Model>>, config: EngineConfig) -> Result<Self> {
        Self::with_backend(model.into(), Cpu::new(), config)
    }
}

impl<B: Backend> Engine<B> {
    /// An engine on `backend`. Errors if the configuration cannot work (speculation
    /// on a model without an MTP head, a zero prefill chunk, a budget too small for
    /// one block).
    pub fn with_backend(
        model: Arc<Qwen35Model<B>>,
        backend: B,
        config: EngineConfig,
    ) -> Result<Self> {
        if config.prefill_chunk == 0 {
            return Err(RuntimeError::InvalidRequest(
                "prefill chunk must be at least 1 token".into(),
            ));
        }
        if let Some(spec) = config.speculation {
            if model.mtp().is_none() {
                return Err(RuntimeError::InvalidRequest(
                    "speculation needs a model with an MTP head (mtp.* tensors)".into(),
                ));
            }
            spec.validate()?;
        }
        let spec = model.cache_spec(&config.cache);
        let cache = PagedCache::new(spec, config.cache)?;
        Ok(Engine {
            model,
            backend,
            cache,
            config,
            stats: EngineStats::default(),
        })
    }

    /// The model.
    pub fn model(&self) -> &Qwen35Model<B> {
        &self.model
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

    /// Runs one request to completion. A request the cache budget cannot hold, or a
    /// malformed one, fails before any work with a typed error; the cache is left as
    /// it was except for snapshots it may have evicted or gained.
    pub fn generate(&mut self, req: &GenerateRequest) -> Result<GenerateOutput> {
        let model = self.model.clone();
        let c = model.config();
        let (len, ctx) = (req.prompt.len(), c.max_position_embeddings);
        if len == 0 {
            return Err(RuntimeError::InvalidRequest("the prompt is empty".into()));
        }
        if let Some(&bad) = req.prompt.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(RuntimeError::InvalidRequest(format!(
                "token id {bad} is outside the vocabulary of {}",
                c.vocab_size
            )));
        }
        if len >= ctx {
            return Err(RuntimeError::InvalidRequest(format!(
                "the prompt has {len} tokens; the model's context is {ctx}, leaving no room to generate"
            )));
        }
        if let Some(&p) = req.reuse_points.iter().find(|&&p| p == 0 || p > len) {
            return Err(RuntimeError::InvalidRequest(format!(
                "reuse point {p} is outside the prompt of {len} tokens"
            )));
        }
        let sampler = Sampler::new(req.sampling)?;
        let speculation = self.config.speculation.filter(|_| !req.record_logits);
        let lookahead = speculation.map_or(0, |s| s.lookahead_rows());
        let rows = (len + req.max_new_tokens).min(ctx) + lookahead;
        let seq = self.cache.new_sequence(rows)?;
        let out = self.run(&model, seq, req, sampler, speculation);
        self.cache.release(seq)?;
        let out = out?;
        self.stats.requests += 1;
        self.stats.prompt_tokens += out.prompt_tokens as u64;
        self.stats.cached_tokens += out.cached_tokens as u64;
        self.stats.generated_tokens += out.tokens.len() as u64;
        Ok(out)
    }

    fn run(
        &mut self,
        model: &Qwen35Model<B>,
        seq: SeqId,
        req: &GenerateRequest,
        mut sampler: Sampler,
        speculation: Option<SpecConfig>,
    ) -> Result<GenerateOutput> {
        let start = Instant::now();
        let (prompt, len) = (&req.prompt[..], req.prompt.len());
        let mut out = GenerateOutput {
            tokens: Vec::new(),
            logits: req.record_logits.then(Vec::new),
            stop: StopReason::Length,
            prompt_tokens: len,
            cached_tokens: 0,
            prefill_ms: 0.0,
            decode_ms: 0.0,
            speculation: None,
        };
        if req.max_new_tokens == 0 {
            return Ok(out);
        }
        let prefilled = self.prefill(model, seq, prompt, &req.reuse_points)?;
        out.cached_tokens = prefilled.cached;
        out.prefill_ms = start.elapsed().as_secs_f64() * 1e3;
        let decode_start = Instant::now();
        let vocab = model.config().vocab_size;
        let ctx = model.config().max_position_embeddings;
        let mut logits = prefilled.logits;
        let mut token = sampler.sample(&logits[..vocab])?;
        let mut speculator = match (speculation, prefilled.hidden) {
            (Some(cfg), Some(hidden)) => {
                let mut s = Speculator::new(model, cfg)?;
                let row = self.backend.upload(&hidden);
                s.start(row, token, len - 1);
                Some(s)
            }
            _ => None,
        };
        loop {
            out.tokens.push(token);
            if let Some(rows) = out.logits.as_mut() {
                rows.extend_from_slice(&logits[..vocab]);
            }
            if req.stop_tokens.contains(&token) {
                out.stop = StopReason::Stop;
                break;
            }
            if out.tokens.len() >= req.max_new_tokens {
                break;
            }
            let position = self.cache.sequence(seq)?.len;
            if position >= ctx {
                out.stop = StopReason::Context;
                break;
            }
            if let Some(s) = speculator.as_mut() {
                let limit = req.max_new_tokens - out.tokens.len();
                let be = &mut self.backend;
                let emitted = s.step(model, be, &mut self.cache, seq, token, limit, &mut sampler);
                let emitted = match emitted {
                    Ok(e) => e,
                    Err(e) => {
                        s.finish(be);
                        return Err(e.into());
                    }
                };
                let (last, accepted) = emitted.split_last().expect("a step emits a token");
                for &t in accepted {
                    out.tokens.push(t);
                    if req.stop_tokens.contains(&t) {
                        out.stop = StopReason::Stop;
                        break;
                    }
                }
                if out.stop == StopReason::Stop {
                    break;
                }
                token = *last;
                continue;
            }
            let batch = StepBatch::single(seq, &[token], position, LogitRows::Last);
            let step = model.forward(&mut self.backend, &batch, &mut self.cache)?;
            self.backend.free(step.hidden);
            logits = step.logits;
            token = sampler.sample(&logits[..vocab])?;
        }
        if let Some(s) = speculator.as_mut() {
            s.finish(&mut self.backend);
            out.speculation = Some(s.stats());
        }
        out.decode_ms = decode_start.elapsed().as_secs_f64() * 1e3;
        Ok(out)
    }

    /// Restores the longest usable prefix and prefills the rest of `prompt`, keeping
    /// snapshots where the plan says.
    fn prefill(
        &mut self,
        model: &Qwen35Model<B>,
        seq: SeqId,
        prompt: &[u32],
        reuse_points: &[usize],
    ) -> Result<Prefilled> {
        let len = prompt.len();
        let mtp_rows = self.config.speculation.is_some();
        let plan = PrefillPlan::new(
            len,
            self.config.prefill_chunk,
            reuse_points,
            self.config.snapshot_stride,
            u64::from(mtp_rows),
        );
        let policy = self.config.reuse;
        let usable = |c: &PrefixCandidate| {
            let aligned = match policy {
                ReusePolicy::Exact => plan.tag(c.len) == Some(c.tag),
                ReusePolicy::Longest => true,
            };
            aligned && (c.len < len || c.has_logits) && (!mtp_rows || c.has_hidden)
        };
        let mut done = 0;
        let mut logits = None;
        let mut carry: Option<Vec<f32>> = None;
        if let Some(hit) = self.cache.lookup(prompt, usable) {
            let data = self.cache.restore(seq, hit)?;
            done = hit.len;
            logits = data.logits.filter(|_| done == len);
            carry = data.hidden;
        }
        let h = model.config().hidden_size;
        for (a, b, snapshot) in plan.passes_from(done) {
            let rows = if b == len {
                LogitRows::Last
            } else {
                LogitRows::None
            };
            let batch = StepBatch::single(seq, &prompt[a..b], a, rows);
            let step = model.forward(&mut self.backend, &batch, &mut self.cache)?;
            if mtp_rows {
                let hidden = self.backend.download(&step.hidden);
                self.mtp_rows(model, seq, prompt, (a, b), carry.as_deref(), &hidden)?;
                carry = Some(hidden[(b - a - 1) * h..].to_vec());
            }
            self.backend.free(step.hidden);
            if b == len {
                logits = Some(step.logits);
            }
            if snapshot {
                let data = SnapshotData {
                    logits: logits.clone().filter(|_| b == len),
                    hidden: carry.clone().filter(|_| mtp_rows),
                    tag: plan.tag(b).unwrap_or_default(),
                };
                self.cache.insert_snapshot(seq, &prompt[..b], data)?;
            }
        }
        Ok(Prefilled {
            cached: done,
            logits: logits.ok_or_else(|| {
                RuntimeError::InvalidRequest("the prompt produced no logits".into())
            })?,
            hidden: carry.filter(|_| mtp_rows),
        })
    }

    /// The MTP head's rows for a prefill pass over `prompt[a..b]`: positions
    /// `a − 1 .. b − 1`, pairing each hidden state with the prompt token after it
    /// (`carry` is the hidden state at `a − 1`).
    fn mtp_rows(
        &mut self,
        model: &Qwen35Model<B>,
        seq: SeqId,
        prompt: &[u32],
        (a, b): (usize, usize),
        carry: Option<&[f32]>,
        hidden: &[f32],
    ) -> Result<()> {
        let h = model.config().hidden_size;
        let first = a.max(1);
        if first >= b {
            return Ok(());
        }
        let mut rows = Vec::with_capacity((b - first) * h);
        if a > 0 {
            rows.extend_from_slice(carry.ok_or_else(|| {
                RuntimeError::InvalidRequest("a restored prefix lacks the MTP hidden row".into())
            })?);
        }
        rows.extend_from_slice(&hidden[..(b - a - 1) * h]);
        let rows = self.backend.upload(&rows);
        let batch = StepBatch::single(seq, &prompt[first..b], first - 1, LogitRows::None);
        let out = model.mtp_forward(&mut self.backend, &batch, &rows, &mut self.cache)?;
        self.backend.free(rows);
        self.backend.free(out.hidden);
        Ok(())
    }
}

/// What a prefill leaves for decoding.
struct Prefilled {
    /// Prompt tokens restored from the cache.
    cached: usize,
    /// The last prompt token's logits.
    logits: Vec<f32>,
    /// The last prompt token's final hidden state, when MTP rows are kept.
    hidden: Option<Vec<f32>>,
}
