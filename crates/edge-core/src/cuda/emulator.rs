//! The emulated CUDA device: the same `kernels/**/*.cu` sources compiled for the host
//! (by the build scripts, `kernels/host_emulation/build_support.rs`) and run by a SIMT
//! runtime that executes each block's threads as cooperative fibers
//! (`kernels/host_emulation/simt.cpp`), blocks spread over rayon's threads. Device
//! memory is host memory from the runtime's allocator. Launches run to completion, so
//! the stream is always idle. For verification and debugging, not speed.

use super::launch::LaunchConfig;
use crate::{CoreError, Result};
use rayon::prelude::*;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The C side of a kernel table entry (`EqHostKernel` in `registry.h`).
#[repr(C)]
pub struct RawHostKernel {
    source: *const c_char,
    name: *const c_char,
    entry: unsafe extern "C" fn(*mut *mut c_void),
    params: *const c_char,
}

/// A crate's table of host-compiled kernels: the function its build script generates
/// (`<crate>_host_kernels`), which returns the table and writes its length.
pub type HostKernelTable = unsafe extern "C" fn(n: *mut u64) -> *const RawHostKernel;

unsafe extern "C" {
    fn eq_simt_run_blocks(
        entry: unsafe extern "C" fn(*mut *mut c_void),
        args: *mut *mut c_void,
        grid: *const u32,
        block: *const u32,
        first: u64,
        count: u64,
    ) -> i32;
    fn eq_simt_alloc(bytes: u64) -> *mut c_void;
    fn eq_simt_free(p: *mut c_void, bytes: u64);
}

/// One host-compiled kernel.
#[derive(Clone, Copy, Debug)]
pub struct HostKernel {
    pub(super) name: &'static str,
    entry: unsafe extern "C" fn(*mut *mut c_void),
    /// One letter a parameter (`registry.h`): p pointer, u u32, i i32, U u64, I i64, f f32.
    pub(super) params: &'static [u8],
}

/// The emulated device's kernels, by (source, name), and its memory account.
#[derive(Debug)]
pub(super) struct Emulator {
    kernels: HashMap<(&'static str, &'static str), HostKernel>,
    memory: Arc<MemoryAccount>,
}

/// Bytes the emulated device has allocated, and the most it may (a GPU's memory, to
/// test what a device out of memory does to its callers).
#[derive(Debug)]
pub(super) struct MemoryAccount {
    used: AtomicUsize,
    /// `usize::MAX`: no limit.
    limit: AtomicUsize,
}

impl MemoryAccount {
    /// Takes `bytes`, or errors (taking nothing) when they would pass the limit.
    fn charge(&self, bytes: usize) -> Result<()> {
        let limit = self.limit.load(Ordering::Acquire);
        let taken = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= limit)
            });
        match taken {
            Ok(_) => Ok(()),
            Err(used) => Err(CoreError::DeviceOutOfMemory {
                requested: bytes,
                free: limit.saturating_sub(used),
            }),
        }
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

fn static_str(p: *const c_char) -> &'static str {
    // SAFETY: the generated tables hold pointers to string literals of the static
    // library (NUL-terminated, never freed), ASCII identifiers.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
}

impl Emulator {
    /// The kernels of `tables`.
    pub(super) fn new(tables: &[HostKernelTable]) -> Self {
        let mut kernels = HashMap::new();
        for table in tables {
            let mut n = 0u64;
            // SAFETY: a generated table function writes its length and returns a pointer
            // to a static array of that many entries.
            let raw = unsafe { std::slice::from_raw_parts(table(&mut n), n as usize) };
            for k in raw {
                let params = static_str(k.params).as_bytes();
                let kernel = HostKernel {
                    name: static_str(k.name),
                    entry: k.entry,
                    params,
                };
                kernels.insert((static_str(k.source), kernel.name), kernel);
            }
        }
        let memory = MemoryAccount {
            used: AtomicUsize::new(0),
            limit: AtomicUsize::new(usize::MAX),
        };
        Emulator {
            kernels,
            memory: Arc::new(memory),
        }
    }

    /// A zeroed allocation of `len` elements, charged to the device's memory.
    pub(super) fn alloc<T: bytemuck::Pod>(&self, len: usize) -> Result<HostAllocation<T>> {
        HostAllocation::zeroed(len, &self.memory)
    }

    /// Bytes allocated now.
    pub(super) fn memory_used(&self) -> usize {
        self.memory.used.load(Ordering::Acquire)
    }

    /// Sets the most bytes the device may hold (`None`: no limit); allocations past it
    /// fail with [`CoreError::DeviceOutOfMemory`], as a full GPU's would.
    pub(super) fn set_memory_limit(&self, bytes: Option<usize>) {
        (self.memory.limit).store(bytes.unwrap_or(usize::MAX), Ordering::Release);
    }

    /// The kernel `name` of the source `source`.
    pub(super) fn kernel(&self, source: &str, name: &str) -> Result<HostKernel> {
        self.kernels.get(&(source, name)).copied().ok_or_else(|| {
            CoreError::Cuda(format!(
                "emulated device: no kernel `{name}` in source `{source}` (is the crate's \
                 kernel table passed to CudaDevice::emulated, and the name in its \
                 kernel_entry_points.rs?)"
            ))
        })
    }
}

/// The CUDA limits a launch must respect (sm_90), checked as the driver would.
fn check_config(kernel: &HostKernel, cfg: &LaunchConfig) -> Result<()> {
    let (gx, gy, gz) = cfg.grid_dim;
    let (bx, by, bz) = cfg.block_dim;
    let threads = bx as u64 * by as u64 * bz as u64;
    let bad = if gx > i32::MAX as u32 || gy > 65_535 || gz > 65_535 {
        Some(format!(
            "grid {:?} past the limits (2^31-1, 65535, 65535)",
            cfg.grid_dim
        ))
    } else if threads == 0 || threads > 1024 || bz > 64 {
        Some(format!(
            "block {:?} is not 1 to 1024 threads",
            cfg.block_dim
        ))
    } else {
        None
    };
    match bad {
        Some(why) => Err(CoreError::Cuda(format!(
            "emulated launch of {}: invalid configuration: {why}",
            kernel.name
        ))),
        None => Ok(()),
    }
}

/// The argument array of a launch, shared read-only by the threads running its blocks.
struct ArgArray(Vec<*mut c_void>);
// SAFETY: the pointers address the launch's argument values, which outlive the launch
// and are only read (by the kernels' entries) while it runs.
unsafe impl Sync for ArgArray {}

impl ArgArray {
    fn as_ptr(&self) -> *mut *mut c_void {
        self.0.as_ptr().cast_mut()
    }
}

/// Runs `kernel` over `cfg`'s grid with `args` (one value a parameter, as u64 bits: a
/// pointer's address, or an integer or float's bits in the low bytes).
pub(super) fn launch(kernel: &HostKernel, cfg: &LaunchConfig, args: &mut [u64]) -> Result<()> {
    check_config(kernel, cfg)?;
    let grid = [cfg.grid_dim.0, cfg.grid_dim.1, cfg.grid_dim.2];
    let block = [cfg.block_dim.0, cfg.block_dim.1, cfg.block_dim.2];
    let blocks = grid.iter().map(|&d| d as u64).product::<u64>();
    let pointers = ArgArray(
        args.iter_mut()
            .map(|v| (v as *mut u64).cast::<c_void>())
            .collect(),
    );
    let chunks = (rayon::current_num_threads() as u64 * 4).clamp(1, blocks.max(1));
    let per_chunk = blocks.div_ceil(chunks);
    let failed = (0..chunks).into_par_iter().any(|c| {
        let first = c * per_chunk;
        let count = per_chunk.min(blocks.saturating_sub(first));
        if count == 0 {
            return false;
        }
        // SAFETY: the entry unpacks exactly the parameters listed in `params`, which
        // the launch checked against the arguments (number and kinds); every pointer
        // argument is a live allocation of this device (DeviceSlice) or a value of this
        // launch; the kernels' bounds are the launch wrappers' (checked on the host).
        let status = unsafe {
            eq_simt_run_blocks(
                kernel.entry,
                pointers.as_ptr(),
                grid.as_ptr(),
                block.as_ptr(),
                first,
                count,
            )
        };
        status != 0
    });
    if failed {
        return Err(CoreError::Cuda(format!(
            "emulated launch of {}: the runtime refused block {block:?}",
            kernel.name
        )));
    }
    Ok(())
}

/// An emulated device allocation: `len` zeroed elements of `T`, 256-byte aligned.
pub(super) struct HostAllocation<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The account its bytes are charged to (given back on drop).
    account: Arc<MemoryAccount>,
}

// SAFETY: the allocation is owned (freed once, on drop) and only read or written through
// the device's copies and launches, which take the DeviceSlice by & or &mut.
unsafe impl<T: Send> Send for HostAllocation<T> {}
// SAFETY: as above; shared references only read (downloads, kernel inputs).
unsafe impl<T: Sync> Sync for HostAllocation<T> {}

impl<T: bytemuck::Pod> HostAllocation<T> {
    fn zeroed(len: usize, account: &Arc<MemoryAccount>) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| CoreError::Cuda(format!("emulated device: {len} elements overflow")))?;
        account.charge(bytes)?;
        // SAFETY: plain allocation of `bytes` zeroed bytes (at least 1), freed in drop.
        let raw = unsafe { eq_simt_alloc(bytes as u64) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            account.release(bytes);
            return Err(CoreError::Cuda(format!(
                "emulated device: the host cannot allocate {bytes} bytes"
            )));
        };
        Ok(HostAllocation {
            ptr,
            len,
            account: account.clone(),
        })
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The address kernels get.
    pub(super) fn address(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub(super) fn as_slice(&self) -> &[T] {
        // SAFETY: `len` initialised (zeroed, then written) elements; no launch runs
        // while this borrow lives (launches are synchronous and need &self of the device).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in as_slice, and &mut self makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HostAllocation<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        // SAFETY: allocated by eq_simt_alloc with this size (checked then), freed once.
        unsafe { eq_simt_free(self.ptr.as_ptr().cast(), bytes as u64) }
        self.account.release(bytes);
    }
}
