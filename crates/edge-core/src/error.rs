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
    /// A SIMD level this build or CPU cannot run was asked for
    /// ([`crate::simd::with_level`]).
    #[error("SIMD level {0} is not available on this CPU or build")]
    SimdLevelUnavailable(crate::simd::SimdLevel),
    /// The rayon pool of a forced SIMD level could not be built.
    #[error("cannot start the thread pool of a forced SIMD level: {0}")]
    SimdPool(#[from] rayon::ThreadPoolBuildError),
    /// An error from the CUDA driver, NVRTC, or the kernel cache.
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

/// Result alias for `edge-core`.
pub type Result<T> = std::result::Result<T, CoreError>;
