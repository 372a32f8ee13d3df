use crate::DType;

/// Errors raised by `edge-core`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A buffer's byte length does not match its dtype and shape.
    #[error("buffer of {got} bytes does not hold {shape:?} elements of {dtype} ({expected} bytes)")]
    BufferSize {
        /// Element type of the buffer.
        dtype: DType,
        /// Dimensions that were requested.
        shape: Vec<usize>,
        /// Bytes the dtype and shape need.
        expected: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// A shape whose element count overflows `usize`, or that is otherwise unusable.
    #[error("invalid shape {shape:?}: {reason}")]
    InvalidShape {
        /// The offending dimensions.
        shape: Vec<usize>,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// Two shapes that must agree do not.
    #[error("shape mismatch in {op}: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// The operation that checked.
        op: &'static str,
        /// The shape it needed.
        expected: Vec<usize>,
        /// The shape it got.
        got: Vec<usize>,
    },
    /// A dtype the operation does not accept.
    #[error("{op} does not support dtype {dtype}")]
    UnsupportedDType {
        /// The operation.
        op: &'static str,
        /// The dtype it was given.
        dtype: DType,
    },
    /// A dtype name that edge-llm does not know.
    #[error("unknown dtype `{0}`")]
    UnknownDType(String),
    /// The requested device is not available in this build or on this machine.
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// The device has no room for an allocation (the emulated device past the memory
    /// limit it was given; a GPU reports its own as [`CoreError::Driver`]).
    #[cfg(feature = "cuda")]
    #[error("device out of memory: {requested} bytes asked, {free} free")]
    DeviceOutOfMemory {
        /// Bytes the allocation needed.
        requested: usize,
        /// Bytes left under the limit.
        free: usize,
    },
    /// A SIMD level this build or CPU cannot run was asked for
    /// ([`crate::simd::with_level`]).
    #[error("SIMD level {0} is not available on this CPU or build")]
    SimdLevelUnavailable(crate::simd::SimdLevel),
    /// The rayon pool of a forced SIMD level could not be built.
    #[error("cannot start the thread pool of a forced SIMD level: {0}")]
    SimdPool(#[from] rayon::ThreadPoolBuildError),
    /// An error from the CUDA driver (a failed allocation, copy, launch or
    /// synchronisation), with cudarc's error as its source.
    #[cfg(feature = "cuda")]
    #[error("CUDA driver: {0}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// An NVRTC call that returned an error status.
    #[cfg(feature = "cuda")]
    #[error("{call}: {message} (NVRTC status {status})")]
    Nvrtc {
        /// The NVRTC function.
        call: String,
        /// Its status code.
        status: i32,
        /// NVRTC's description of the status.
        message: String,
    },
    /// A shared library (NVRTC or its builtins) that exists but could not be opened or
    /// lacks a symbol.
    #[cfg(feature = "cuda")]
    #[error("cannot load {path}: {source}")]
    Library {
        /// The library file.
        path: std::path::PathBuf,
        /// The loader's error.
        #[source]
        source: libloading::Error,
    },
    /// A CUDA-side failure of edge-llm's own checks (a buffer of another device, a
    /// range outside a buffer, the emulated device's limits, a poisoned table).
    #[cfg(feature = "cuda")]
    #[error("cuda: {0}")]
    Cuda(String),
    /// No NVRTC library could be opened from any of the places searched.
    #[cfg(feature = "cuda")]
    #[error(
        "NVRTC (libnvrtc) not found; searched:\n  {}\n(point to a CUDA install or a pip \
         wheel's nvidia/cu13 folder)",
        searched.join("\n  ")
    )]
    NvrtcNotFound {
        /// Every folder, file name and loader search tried, in order, with the reason a
        /// file that exists could not be opened.
        searched: Vec<String>,
    },
    /// NVRTC rejected a kernel source.
    #[cfg(feature = "cuda")]
    #[error("NVRTC failed to compile `{name}` for {target}:\n{log}")]
    NvrtcCompile {
        /// The kernel source's name.
        name: String,
        /// The target, e.g. `sm_90 (cubin)`.
        target: String,
        /// NVRTC's program log.
        log: String,
    },
    /// An I/O error from the kernel cache.
    #[error("i/o error at {path}: {source}")]
    Io {
        /// The path being read or written.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl CoreError {
    /// Whether the device ran out of memory (the emulated device past its limit, or
    /// the driver's `CUDA_ERROR_OUT_OF_MEMORY`): an allocation that freeing cached
    /// buffers may let succeed.
    #[cfg(feature = "cuda")]
    pub fn is_out_of_memory(&self) -> bool {
        use cudarc::driver::sys::CUresult;
        match self {
            CoreError::DeviceOutOfMemory { .. } => true,
            CoreError::Driver(d) => d.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            _ => false,
        }
    }
}

/// Result alias for `edge-core`.
pub type Result<T> = std::result::Result<T, CoreError>;

#[cfg(all(test, feature = "cuda"))]
mod tests {
    use super::CoreError;
    use cudarc::driver::{DriverError, sys::CUresult};
    use std::error::Error;

    /// A driver error keeps cudarc's error as its source, not a string.
    #[test]
    fn driver_errors_carry_their_source() {
        let e = CoreError::from(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert!(matches!(
            e,
            CoreError::Driver(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY))
        ));
        let source = e.source().expect("a source");
        assert!(source.downcast_ref::<DriverError>().is_some());
        // Not formatted here: cudarc's Display asks the driver for the message, and a
        // machine without one has none (a DriverError only exists where it loaded).
    }
}
