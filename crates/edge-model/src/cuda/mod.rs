//! The model's CUDA operations (behind the `cuda` feature): launch wrappers of the
//! kernels in `kernels/model/` (see [`crate::kernel_sources`]), each the GPU twin of a CPU
//! backend operation and tested against it (`tests/cuda_model_ops.rs`, ignored without a
//! GPU; `kernels/host_emulation/check_model.py` runs the same kernels on the host).
//!
//! These are the first building blocks of the CUDA [`crate::Backend`]; the backend itself
//! (device buffers and cache memory, attention and Gated DeltaNet kernels, CUDA graphs)
//! is not built yet.

mod attention;
mod gdn;
mod ops;
#[cfg(test)]
mod tests;

pub use attention::{DecodeAttention, KvPages, MAX_GROUP, SpanPages, attention_decode};
pub use gdn::{
    GdnDecodeInputs, GdnDecodeLayer, GdnHeads, MAX_HEAD_DIM, gdn_conv_decode, gdn_decode,
};
pub use ops::{add, argmax, concat_rows, embed_bf16, gate, gated_rms_norm, gather_rows, rms_norm};
