//! The CUDA backend's activation buffers and the caching pool they come from.
//!
//! The kernels' wrappers check every operand's exact length, so a buffer is a device
//! allocation of exactly its length, and the pool keeps freed allocations per length: a
//! decode loop asks for the same few lengths every step and, after its first step,
//! allocates nothing. Zero-length buffers hold no allocation (CUDA has no empty one).

use crate::Result;
use edge_core::cuda::{CudaDevice, DeviceSlice};
use std::collections::HashMap;

/// An f32 activation buffer on the device.
pub struct DeviceBuf {
    data: Option<DeviceSlice<f32>>,
}

impl DeviceBuf {
    /// Values it holds.
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.len())
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.data.is_none()
    }

    /// The allocation (`None` when empty).
    pub fn slice(&self) -> Option<&DeviceSlice<f32>> {
        self.data.as_ref()
    }

    /// The allocation, writable (`None` when empty).
    pub fn slice_mut(&mut self) -> Option<&mut DeviceSlice<f32>> {
        self.data.as_mut()
    }

    pub(super) fn from_slice(data: DeviceSlice<f32>) -> Self {
        DeviceBuf { data: Some(data) }
    }

    pub(super) fn empty() -> Self {
        DeviceBuf { data: None }
    }
}

impl std::fmt::Debug for DeviceBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuf({})", self.len())
    }
}

/// Freed buffers by length, up to a byte limit.
pub(super) struct BufferPool {
    free: HashMap<usize, Vec<DeviceSlice<f32>>>,
    pooled_bytes: usize,
    limit_bytes: usize,
}

impl BufferPool {
    pub(super) fn new(limit_bytes: usize) -> Self {
        BufferPool {
            free: HashMap::new(),
            pooled_bytes: 0,
            limit_bytes,
        }
    }

    /// A buffer of `len` values: a pooled one of that length, or a fresh zeroed
    /// allocation. When the device has no room, the pooled buffers are freed and the
    /// allocation tried once more (as caching allocators do), so buffers kept from
    /// passes of other lengths never starve a later one.
    pub(super) fn take(&mut self, dev: &CudaDevice, len: usize) -> Result<DeviceBuf> {
        if len == 0 {
            return Ok(DeviceBuf::empty());
        }
        if let Some(slice) = self.free.get_mut(&len).and_then(Vec::pop) {
            self.pooled_bytes -= 4 * len;
            return Ok(DeviceBuf::from_slice(slice));
        }
        match dev.zeros(len) {
            Ok(slice) => Ok(DeviceBuf::from_slice(slice)),
            Err(e) if e.is_out_of_memory() && self.pooled_bytes > 0 => {
                self.free.clear();
                self.pooled_bytes = 0;
                Ok(DeviceBuf::from_slice(dev.zeros(len)?))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Keeps `buf` for reuse; past the limit, the pool is emptied first (prompt passes
    /// of many lengths would otherwise hold memory the cache could use).
    pub(super) fn give(&mut self, buf: DeviceBuf) {
        let Some(slice) = buf.data else { return };
        let bytes = 4 * slice.len();
        if self.pooled_bytes + bytes > self.limit_bytes {
            self.free.clear();
            self.pooled_bytes = 0;
        }
        if bytes <= self.limit_bytes {
            self.pooled_bytes += bytes;
            self.free.entry(slice.len()).or_default().push(slice);
        }
    }

    /// Bytes held for reuse.
    pub(super) fn pooled_bytes(&self) -> usize {
        self.pooled_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device too full for a new buffer, with buffers of other lengths pooled: the
    /// pool frees them and the allocation succeeds; with nothing pooled the device's
    /// out-of-memory error comes back.
    #[test]
    fn a_full_device_gets_the_pooled_buffers_back() {
        let dev = CudaDevice::emulated(&[]);
        let mut pool = BufferPool::new(1 << 20);
        let kept = pool.take(&dev, 1024).unwrap(); // 4 KiB
        pool.give(kept);
        assert_eq!(pool.pooled_bytes(), 4096);
        let used = dev.memory_used().unwrap();
        dev.set_memory_limit(Some(used + 2048)).unwrap();
        // 6 KiB: only with the pooled 4 KiB freed.
        let big = pool.take(&dev, 1536).unwrap();
        assert_eq!(pool.pooled_bytes(), 0);
        let err = pool.take(&dev, 4096).unwrap_err();
        assert!(
            matches!(&err, crate::ModelError::Core(e) if e.is_out_of_memory()),
            "{err}"
        );
        drop(big);
    }
}
