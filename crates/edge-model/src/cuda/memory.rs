//! The cache's storage in GPU memory: [`CudaCacheMemory`], the device twin of
//! [`edge_kvcache::HostMemory`] behind [`CacheMemory`].
//!
//! Each attention layer has one key pool and one value pool of `capacity.pages` pages
//! in the host layout (`[pages, kv_heads, block, head_dim]`), so the kernels address
//! page `p` at `p · page` elements ([`DeviceKv::pages`], [`DeviceKv::layer_mut`]). Each
//! recurrent layer has one conv pool and one state pool of `capacity.slots` slots.
//! The pools are allocated up front ([`PoolCapacity::for_config`] sizes them from the
//! cache configuration), so materializing a page or slot allocates nothing and only
//! checks the id against the pool. The price: without a sequence limit pages and slots
//! each reserve the whole budget, where the host memory shares it; with one the slots
//! take that many sequences' states and the pages the rest. Snapshots of slot state are
//! device allocations of their own.

use super::KvPages;
use super::kv_store::{KvLayerMut, KvPagesMut, kv_copy_rows};
use crate::Result;
use edge_core::cuda::{CudaDevice, DeviceSlice};
use edge_kvcache::{
    AttentionLayerSpec, BlockId, CacheMemory, CacheSpec, KvCacheError, KvDType, PoolCapacity,
    RecurrentLayerSpec, SlotId,
};
use std::sync::Arc;

/// One attention layer's key and value pools, in the pages' element type.
enum Pools {
    Fp8(DeviceSlice<u8>, DeviceSlice<u8>),
    Bf16(DeviceSlice<u16>, DeviceSlice<u16>),
    F32(DeviceSlice<f32>, DeviceSlice<f32>),
}

/// One attention layer's pages on the device.
pub struct DeviceKv {
    spec: AttentionLayerSpec,
    block_size: usize,
    pools: Pools,
}

impl std::fmt::Debug for DeviceKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceKv")
            .field("spec", &self.spec)
            .field("block_size", &self.block_size)
            .finish_non_exhaustive()
    }
}

impl DeviceKv {
    fn new(
        dev: &CudaDevice,
        spec: AttentionLayerSpec,
        block_size: usize,
        dtype: KvDType,
        pages: usize,
    ) -> Result<Self> {
        let len = pages * spec.kv_heads * block_size * spec.head_dim;
        let pools = match dtype {
            KvDType::Fp8E4M3 => Pools::Fp8(dev.zeros(len)?, dev.zeros(len)?),
            KvDType::Bf16 => Pools::Bf16(dev.zeros(len)?, dev.zeros(len)?),
            KvDType::F32 => Pools::F32(dev.zeros(len)?, dev.zeros(len)?),
        };
        Ok(DeviceKv {
            spec,
            block_size,
            pools,
        })
    }

    /// The layer's shape and FP8 scales.
    pub fn spec(&self) -> &AttentionLayerSpec {
        &self.spec
    }

    /// The pages, for attention.
    pub fn pages(&self) -> KvPages<'_> {
        match &self.pools {
            Pools::Fp8(keys, values) => KvPages::Fp8 {
                keys,
                values,
                k_scale: self.spec.k_scale,
                v_scale: self.spec.v_scale,
            },
            Pools::Bf16(keys, values) => KvPages::Bf16 { keys, values },
            Pools::F32(keys, values) => KvPages::F32 { keys, values },
        }
    }

    /// The pages with their shape, writable (the KV store and row copies).
    pub fn layer_mut(&mut self) -> KvLayerMut<'_> {
        let (k_scale, v_scale) = (self.spec.k_scale, self.spec.v_scale);
        let pages = match &mut self.pools {
            Pools::Fp8(keys, values) => KvPagesMut::Fp8 {
                keys,
                values,
                k_scale,
                v_scale,
            },
            Pools::Bf16(keys, values) => KvPagesMut::Bf16 { keys, values },
            Pools::F32(keys, values) => KvPagesMut::F32 { keys, values },
        };
        KvLayerMut {
            pages,
            kv_heads: self.spec.kv_heads,
            head_dim: self.spec.head_dim,
            block_size: self.block_size,
        }
    }
}

/// One recurrent layer's conv-window and state pools on the device.
pub struct DeviceRecurrent {
    spec: RecurrentLayerSpec,
    conv: DeviceSlice<f32>,
    state: DeviceSlice<f32>,
}

impl std::fmt::Debug for DeviceRecurrent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceRecurrent")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl DeviceRecurrent {
    /// The layer's sizes.
    pub fn spec(&self) -> &RecurrentLayerSpec {
        &self.spec
    }

    /// The conv windows and states of every slot (`[slots, conv]`, `[slots, state]`),
    /// as the GDN kernels take them.
    pub fn pools_mut(&mut self) -> (&mut DeviceSlice<f32>, &mut DeviceSlice<f32>) {
        (&mut self.conv, &mut self.state)
    }
}

/// A saved copy of one slot: per recurrent layer, its conv window and state.
pub struct DeviceState {
    layers: Vec<(DeviceSlice<f32>, DeviceSlice<f32>)>,
}

impl std::fmt::Debug for DeviceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceState")
            .field("layers", &self.layers.len())
            .finish()
    }
}

/// Pages and slots in the memory of one GPU.
pub struct CudaCacheMemory {
    dev: Arc<CudaDevice>,
    spec: CacheSpec,
    capacity: PoolCapacity,
    kv: Vec<DeviceKv>,
    recurrent: Vec<DeviceRecurrent>,
}

impl std::fmt::Debug for CudaCacheMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaCacheMemory")
            .field("capacity", &self.capacity)
            .field("kv", &self.kv)
            .field("recurrent", &self.recurrent)
            .finish_non_exhaustive()
    }
}

/// A memory error in the cache's terms.
fn memory_err(e: impl std::fmt::Display) -> KvCacheError {
    KvCacheError::Memory(e.to_string())
}

impl CudaCacheMemory {
    /// Zeroed pools for `spec` on `dev` holding `capacity` pages and slots; a spec
    /// that does not describe a usable cache is an error, as is a device that cannot
    /// hold the pools.
    pub fn new(dev: &Arc<CudaDevice>, spec: &CacheSpec, capacity: PoolCapacity) -> Result<Self> {
        spec.validate()?;
        let kv = (spec.attention.iter())
            .map(|a| DeviceKv::new(dev, *a, spec.block_size, spec.kv_dtype, capacity.pages))
            .collect::<Result<_>>()?;
        let recurrent = (spec.recurrent.iter())
            .map(|r| {
                Ok(DeviceRecurrent {
                    spec: *r,
                    conv: dev.zeros(capacity.slots * r.conv)?,
                    state: dev.zeros(capacity.slots * r.state)?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(CudaCacheMemory {
            dev: dev.clone(),
            spec: spec.clone(),
            capacity,
            kv,
            recurrent,
        })
    }

    /// The pools' capacity.
    pub fn capacity(&self) -> PoolCapacity {
        self.capacity
    }

    fn check_page(&self, page: BlockId) -> edge_kvcache::Result<()> {
        check_in_pool("page", page.index(), self.capacity.pages)
    }

    fn check_slot(&self, slot: SlotId) -> edge_kvcache::Result<()> {
        check_in_pool("state slot", slot.index(), self.capacity.slots)
    }
}

/// Ids past a pool are an error, not an out-of-bounds access: the cache hands out ids
/// within its budget and sequence limit, which `PoolCapacity::for_config` covers, but a
/// capacity given by hand may not.
fn check_in_pool(what: &str, id: usize, capacity: usize) -> edge_kvcache::Result<()> {
    if id >= capacity {
        return Err(KvCacheError::Memory(format!(
            "{what} {id} is past the device pool of {capacity}"
        )));
    }
    Ok(())
}

impl CacheMemory for CudaCacheMemory {
    type Kv = DeviceKv;
    type Recurrent = DeviceRecurrent;
    type State = DeviceState;

    fn spec(&self) -> &CacheSpec {
        &self.spec
    }

    fn materialize_page(&mut self, page: BlockId) -> edge_kvcache::Result<()> {
        self.check_page(page)
    }

    fn drop_page(&mut self, _page: BlockId) {}

    fn materialize_slot(&mut self, slot: SlotId) -> edge_kvcache::Result<()> {
        self.check_slot(slot)?;
        self.clear_state(slot)
    }

    fn drop_slot(&mut self, _slot: SlotId) {}

    fn copy_rows(&mut self, from: BlockId, to: BlockId, rows: usize) -> edge_kvcache::Result<()> {
        self.check_page(from)?;
        self.check_page(to)?;
        let block = self.spec.block_size;
        let slot = |page: BlockId, r: usize| (page.index() * block + r) as u32;
        let moves: Vec<(u32, u32)> = (0..rows.min(block))
            .map(|r| (slot(from, r), slot(to, r)))
            .collect();
        for kv in &mut self.kv {
            kv_copy_rows(&self.dev, &mut kv.layer_mut(), &moves).map_err(memory_err)?;
        }
        Ok(())
    }

    fn clear_state(&mut self, slot: SlotId) -> edge_kvcache::Result<()> {
        self.check_slot(slot)?;
        let i = slot.index();
        for r in &mut self.recurrent {
            let (conv, state) = (r.spec.conv, r.spec.state);
            for (pool, len) in [(&mut r.conv, conv), (&mut r.state, state)] {
                if len > 0 {
                    (self.dev)
                        .zero_range(pool, i * len..(i + 1) * len)
                        .map_err(memory_err)?;
                }
            }
        }
        Ok(())
    }

    fn save_state(&self, slot: SlotId) -> edge_kvcache::Result<DeviceState> {
        self.check_slot(slot)?;
        let i = slot.index();
        // One allocate-and-copy per part; an empty part keeps a one-value buffer (the
        // driver allocates nothing of length zero) that `load_state` never reads.
        let copy = |pool: &DeviceSlice<f32>, len: usize| -> Result<DeviceSlice<f32>> {
            if len == 0 {
                return self.dev.zeros(1).map_err(Into::into);
            }
            Ok(self.dev.clone_range(pool, i * len..(i + 1) * len)?)
        };
        let layers = (self.recurrent.iter())
            .map(|r| Ok((copy(&r.conv, r.spec.conv)?, copy(&r.state, r.spec.state)?)))
            .collect::<Result<_>>()
            .map_err(memory_err)?;
        Ok(DeviceState { layers })
    }

    fn load_state(&mut self, slot: SlotId, saved: &DeviceState) -> edge_kvcache::Result<()> {
        self.check_slot(slot)?;
        if saved.layers.len() != self.recurrent.len() {
            return Err(KvCacheError::Memory(format!(
                "a saved state of {} layers for a cache of {}",
                saved.layers.len(),
                self.recurrent.len()
            )));
        }
        let i = slot.index();
        for (r, (conv, state)) in self.recurrent.iter_mut().zip(&saved.layers) {
            let (conv_len, state_len) = (r.spec.conv, r.spec.state);
            for (pool, len, src) in [
                (&mut r.conv, conv_len, conv),
                (&mut r.state, state_len, state),
            ] {
                if len > 0 {
                    (self.dev)
                        .copy(src, 0..len, pool, i * len)
                        .map_err(memory_err)?;
                }
            }
        }
        Ok(())
    }

    fn kv(&self, layer: usize) -> &DeviceKv {
        &self.kv[layer]
    }

    fn kv_mut(&mut self, layer: usize) -> &mut DeviceKv {
        &mut self.kv[layer]
    }

    fn recurrent_mut(&mut self, layer: usize) -> &mut DeviceRecurrent {
        &mut self.recurrent[layer]
    }
}
