//! `edge-model`: the Qwen3.5/Qwen3.6 hybrid text model.
//!
//! Its job: parse `config.json`, load safetensors checkpoints (bf16, FP8 and ModelOpt
//! NVFP4; single-file or sharded; both the plain and the VL-wrapper key layouts), and
//! run the layers: zero-centred RMSNorm, Gated DeltaNet (chunked prefill and the
//! single-token recurrence), gated full attention with partial RoPE, SwiGLU MLP, and the
//! MTP head.
//!
//! The boundary: [`Qwen35Model::forward`] runs a [`StepBatch`] (tokens of one or more
//! sequences with explicit positions) over an `edge_kvcache::SequenceCache` (paged KV
//! and recurrent-state slots the model does not own), calling its operations through a
//! [`Backend`]. The CPU backend ([`cpu::Cpu`]) is the reference every device backend
//! is tested against.
//!
//! # What is public
//!
//! - Running a model: [`Qwen35Model`] (load, forward, MTP head, tree commit),
//!   [`Session`], [`StepBatch`] and [`LogitRows`], [`StepOutput`], [`TopLogits`] and
//!   the logit reductions ([`argmax`], [`log_sum_exp`], [`top_log_probs`]),
//!   [`AcceptedPath`], [`TreeInputs`], [`ActivationMode`], [`LoadOptions`],
//!   [`ModelError`].
//! - Checkpoints and configuration: [`checkpoint`], [`config`], [`kernel_sources`].
//! - Writing a backend: [`backend`] (the trait, the plan a pass hands its operations,
//!   the parameter structs of the layers), [`WeightUpload`], [`rope::Rope`]; the two
//!   backends, [`cpu`] and `cuda` (feature `cuda`: `CudaBackend` and its cache memory,
//!   the emulated device).
//! - Behind features: `export` (writing ModelOpt checkpoints: `edge-llm quantize`) and
//!   `bench` (random-weight checkpoints, `synthetic`, and the decode-attention kernel on
//!   its own, for tests and benchmarks).
//!
//! The layers' structs (`layers/`), their weights and the device row layouts the CUDA
//! kernels read are the crate's own: the model is built by loading a checkpoint, never
//! field by field, and a plan only by the model, so every index in one is checked.
//!
//! # Example
//!
//! Load a checkpoint and run it with this crate and `edge-kvcache` alone (a doc test,
//! so it runs with `cargo test`): a random tiny checkpoint is written first, then the
//! prompt runs as one pass and three greedy tokens follow, one pass each, over the
//! session's paged cache.
//!
//! ```
//! use edge_kvcache::CacheConfig;
//! use edge_model::synthetic::{SyntheticDType, tiny_config, write_random_checkpoint};
//! use edge_model::{ActivationMode, LogitRows, Qwen35Model, Session, argmax};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! write_random_checkpoint(dir.path(), &tiny_config(256), SyntheticDType::Bf16, 7)?;
//! let model = Qwen35Model::load(dir.path(), ActivationMode::None)?;
//! let vocab = model.config().vocab_size;
//!
//! let mut session = Session::new(&model, CacheConfig::default())?;
//! let out = session.forward(&[3, 14, 15, 9], LogitRows::Last)?;
//! assert_eq!(out.logits.len(), vocab);
//! let mut next = argmax(&out.logits);
//! for _ in 0..3 {
//!     let out = session.forward(&[next], LogitRows::Greedy)?;
//!     next = out.greedy[0];
//!     assert!((next as usize) < vocab);
//! }
//! assert_eq!(session.len(), 7);
//! // A token outside the vocabulary is a typed error, and the session is unchanged.
//! let err = session.forward(&[vocab as u32], LogitRows::Last);
//! assert!(matches!(err, Err(edge_model::ModelError::TokenOutOfVocab { .. })));
//! assert_eq!(session.len(), 7);
//! # Ok(())
//! # }
//! ```

#[cfg(feature = "cuda")]
mod attention_rows;
pub mod backend;
mod batch;
pub mod checkpoint;
pub mod config;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
#[cfg(feature = "export")]
pub mod export;
#[cfg(feature = "cuda")]
mod gdn_rows;
pub mod kernel_sources;
pub(crate) mod layers;
mod load;
mod logits;
#[cfg(any(feature = "bench", feature = "export", test))]
mod manifest;
mod math;
mod model;
pub mod mtp;
pub mod rope;
mod session;
#[cfg(any(feature = "bench", test))]
pub mod synthetic;
mod tree;
mod upload;
mod weights;

#[cfg(feature = "cuda")]
use attention_rows::AttentionRows;
pub use backend::{
    AttentionParams, AttentionShape, Backend, ForwardPlan, Gate, GdnInputs, GdnKept, GdnParams,
    GdnShape, KvObserver, LinearShape, SpanPlan, TreePlan,
};
pub use batch::{LogitRows, MAX_TREE_ROWS, SeqSpan, StepBatch, TreeLayout};
pub use checkpoint::{Checkpoint, TensorView};
pub use config::{LayerType, Qwen35Config};
pub use cpu::{Cpu, Scratch, ScratchBuf};
pub use error::{ModelError, Result};
#[cfg(feature = "cuda")]
use gdn_rows::GdnRows;
pub use logits::{TopLogits, argmax, log_sum_exp, top_log_probs};
pub use model::{Qwen35Model, StepOutput};
pub use mtp::MtpHead;
pub use session::Session;
pub use tree::{AcceptedPath, TreeInputs};
pub use upload::WeightUpload;
pub use weights::{ActivationMode, Embedding, LoadOptions};

#[cfg(test)]
mod architecture_tests;
