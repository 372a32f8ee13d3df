//! [`EngineBuilder`]: an engine from a model directory (or a loaded model) with the
//! defaults a user wants, set one by one; the CLI's `generate`, `serve` and `bench`
//! take their defaults from it.

use super::handle::EngineHandle;
use super::{Engine, EngineConfig, ReusePolicy};
use crate::{Result, RuntimeError};
use edge_core::Device;
use edge_kvcache::KvDType;
use edge_model::{ActivationMode, Cpu, Qwen35Model};
use edge_spec::SpecConfig;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the model comes from.
#[derive(Debug)]
enum Source {
    Dir(PathBuf),
    Loaded(Arc<Qwen35Model<Cpu>>),
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
/// - the CPU ([`EngineBuilder::device`]);
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
    pub fn from_model(model: Arc<Qwen35Model<Cpu>>) -> Self {
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

    /// The device: [`EngineBuilder::spawn`] builds the engine there;
    /// [`EngineBuilder::build`] is the CPU engine and `EngineBuilder::build_cuda`
    /// (feature `cuda`) the GPU one.
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

    /// Tokens reserved for a request's decoding when it is placed
    /// ([`EngineConfig::decode_reserve`]; 256 by default).
    pub fn decode_reserve(mut self, tokens: usize) -> Self {
        self.config.decode_reserve = tokens;
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
    pub fn config_for(&self, model: &Qwen35Model<Cpu>) -> EngineConfig {
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

    /// Loads the model (if given a directory) and builds the engine on the CPU. A
    /// missing or broken checkpoint, a CUDA device (see `EngineBuilder::build_cuda`
    /// and [`EngineBuilder::spawn`]), or a configuration that cannot work (speculation
    /// without an MTP head, a budget below one page) is a typed error.
    pub fn build(self) -> Result<Engine<Cpu>> {
        if self.device.is_cuda() {
            return Err(not_a_cpu_engine(self.device));
        }
        let model = self.host_model(self.activations)?;
        let config = self.config_for(&model);
        Engine::new(model, config)
    }

    /// The model on the host, loaded with `activations` if it comes from a directory
    /// or the embedded demo.
    fn host_model(&self, activations: ActivationMode) -> Result<Arc<Qwen35Model<Cpu>>> {
        Ok(match &self.source {
            Source::Dir(dir) => Arc::new(Qwen35Model::load(dir, activations)?),
            Source::Loaded(m) => m.clone(),
            #[cfg(feature = "demo-model")]
            Source::Demo => Arc::new(crate::demo::load(edge_model::LoadOptions { activations })?),
        })
    }

    /// Builds the engine on the CUDA device set by [`EngineBuilder::device`]
    /// (`cuda:0` when it is the CPU): the model loads on the host and its weights are
    /// uploaded once ([`edge_model::cuda::CudaBackend`]). On the GPU
    /// [`ActivationMode::Fastest`] means bf16 activations (the tensor-core kernels); a
    /// CPU-only mode (W4A8, W4A4 emulation) is a typed error naming the layer. Speculation
    /// stays off unless set: [`SpecConfig::fastest_on_cpu`] was measured on CPUs. No
    /// driver, no such device or no NVRTC is a typed error.
    ///
    /// The cache's device pools are allocated up front, so unless the cache
    /// configuration has its own sequence limit it gets the engine's `max_sequences`:
    /// the state slots then take that many sequences' worth of the budget and the pages
    /// the rest, instead of each pool reserving the whole budget. [`Engine::submit`]
    /// past the limit is then a typed error (the handle queues instead).
    #[cfg(feature = "cuda")]
    pub fn build_cuda(self) -> Result<Engine<edge_model::cuda::CudaBackend>> {
        use edge_model::cuda::CudaBackend;

        let device = match self.device {
            Device::Cpu => Device::Cuda(0),
            cuda => cuda,
        };
        let activations = self.activations.on_device(device);
        let host = self.host_model(activations)?;
        let mut backend = CudaBackend::for_device(device)?;
        let model = Arc::new(host.to_backend(&mut backend)?);
        let speculation = match self.speculation {
            Speculation::Given(s) => s,
            Speculation::Fastest => None,
        };
        let mut config = EngineConfig {
            speculation,
            ..self.config
        };
        config
            .cache
            .max_sequences
            .get_or_insert(config.max_sequences);
        Engine::with_backend(model, backend, config)
    }

    /// Builds the engine on the configured device and starts it on its own thread.
    pub fn spawn(self) -> Result<EngineHandle> {
        let queue = self.queue;
        match self.device {
            Device::Cpu => EngineHandle::spawn(self.build()?, queue),
            #[cfg(feature = "cuda")]
            Device::Cuda(_) | Device::CudaEmulated => {
                EngineHandle::spawn(self.build_cuda()?, queue)
            }
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) | Device::CudaEmulated => Err(not_a_cpu_engine(self.device)),
        }
    }
}

/// Why [`EngineBuilder::build`] refuses a CUDA device.
fn not_a_cpu_engine(device: Device) -> RuntimeError {
    if cfg!(feature = "cuda") {
        RuntimeError::InvalidConfig {
            reason: format!(
                "device {device}: build() makes a CPU engine; use build_cuda() or spawn()"
            ),
        }
    } else {
        RuntimeError::Core(edge_core::CoreError::DeviceUnavailable(format!(
            "device {device}: this build has no CUDA support (build with the `cuda` feature)"
        )))
    }
}
