//! Kernel launches: [`Kernel`] (a loaded function of one device), [`LaunchConfig`] and
//! the argument builder [`Launch`], the one launch interface of the GPU and the emulated
//! device. On the emulated device each launch checks its arguments against the kernel's
//! parameter list (number, order and kind: pointer, u32, i32, u64, i64, f32) before it
//! runs, so a wrapper that passes them wrongly fails with a typed error instead of
//! computing garbage.

use super::emulator::{self, HostAllocation, HostKernel};
use super::slice::{DeviceElem, DeviceSlice, Storage};
use crate::{CoreError, Result};
use cudarc::driver::{CudaFunction, PushKernelArg};

/// A launch's grid and block shape (and dynamic shared memory, unused by our kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid_dim: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block_dim: (u32, u32, u32),
    /// Dynamic shared memory bytes.
    pub shared_mem_bytes: u32,
}

impl From<LaunchConfig> for cudarc::driver::LaunchConfig {
    fn from(c: LaunchConfig) -> Self {
        cudarc::driver::LaunchConfig {
            grid_dim: c.grid_dim,
            block_dim: c.block_dim,
            shared_mem_bytes: c.shared_mem_bytes,
        }
    }
}

/// A kernel function loaded on a device ([`CudaDevice::function`](super::CudaDevice::function)).
#[derive(Clone, Debug)]
pub struct Kernel {
    pub(super) inner: KernelImpl,
}

#[derive(Clone, Debug)]
pub(super) enum KernelImpl {
    Driver(CudaFunction),
    Emulated(HostKernel),
}

/// The arguments of one launch, pushed in the kernel's parameter order with
/// [`Launch::arg`], then [`Launch::launch`].
pub struct Launch<'a> {
    inner: LaunchImpl<'a>,
}

enum LaunchImpl<'a> {
    Driver(cudarc::driver::LaunchArgs<'a>),
    Emulated {
        kernel: HostKernel,
        values: Vec<u64>,
        kinds: Vec<u8>,
    },
    /// A kernel or buffer of the other kind of device (GPU vs emulated) was given:
    /// refused by `launch`.
    Foreign,
}

impl<'a> Launch<'a> {
    pub(super) fn driver(args: cudarc::driver::LaunchArgs<'a>) -> Self {
        Launch {
            inner: LaunchImpl::Driver(args),
        }
    }

    pub(super) fn emulated(kernel: HostKernel) -> Self {
        Launch {
            inner: LaunchImpl::Emulated {
                kernel,
                values: Vec::new(),
                kinds: Vec::new(),
            },
        }
    }

    /// A launch that mixes the two kinds of device, refused by [`Launch::launch`].
    pub(super) fn foreign() -> Self {
        Launch {
            inner: LaunchImpl::Foreign,
        }
    }

    /// Pushes the next argument: a buffer (`&DeviceSlice`, `&mut DeviceSlice` for one
    /// the kernel writes) or a scalar (`&u32`, `&i32`, `&u64`, `&i64`, `&f32`).
    pub fn arg<A: KernelArg<'a>>(&mut self, arg: A) -> &mut Self {
        arg.push(self);
        self
    }

    /// Launches the kernel over `cfg`. A grid with no block launches nothing (CUDA
    /// refuses it; a pass with zero rows has nothing to compute).
    ///
    /// # Safety
    /// The arguments must be what the kernel's parameters expect, and every index the
    /// kernel computes from them must stay inside its buffers: the caller (a launch
    /// wrapper) checks the shapes. The emulated device checks the arguments' kinds.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<()> {
        if let LaunchImpl::Foreign = self.inner {
            return Err(CoreError::Cuda(
                "a launch mixed a kernel or buffer of the GPU with the emulated device's".into(),
            ));
        }
        let (gx, gy, gz) = cfg.grid_dim;
        if gx == 0 || gy == 0 || gz == 0 {
            return Ok(());
        }
        match &mut self.inner {
            // SAFETY: the caller's contract (see above) is cudarc's launch contract.
            LaunchImpl::Driver(args) => unsafe { args.launch(cfg.into()) }
                .map(|_| ())
                .map_err(CoreError::Driver),
            LaunchImpl::Emulated {
                kernel,
                values,
                kinds,
            } => {
                if kinds.as_slice() != kernel.params {
                    return Err(CoreError::Cuda(format!(
                        "emulated launch of {}: arguments `{}` do not match the kernel's \
                         parameters `{}` (p pointer, u u32, i i32, U u64, I i64, f f32)",
                        kernel.name,
                        String::from_utf8_lossy(kinds),
                        String::from_utf8_lossy(kernel.params)
                    )));
                }
                emulator::launch(kernel, &cfg, values)
            }
            LaunchImpl::Foreign => unreachable!("refused above"),
        }
    }

    /// A buffer of the emulated device: its address.
    fn push_emulated<T: DeviceElem>(&mut self, a: &HostAllocation<T>) {
        match &mut self.inner {
            LaunchImpl::Emulated { values, kinds, .. } => {
                values.push(a.address());
                kinds.push(b'p');
            }
            _ => self.inner = LaunchImpl::Foreign,
        }
    }

    /// A buffer the kernel reads. (cudarc records reads and writes apart, hence two.)
    fn push_buffer<T: DeviceElem>(&mut self, storage: &'a Storage<T>) {
        match (&mut self.inner, storage) {
            (_, Storage::Emulated(a)) => self.push_emulated(a),
            (LaunchImpl::Driver(args), Storage::Driver(s)) => {
                args.arg(s);
            }
            _ => self.inner = LaunchImpl::Foreign,
        }
    }

    /// A buffer the kernel writes.
    fn push_buffer_mut<T: DeviceElem>(&mut self, storage: &'a mut Storage<T>) {
        match (&mut self.inner, storage) {
            (_, Storage::Emulated(a)) => self.push_emulated(a),
            (LaunchImpl::Driver(args), Storage::Driver(s)) => {
                args.arg(s);
            }
            _ => self.inner = LaunchImpl::Foreign,
        }
    }
}

/// A value [`Launch::arg`] accepts.
pub trait KernelArg<'a> {
    /// Appends this argument to `launch`.
    fn push(self, launch: &mut Launch<'a>);
}

impl<'a, T: DeviceElem> KernelArg<'a> for &'a DeviceSlice<T> {
    fn push(self, launch: &mut Launch<'a>) {
        launch.push_buffer(&self.storage);
    }
}

impl<'a, T: DeviceElem> KernelArg<'a> for &'a mut DeviceSlice<T> {
    fn push(self, launch: &mut Launch<'a>) {
        launch.push_buffer_mut(&mut self.storage);
    }
}

/// Scalars: their bits in the low bytes of a u64 slot, and their parameter letter.
macro_rules! scalar_arg {
    ($($t:ty => $kind:literal, $bits:expr;)*) => {$(
        impl<'a> KernelArg<'a> for &'a $t {
            fn push(self, launch: &mut Launch<'a>) {
                match &mut launch.inner {
                    LaunchImpl::Driver(args) => {
                        args.arg(self);
                    }
                    LaunchImpl::Emulated { values, kinds, .. } => {
                        let bits: fn(&$t) -> u64 = $bits;
                        values.push(bits(self));
                        kinds.push($kind);
                    }
                    LaunchImpl::Foreign => {}
                }
            }
        }
    )*};
}

scalar_arg! {
    u32 => b'u', |v| *v as u64;
    i32 => b'i', |v| *v as u32 as u64;
    u64 => b'U', |v| *v;
    i64 => b'I', |v| *v as u64;
    f32 => b'f', |v| v.to_bits() as u64;
}
