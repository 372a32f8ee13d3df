//! The CUDA device (behind the `cuda` feature): a GPU, or the emulated device that runs
//! the same kernels on the CPU ([`CudaDevice::emulated`], module `emulator`), behind one
//! memory ([`DeviceSlice`]) and launch ([`Launch`]) interface.
//!
//! The driver and NVRTC are loaded at run time through cudarc, so this module builds
//! on machines with neither a CUDA toolkit nor a GPU; [`CudaDevice::new`] reports a
//! typed [`CoreError::DeviceUnavailable`] when the
//! libraries or the GPU are missing instead of panicking.
//!
//! NVRTC is found by [`NvrtcLocation`] (a CUDA 12 or 13 install, a pip wheel's
//! `nvidia/cu13`, or the loader's path) and opened by path through [`Nvrtc`], not through
//! cudarc's fixed list of names.

mod emulator;
mod kernel_cache;
mod launch;
mod nvrtc;
mod nvrtc_search;
mod slice;

pub use crate::KernelSource;
pub use emulator::{HostKernelTable, RawHostKernel};
pub use kernel_cache::{ComputeCapability, KernelCache};
pub use launch::{Kernel, KernelArg, Launch, LaunchConfig};
pub use nvrtc::{CompileTarget, Compiled, Nvrtc};
pub use nvrtc_search::{NvrtcCandidate, NvrtcLocation};
pub use slice::{DeviceElem, DeviceSlice};

use crate::{CoreError, Result};
use cudarc::driver::{CudaContext, CudaModule, CudaStream};
use emulator::Emulator;
use launch::KernelImpl;
use slice::Storage;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// One GPU, or the emulated device that runs the same kernels on the CPU.
///
/// Every launch wrapper and the CUDA backend go through this type: memory
/// ([`upload`](Self::upload), [`zeros`](Self::zeros), [`download`](Self::download), the
/// copies) and launches ([`function`](Self::function), [`launch_builder`](Self::launch_builder)).
/// [`CudaDevice::new`] opens a GPU through the driver; [`CudaDevice::emulated`] the
/// emulated device, which needs no GPU, driver or NVRTC.
pub struct CudaDevice {
    runtime: Runtime,
}

enum Runtime {
    Driver(Driver),
    Emulated(Emulator),
}

/// A GPU: its context, a stream, its architecture, and the modules loaded so far.
struct Driver {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    arch: ComputeCapability,
    cache: KernelCache,
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.runtime {
            Runtime::Driver(d) => f
                .debug_struct("CudaDevice")
                .field("ordinal", &d.ctx.ordinal())
                .field("arch", &d.arch)
                .finish(),
            Runtime::Emulated(_) => f
                .debug_struct("CudaDevice")
                .field("emulated", &true)
                .finish(),
        }
    }
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

fn foreign_buffer() -> CoreError {
    CoreError::Cuda("a buffer of another device (GPU vs emulated) was passed".into())
}

fn check_range(what: &str, range: &Range<usize>, len: usize) -> Result<()> {
    if range.start <= range.end && range.end <= len {
        Ok(())
    } else {
        Err(CoreError::Cuda(format!(
            "{what}: range {range:?} outside a buffer of {len} elements"
        )))
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal` with the given kernel cache.
    pub fn new(ordinal: usize, cache: KernelCache) -> Result<Arc<Self>> {
        if !driver_available() {
            return Err(CoreError::DeviceUnavailable(
                "the CUDA driver library (libcuda) could not be loaded".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(CoreError::Driver)?;
        if ordinal >= count.max(0) as usize {
            return Err(CoreError::DeviceUnavailable(format!(
                "cuda:{ordinal} requested but {count} GPU(s) are present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(CoreError::Driver)?;
        let (major, minor) = ctx.compute_capability().map_err(CoreError::Driver)?;
        let stream = ctx.default_stream();
        Ok(Arc::new(CudaDevice {
            runtime: Runtime::Driver(Driver {
                ctx,
                stream,
                arch: ComputeCapability {
                    major: major as u32,
                    minor: minor as u32,
                },
                cache,
                modules: Mutex::new(HashMap::new()),
            }),
        }))
    }

    /// The emulated device with the host-compiled kernels of `tables` (each crate with
    /// kernels exports its own: `edge_quant::cuda::HOST_KERNELS`,
    /// `edge_model::cuda::HOST_KERNELS`). It reports sm_90, so the wrappers choose the
    /// kernels they would on an H100.
    pub fn emulated(tables: &[HostKernelTable]) -> Arc<Self> {
        Arc::new(CudaDevice {
            runtime: Runtime::Emulated(Emulator::new(tables)),
        })
    }

    /// On the emulated device: the most bytes it may hold from now on (`None`: no
    /// limit, the default), so that allocations past it fail with
    /// [`CoreError::DeviceOutOfMemory`] as on a full GPU: how a caller's handling of
    /// device memory running out is tested. A GPU's memory is its own: there this is
    /// a [`CoreError::DeviceUnavailable`] error.
    pub fn set_memory_limit(&self, bytes: Option<usize>) -> Result<()> {
        match &self.runtime {
            Runtime::Emulated(emu) => {
                emu.set_memory_limit(bytes);
                Ok(())
            }
            Runtime::Driver(_) => Err(CoreError::DeviceUnavailable(
                "a memory limit is set on the emulated device only".into(),
            )),
        }
    }

    /// On the emulated device, the bytes it holds now (`None` on a GPU).
    pub fn memory_used(&self) -> Option<usize> {
        match &self.runtime {
            Runtime::Emulated(emu) => Some(emu.memory_used()),
            Runtime::Driver(_) => None,
        }
    }

    /// Opens `device`: a GPU through the driver with `cache`, or the emulated device
    /// with the kernels of `tables`; the CPU is a [`CoreError::DeviceUnavailable`].
    pub fn open(
        device: crate::Device,
        tables: &[HostKernelTable],
        cache: KernelCache,
    ) -> Result<Arc<Self>> {
        match device {
            crate::Device::Cuda(n) => Self::new(n, cache),
            crate::Device::CudaEmulated => Ok(Self::emulated(tables)),
            crate::Device::Cpu => Err(CoreError::DeviceUnavailable(
                "the CPU is not a CUDA device (expected cuda:N or cuda-emu)".into(),
            )),
        }
    }

    /// True for the emulated device.
    pub fn is_emulated(&self) -> bool {
        matches!(self.runtime, Runtime::Emulated(_))
    }

    /// The GPU's compute capability (sm_90 for the emulated device).
    pub fn arch(&self) -> ComputeCapability {
        match &self.runtime {
            Runtime::Driver(d) => d.arch,
            Runtime::Emulated(_) => ComputeCapability { major: 9, minor: 0 },
        }
    }

    /// The GPU's stream (none on the emulated device, whose launches are synchronous).
    pub fn driver_stream(&self) -> Option<&Arc<CudaStream>> {
        match &self.runtime {
            Runtime::Driver(d) => Some(&d.stream),
            Runtime::Emulated(_) => None,
        }
    }

    /// Loads (compiling through the cache on first use on a GPU) `function` from `source`.
    pub fn function(&self, source: &KernelSource, function: &str) -> Result<Kernel> {
        let d = match &self.runtime {
            Runtime::Driver(d) => d,
            Runtime::Emulated(e) => {
                return Ok(Kernel {
                    inner: KernelImpl::Emulated(e.kernel(source.name, function)?),
                });
            }
        };
        let module = {
            let mut modules = d
                .modules
                .lock()
                .map_err(|_| CoreError::Cuda("module table poisoned".into()))?;
            match modules.get(source.name) {
                Some(m) => m.clone(),
                None => {
                    let ptx = d.cache.ptx(source, d.arch)?;
                    let m = (d.ctx)
                        .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                        .map_err(CoreError::Driver)?;
                    modules.insert(source.name, m.clone());
                    m
                }
            }
        };
        let func = module.load_function(function).map_err(CoreError::Driver)?;
        Ok(Kernel {
            inner: KernelImpl::Driver(func),
        })
    }

    /// A launch of `kernel` on this device's stream: push its arguments, then launch.
    pub fn launch_builder<'a>(&'a self, kernel: &'a Kernel) -> Launch<'a> {
        match (&self.runtime, &kernel.inner) {
            (Runtime::Driver(d), KernelImpl::Driver(f)) => {
                Launch::driver(d.stream.launch_builder(f))
            }
            (Runtime::Emulated(_), KernelImpl::Emulated(k)) => Launch::emulated(*k),
            // A kernel loaded by the other kind of device.
            _ => Launch::foreign(),
        }
    }

    /// Copies host data to a new device buffer.
    pub fn upload<T: DeviceElem>(&self, host: &[T]) -> Result<DeviceSlice<T>> {
        let storage = match &self.runtime {
            Runtime::Driver(d) => {
                Storage::Driver(d.stream.clone_htod(host).map_err(CoreError::Driver)?)
            }
            Runtime::Emulated(emu) => {
                let mut a = emu.alloc(host.len())?;
                a.as_mut_slice().copy_from_slice(host);
                Storage::Emulated(a)
            }
        };
        Ok(DeviceSlice { storage })
    }

    /// Allocates a zeroed device buffer.
    pub fn zeros<T: DeviceElem>(&self, len: usize) -> Result<DeviceSlice<T>> {
        let storage = match &self.runtime {
            Runtime::Driver(d) => {
                Storage::Driver(d.stream.alloc_zeros(len).map_err(CoreError::Driver)?)
            }
            Runtime::Emulated(emu) => Storage::Emulated(emu.alloc(len)?),
        };
        Ok(DeviceSlice { storage })
    }

    /// Copies a device buffer back to the host (synchronising the stream).
    pub fn download<T: DeviceElem>(&self, dev: &DeviceSlice<T>) -> Result<Vec<T>> {
        self.download_range(dev, 0..dev.len())
    }

    /// Copies elements `range` of a device buffer back to the host.
    pub fn download_range<T: DeviceElem>(
        &self,
        dev: &DeviceSlice<T>,
        range: Range<usize>,
    ) -> Result<Vec<T>> {
        check_range("download", &range, dev.len())?;
        match (&self.runtime, &dev.storage) {
            (Runtime::Driver(d), Storage::Driver(s)) => d
                .stream
                .clone_dtoh(&s.slice(range))
                .map_err(CoreError::Driver),
            (Runtime::Emulated(_), Storage::Emulated(a)) => Ok(a.as_slice()[range].to_vec()),
            _ => Err(foreign_buffer()),
        }
    }

    /// Writes `host` into `dst` from element `offset` on.
    pub fn write<T: DeviceElem>(
        &self,
        host: &[T],
        dst: &mut DeviceSlice<T>,
        offset: usize,
    ) -> Result<()> {
        let range = offset..offset.saturating_add(host.len());
        check_range("write", &range, dst.len())?;
        match (&self.runtime, &mut dst.storage) {
            (Runtime::Driver(d), Storage::Driver(s)) => d
                .stream
                .memcpy_htod(host, &mut s.slice_mut(range))
                .map_err(CoreError::Driver),
            (Runtime::Emulated(_), Storage::Emulated(a)) => {
                a.as_mut_slice()[range].copy_from_slice(host);
                Ok(())
            }
            _ => Err(foreign_buffer()),
        }
    }

    /// Copies elements `src_range` of `src` into `dst` from element `dst_offset` on.
    pub fn copy<T: DeviceElem>(
        &self,
        src: &DeviceSlice<T>,
        src_range: Range<usize>,
        dst: &mut DeviceSlice<T>,
        dst_offset: usize,
    ) -> Result<()> {
        check_range("copy source", &src_range, src.len())?;
        let dst_range = dst_offset..dst_offset.saturating_add(src_range.len());
        check_range("copy destination", &dst_range, dst.len())?;
        match (&self.runtime, &src.storage, &mut dst.storage) {
            (Runtime::Driver(d), Storage::Driver(s), Storage::Driver(t)) => d
                .stream
                .memcpy_dtod(&s.slice(src_range), &mut t.slice_mut(dst_range))
                .map_err(CoreError::Driver),
            (Runtime::Emulated(_), Storage::Emulated(a), Storage::Emulated(b)) => {
                b.as_mut_slice()[dst_range].copy_from_slice(&a.as_slice()[src_range]);
                Ok(())
            }
            _ => Err(foreign_buffer()),
        }
    }

    /// A new buffer holding elements `range` of `src`.
    pub fn clone_range<T: DeviceElem>(
        &self,
        src: &DeviceSlice<T>,
        range: Range<usize>,
    ) -> Result<DeviceSlice<T>> {
        check_range("clone", &range, src.len())?;
        let mut out = self.zeros(range.len())?;
        self.copy(src, range, &mut out, 0)?;
        Ok(out)
    }

    /// Zeroes elements `range` of `dst`.
    pub fn zero_range<T: DeviceElem>(
        &self,
        dst: &mut DeviceSlice<T>,
        range: Range<usize>,
    ) -> Result<()> {
        check_range("zero", &range, dst.len())?;
        match (&self.runtime, &mut dst.storage) {
            (Runtime::Driver(d), Storage::Driver(s)) => d
                .stream
                .memset_zeros(&mut s.slice_mut(range))
                .map_err(CoreError::Driver),
            (Runtime::Emulated(_), Storage::Emulated(a)) => {
                a.as_mut_slice()[range].fill(T::default());
                Ok(())
            }
            _ => Err(foreign_buffer()),
        }
    }

    /// Waits for all queued work on the stream (the emulated device has none).
    pub fn synchronize(&self) -> Result<()> {
        match &self.runtime {
            Runtime::Driver(d) => d.stream.synchronize().map_err(CoreError::Driver),
            Runtime::Emulated(_) => Ok(()),
        }
    }

    /// Memory bandwidth as a device-to-device copy of `bytes` measures it, in bytes
    /// read and written per second: the best of `passes` timed copies after one warm-up.
    /// Use `bytes` well above the L2 size (1 GiB on current GPUs); the figure is the
    /// bound a decode step that reads its weights once can approach.
    pub fn copy_bandwidth(&self, bytes: usize, passes: usize) -> Result<f64> {
        let bytes = bytes.max(1);
        let src = self.zeros::<u8>(bytes)?;
        let mut dst = self.zeros::<u8>(bytes)?;
        let mut best = f64::INFINITY;
        for pass in 0..=passes.max(1) {
            self.synchronize()?;
            let t = std::time::Instant::now();
            self.copy(&src, 0..bytes, &mut dst, 0)?;
            self.synchronize()?;
            if pass > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        Ok(2.0 * bytes as f64 / best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past its memory limit the emulated device refuses allocations with a typed
    /// error and takes nothing; freed buffers give their bytes back.
    #[test]
    fn the_emulated_device_runs_out_of_memory_at_its_limit() {
        let dev = CudaDevice::emulated(&[]);
        let base = dev.memory_used().unwrap();
        dev.set_memory_limit(Some(base + 4096)).unwrap();
        let a = dev.zeros::<f32>(512).unwrap(); // 2 KiB
        assert_eq!(dev.memory_used(), Some(base + 2048));
        let err = dev.zeros::<f32>(1024).unwrap_err();
        assert!(
            matches!(
                err,
                CoreError::DeviceOutOfMemory {
                    requested: 4096,
                    free: 2048
                }
            ),
            "{err}"
        );
        assert!(dev.upload(&[0u8; 4096]).is_err());
        assert_eq!(
            dev.memory_used(),
            Some(base + 2048),
            "a refusal takes nothing"
        );
        drop(a);
        assert_eq!(dev.memory_used(), Some(base));
        let b = dev.zeros::<f32>(1024).unwrap();
        dev.set_memory_limit(None).unwrap();
        let _c = dev.zeros::<f32>(1 << 20).unwrap();
        drop(b);
    }
}
