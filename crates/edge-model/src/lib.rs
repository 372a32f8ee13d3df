//! `edge-model`: the Qwen3.5/Qwen3.6 hybrid text model.
//!
//! Its job: parse `config.json`, load safetensors checkpoints (bf16, FP8 and ModelOpt
//! NVFP4; single-file or sharded; both the plain and the VL-wrapper key layouts), and
//! run the layers: zero-centred RMSNorm, Gated DeltaNet (chunked prefill and the
//! single-token recurrence), gated full attention with partial RoPE, SwiGLU MLP, and the
//! MTP head. The CPU path is the reference every device path is tested against.

pub mod checkpoint;
pub mod config;
mod error;
pub mod export;
pub mod layers;
pub mod manifest;
mod model;
pub mod mtp;
pub mod state;
pub mod synthetic;
mod weights;

pub use checkpoint::{Checkpoint, TensorView};
pub use config::{LayerType, Qwen35Config};
pub use error::{ModelError, Result};
pub use layers::scratch::{Scratch, ScratchBuf};
pub use model::{DecoderLayer, ForwardOutput, Logits, Mixer, Qwen35Model};
pub use mtp::{MtpHead, MtpOutput};
pub use state::{AttentionState, GdnState, LayerState, SequenceState, StateCheckpoint};
pub use weights::{ActivationMode, Embedding, KvCacheDType, LoadOptions};
