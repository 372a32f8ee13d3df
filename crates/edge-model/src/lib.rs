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

pub mod attention_rows;
pub mod backend;
mod batch;
pub mod checkpoint;
pub mod config;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod export;
pub mod gdn_rows;
pub mod kernel_sources;
pub mod layers;
mod load;
mod logits;
pub mod manifest;
mod math;
mod model;
pub mod mtp;
mod session;
pub mod synthetic;
mod tree;
mod upload;
mod weights;

pub use attention_rows::{AttentionRows, QueryTiles};
pub use backend::{Backend, ForwardPlan, Gate, GdnKept, LinearShape, SpanPlan, TreePlan};
pub use batch::{LogitRows, MAX_TREE_ROWS, SeqSpan, StepBatch, TreeLayout};
pub use checkpoint::{Checkpoint, TensorView};
pub use config::{LayerType, Qwen35Config};
pub use cpu::{Cpu, Scratch, ScratchBuf};
pub use error::{ModelError, Result};
pub use gdn_rows::GdnRows;
pub use logits::{TopLogits, argmax, log_sum_exp, top_log_probs};
pub use model::{DecoderLayer, Mixer, Qwen35Model, StepOutput};
pub use mtp::MtpHead;
pub use session::Session;
pub use tree::{AcceptedPath, TreeInputs};
pub use upload::WeightUpload;
pub use weights::{ActivationMode, Embedding, LoadOptions};
