//! [`EngineBuilder`]: an engine from a model directory (or a loaded model) with the
//! defaults a user wants, set one by one; the CLI's `generate`, `serve` and `bench`
//! take their defaults from it.

use super::handle::EngineHandle;
use super::{Engine, EngineConfig, ReusePolicy};
use crate::{Result, RuntimeError};
use edge_core::Device;
use edge_kvcache::KvDType;
use edge_model::{ActivationMode, Qwen35Model};
use edge_spec::SpecConfig;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the model comes from.
#[derive(Debug)]
enum Source {
    Dir(PathBuf),
    Loaded(Arc<Qwen35Model>),
    /// The demo model compiled into the binary (`crate::demo`).
    #[cfg(feature = "demo-model")]
    Demo,
}

/// Whether and how to speculate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Speculation {
    /// [`SpecConfig::fastest_on_cpu`] for the model, when it has an MTP head.
    Fastest,
    /// Exactly this (`None`: off).
    Given(Option<SpecConfig>),
}

/// Builds an [`Engine`] or an [`EngineHandle`]. Defaults:
/// - activations [`ActivationMode::Fastest`] (W4A8 for NVFP4 checkpoints, bf16
///   activations for float ones: the fastest modes docs/NUMERICS.md documents);
/// - the CPU;
/// - the cache's defaults (f32 pages of 32 tokens, 4 GiB, prefix reuse on, exact);
/// - speculation as [`SpecConfig::fastest_on_cpu`] measured it (off for models that
///   stay in cache, a chain of 3 for the others), for models with an MTP head;
/// - 8 sequences in flight, 64 queued requests.
#[derive(Debug)]
pub struct EngineBuilder {
    source: Source,
    device: Device,
    activations: ActivationMode,
    config: EngineConfig,
    speculation: Speculation,
    queue: usize,
}

impl EngineBuilder {
    /// An engine for the model in `dir` (loaded by [`EngineBuilder::build`]).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_source(Source::Dir(dir.into()))
    }

    /// An engine for a model already loaded (its activation mode is the one it was
    /// loaded with).
    pub fn from_model(model: Arc<Qwen35Model>) -> Self {
        Self::with_source(Source::Loaded(model))
    }

    /// An engine for the demo model compiled into the binary (feature `demo-model`),
    /// loaded by [`EngineBuilder::build`]; [`crate::demo`] has its tokenizer and chat
    /// template.
    #[cfg(feature = "demo-model")]
    pub fn demo() -> Self {
        Self::with_source(Source::Demo)
    }

    fn with_source(source: Source) -> Self {
        EngineBuilder {
            source,
            device: Device::Cpu,
            activations: ActivationMode::Fastest,
            config: EngineConfig::default(),
            speculation: Speculation::Fastest,
            queue: 64,
        }
    }

    /// The device (`cuda:N` needs the CUDA backend, which is not built yet: a typed
    /// error at [`EngineBuilder::build`]).
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// How linear layers take their activations (for a model loaded from a directory).
    pub fn activations(mut self, mode: ActivationMode) -> Self {
        self.activations = mode;
        self
    }

    /// The KV page element type.
    pub fn kv_dtype(mut self, dtype: KvDType) -> Self {
        self.config.cache.kv_dtype = dtype;
        self
    }

    /// The cache's byte budget (pages, state slots, prefix snapshots).
    pub fn kv_budget(mut self, bytes: usize) -> Self {
        self.config.cache.budget_bytes = bytes;
        self
    }

    /// Tokens per KV page.
    pub fn block_size(mut self, tokens: usize) -> Self {
        self.config.cache.block_size = tokens;
        self
    }

    /// Prefix reuse across requests on or off.
    pub fn prefix_cache(mut self, on: bool) -> Self {
        self.config.cache.prefix_cache = on;
        self
    }

    /// Which cached prefixes a request may resume from.
    pub fn reuse(mut self, policy: ReusePolicy) -> Self {
        self.config.reuse = policy;
        self
    }

    /// Tokens per prefill pass.
    pub fn prefill_chunk(mut self, tokens: usize) -> Self {
        self.config.prefill_chunk = tokens;
        self
    }

    /// A prefix snapshot every this many prefill chunks (0: only at reuse points and
    /// prompt ends).
    pub fn snapshot_stride(mut self, chunks: usize) -> Self {
        self.config.snapshot_stride = chunks;
        self
    }

    /// Speculation: `Some(config)`, or `None` for off (the default picks the fastest
    /// measured mode for the model).
    pub fn speculation(mut self, spec: Option<SpecConfig>) -> Self {
        self.speculation = Speculation::Given(spec);
        self
    }

    /// Requests decoding or prefilling at once.
    pub fn max_sequences(mut self, n: usize) -> Self {
        self.config.max_sequences = n;
        self
    }

    /// Requests an [`EngineHandle`] queues while the engine is full.
    pub fn queue(mut self, n: usize) -> Self {
        self.queue = n;
        self
    }

    /// The configuration the engine would run with for `model`.
    pub fn config_for(&self, model: &Qwen35Model) -> EngineConfig {
        let speculation = match self.speculation {
            Speculation::Given(s) => s,
            Speculation::Fastest => model
                .mtp()
                .and_then(|_| SpecConfig::fastest_on_cpu(model.weight_bytes_per_token())),
        };
        EngineConfig {
            speculation,
            ..self.config
        }
    }

    /// Loads the model (if given a directory) and builds the engine. A missing or
    /// broken checkpoint, a device without a backend, or a configuration that cannot
    /// work (speculation without an MTP head, a budget below one page) is a typed
    /// error.
    pub fn build(self) -> Result<Engine> {
        if !self.device.is_cpu() {
            return Err(RuntimeError::InvalidRequest(format!(
                "device {}: the CUDA backend of the model is not built yet; use cpu",
                self.device
            )));
        }
        let model = match &self.source {
            Source::Dir(dir) => Arc::new(Qwen35Model::load(dir, self.activations)?),
            Source::Loaded(m) => m.clone(),
            #[cfg(feature = "demo-model")]
            Source::Demo => Arc::new(crate::demo::load(edge_model::LoadOptions {
                activations: self.activations,
            })?),
        };
        let config = self.config_for(&model);
        Engine::new(model, config)
    }

    /// Builds the engine and starts it on its own thread.
    pub fn spawn(self) -> Result<EngineHandle> {
        let queue = self.queue;
        EngineHandle::spawn(self.build()?, queue)
    }
}
