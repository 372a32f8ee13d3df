//! The model's CUDA operations (behind the `cuda` feature): launch wrappers of the
//! kernels in `kernels/model/` (see [`crate::kernel_sources`]), each the GPU twin of a CPU
//! backend operation and tested against it (`cuda/tests.rs` and `cuda/attention_tests.rs`,
//! ignored without a GPU; `kernels/host_emulation/check_model.py` runs the same kernels on
//! the host).
//!
//! [`CudaBackend`] puts them together behind [`crate::Backend`], with the cache's device
//! memory ([`CudaCacheMemory`]) and weights uploaded once: that, the emulated device
//! ([`emulated_device`]) and the kernel tables are the public API; the launch wrappers
//! are the backend's own. Not built yet: CUDA graphs for the decode step.

mod attention;
#[cfg(test)]
mod attention_tests;
mod attention_tiles;
mod backend;
#[cfg(test)]
mod backend_tests;
mod gdn;
#[cfg(test)]
mod gdn_tests;
mod kv_store;
mod memory;
#[cfg(test)]
mod memory_tests;
mod ops;
mod rope;
mod sampling;
#[cfg(test)]
mod tests;

pub(crate) use attention::{DeviceAttentionRows, KvPages, PagedAttention, attention_rows};
pub use backend::{
    CudaBackend, CudaEmbedding, CudaLinear, CudaVector, DEFAULT_POOL_BYTES, DeviceBuf,
};
pub(crate) use gdn::{GdnInputs, GdnSpans, gdn_conv, gdn_recurrence};
pub(crate) use kv_store::{kv_copy_rows, kv_store};
pub use memory::{CudaCacheMemory, DeviceKv, DeviceRecurrent, DeviceState};
#[cfg(test)]
pub(crate) use ops::gated_rms_norm;
pub(crate) use ops::{add, concat_rows, embed_bf16, gate, gather_rows, rms_norm};
pub(crate) use rope::attention_inputs;
pub(crate) use sampling::{MAX_TOP_K, argmax, top_k};

unsafe extern "C" {
    /// The table build.rs generates (kernels/host_emulation/build_support.rs).
    fn edge_model_host_kernels(n: *mut u64) -> *const edge_core::cuda::RawHostKernel;
}

/// This crate's kernels compiled for the host, for the emulated CUDA device
/// ([`edge_core::cuda::CudaDevice::emulated`]).
pub const HOST_KERNELS: edge_core::cuda::HostKernelTable = edge_model_host_kernels;

/// The emulated CUDA device with every kernel of the workspace (edge-quant's and this
/// crate's): [`CudaBackend`] and every operation of this module run on it, on the CPU,
/// with no GPU, driver or NVRTC. For verification and debugging, not speed.
pub fn emulated_device() -> std::sync::Arc<edge_core::cuda::CudaDevice> {
    edge_core::cuda::CudaDevice::emulated(&HOST_KERNEL_TABLES)
}

/// Every kernel table of the workspace: edge-quant's and this crate's.
pub const HOST_KERNEL_TABLES: [edge_core::cuda::HostKernelTable; 2] =
    [edge_quant::cuda::HOST_KERNELS, HOST_KERNELS];
