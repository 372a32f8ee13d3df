//! The CUDA context (behind the `cuda` feature).
//!
//! The driver and NVRTC are loaded at run time through cudarc, so this module builds
//! on machines with neither a CUDA toolkit nor a GPU; [`CudaDevice::new`] reports a
//! typed [`CoreError::DeviceUnavailable`](crate::CoreError::DeviceUnavailable) when the
//! libraries or the GPU are missing instead of panicking.
//!
//! NVRTC is found by [`NvrtcLocation`] (a CUDA 12 or 13 install, a pip wheel's
//! `nvidia/cu13`, or the loader's path) and opened by path through [`Nvrtc`], not through
//! cudarc's fixed list of names.

mod kernel_cache;
mod nvrtc;
mod nvrtc_search;

pub use crate::KernelSource;
pub use kernel_cache::{ComputeCapability, KernelCache};
pub use nvrtc::{CompileTarget, Compiled, Nvrtc};
pub use nvrtc_search::{NvrtcCandidate, NvrtcLocation};

use crate::{CoreError, Result};
pub use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One GPU: its context, a stream, its architecture, and the modules loaded so far.
pub struct CudaDevice {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: ComputeCapability,
    cache: KernelCache,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("ordinal", &self.ctx.ordinal())
            .field("arch", &self.arch)
            .finish()
    }
}

pub(crate) fn cuda_err(e: impl std::fmt::Debug) -> CoreError {
    CoreError::Cuda(format!("{e:?}"))
}

/// True when the CUDA driver library can be loaded on this machine.
pub fn driver_available() -> bool {
    // SAFETY: only tries to dlopen the driver library by its known names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// True when an NVRTC library can be loaded from the conventional places
/// ([`NvrtcLocation::Conventional`]).
pub fn nvrtc_available() -> bool {
    Nvrtc::shared(&NvrtcLocation::Conventional).is_ok()
}

impl CudaDevice {
    /// Opens GPU `ordinal` with the given kernel cache.
    pub fn new(ordinal: usize, cache: KernelCache) -> Result<Arc<Self>> {
        if !driver_available() {
            return Err(CoreError::DeviceUnavailable(
                "the CUDA driver library (libcuda) could not be loaded".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(cuda_err)?;
        if ordinal >= count.max(0) as usize {
            return Err(CoreError::DeviceUnavailable(format!(
                "cuda:{ordinal} requested but {count} GPU(s) are present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda_err)?;
        let (major, minor) = ctx.compute_capability().map_err(cuda_err)?;
        let stream = ctx.default_stream();
        Ok(Arc::new(CudaDevice {
            ctx,
            stream,
            arch: ComputeCapability {
                major: major as u32,
                minor: minor as u32,
            },
            cache,
            modules: Mutex::new(HashMap::new()),
        }))
    }

    /// The GPU's compute capability.
    pub fn arch(&self) -> ComputeCapability {
        self.arch
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream kernels are launched on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Loads (compiling through the cache on first use) `function` from `source`.
    pub fn function(&self, source: &KernelSource, function: &str) -> Result<CudaFunction> {
        let module = {
            let mut modules = self
                .modules
                .lock()
                .map_err(|_| CoreError::Cuda("module table poisoned".into()))?;
            match modules.get(source.name) {
                Some(m) => m.clone(),
                None => {
                    let ptx = self.cache.ptx(source, self.arch)?;
                    let m = self
                        .ctx
                        .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                        .map_err(cuda_err)?;
                    modules.insert(source.name, m.clone());
                    m
                }
            }
        };
        module.load_function(function).map_err(cuda_err)
    }

    /// Copies host data to a new device buffer.
    pub fn upload<T: cudarc::driver::DeviceRepr>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.stream.clone_htod(host).map_err(cuda_err)
    }

    /// Allocates a zeroed device buffer.
    pub fn zeros<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros(len).map_err(cuda_err)
    }

    /// Copies a device buffer back to the host (synchronising the stream).
    pub fn download<T: cudarc::driver::DeviceRepr + Default + Clone>(
        &self,
        dev: &CudaSlice<T>,
    ) -> Result<Vec<T>> {
        self.stream.clone_dtoh(dev).map_err(cuda_err)
    }

    /// Waits for all queued work on the stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err)
    }

    /// Memory bandwidth as a device-to-device copy of `bytes` measures it, in bytes
    /// read and written per second: the best of `passes` timed copies after one warm-up.
    /// Use `bytes` well above the L2 size (1 GiB on current GPUs); the figure is the
    /// bound a decode step that reads its weights once can approach.
    pub fn copy_bandwidth(&self, bytes: usize, passes: usize) -> Result<f64> {
        let src = self.zeros::<u8>(bytes.max(1))?;
        let mut dst = self.zeros::<u8>(bytes.max(1))?;
        let mut best = f64::INFINITY;
        for pass in 0..=passes.max(1) {
            self.synchronize()?;
            let t = std::time::Instant::now();
            self.stream.memcpy_dtod(&src, &mut dst).map_err(cuda_err)?;
            self.synchronize()?;
            if pass > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        Ok(2.0 * bytes as f64 / best)
    }
}
