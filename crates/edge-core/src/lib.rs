//! `edge-core`: the small foundation every edge-llm crate stands on.
//!
//! It holds only what is shared and device-independent:
//! - [`DType`]: the element types edge-llm stores and computes with, including the
//!   packed NVFP4 and the two FP8 formats;
//! - [`Shape`]: checked row-major shapes;
//! - [`Bytes`]: shared byte storage, owned or borrowed from a memory map;
//! - [`HostBuffer`]: a typed host-side tensor over [`Bytes`];
//! - [`Device`]: where a computation runs (CPU, a CUDA ordinal, or the emulated CUDA
//!   device), and [`device_test!`] to run one test body on each;
//! - [`CoreError`]: this crate's typed error;
//! - [`KernelSource`]: the text of one CUDA kernel source (compiled only with `cuda`);
//! - [`par`]: parallel loops on rayon's pool, with a spinning team for decode steps;
//! - [`read_bandwidth`]: memory read loops and the probe behind the decode benchmarks'
//!   bandwidth bound;
//! - [`rng`]: [`SeededRng`], the project's one seeded pseudo-random generator (sampling,
//!   synthetic checkpoints, benchmark and test data);
//! - [`simd`]: the CPU's features, detected once, as the [`simd::SimdLevel`] every CPU
//!   kernel choice goes by (with proof tokens, [`simd::dispatch!`] and the one override,
//!   [`simd::with_level`]).
//!
//! Behind the `cuda` feature, the `cuda` module holds `cuda::CudaDevice`, the one memory
//! and launch interface of the CUDA code, over a GPU (a cudarc context whose driver and
//! NVRTC libraries are loaded at run time, so the crate builds with no CUDA toolkit) or
//! the emulated device (the kernels compiled for the host, run by a fiber SIMT runtime),
//! and a `cuda::KernelCache` that compiles each `.cu` source once per GPU architecture
//! and keeps the result on disk keyed by source hash and architecture.

mod buffer;
mod bytes;
mod device;
mod device_test;
mod dtype;
mod error;
mod kernel_source;
pub mod par;
pub mod read_bandwidth;
pub mod rng;
mod shape;
pub mod simd;

#[cfg(feature = "cuda")]
pub mod cuda;

pub use buffer::{HostBuffer, decode_to_f32};
pub use bytes::Bytes;
pub use device::Device;
pub use dtype::DType;
pub use error::{CoreError, Result};
pub use kernel_source::KernelSource;
pub use rng::SeededRng;
pub use shape::Shape;
