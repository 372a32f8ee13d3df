//! Device memory: [`DeviceSlice`], one allocation on the GPU (through cudarc) or on the
//! emulated device (host memory the emulator's kernels address directly).

use super::emulator::HostAllocation;
use cudarc::driver::CudaSlice;

/// An element type kernels read and write: plain bits, valid when zeroed.
pub trait DeviceElem:
    cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + bytemuck::Pod
    + Default
    + PartialEq
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl DeviceElem for u8 {}
impl DeviceElem for u16 {}
impl DeviceElem for u32 {}
impl DeviceElem for u64 {}
impl DeviceElem for i32 {}
impl DeviceElem for f32 {}

/// Where a [`DeviceSlice`]'s elements live.
pub(super) enum Storage<T: DeviceElem> {
    Driver(CudaSlice<T>),
    Emulated(HostAllocation<T>),
}

/// `len` elements of `T` in a device's memory, allocated by
/// [`CudaDevice`](super::CudaDevice) (`upload`, `zeros`) and freed on drop. Only
/// kernels and the device's copies touch the elements.
pub struct DeviceSlice<T: DeviceElem> {
    pub(super) storage: Storage<T>,
}

impl<T: DeviceElem> std::fmt::Debug for DeviceSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match &self.storage {
            Storage::Driver(_) => "gpu",
            Storage::Emulated(_) => "emulated",
        };
        f.debug_struct("DeviceSlice")
            .field("len", &self.len())
            .field("memory", &place)
            .finish()
    }
}

impl<T: DeviceElem> DeviceSlice<T> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Driver(s) => s.len(),
            Storage::Emulated(a) => a.len(),
        }
    }

    /// True when the slice holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.len() * std::mem::size_of::<T>()
    }
}
