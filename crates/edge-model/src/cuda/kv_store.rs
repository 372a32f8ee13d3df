//! Writes into the paged KV cache on the GPU (`kernels/model/kv_store.cu`): each row's
//! keys and values stored in its cache slot in the pages' element type
//! ([`kv_store`], as `HostKv::write_row`), and cached rows copied in order
//! ([`kv_copy_rows`], as `HostKv::copy_row` for a tree commit).

use super::attention::DeviceAttentionRows;
use super::ops::{check_len, dim_u32};
use crate::kernel_sources::KV_STORE;
use crate::{ModelError, Result};
use edge_core::cuda::{CudaDevice, DeviceSlice};
use edge_core::cuda::{DeviceElem, LaunchConfig};

/// Threads per block (`EQ_KV_THREADS`).
const THREADS: u32 = 256;
/// Grid cap of the store (it loops grid-stride beyond it).
const MAX_BLOCKS: usize = 4096;

/// One attention layer's pages on the device, writable, in the CPU cache's layout (keys
/// and values each `[pages, kv_heads, block, head_dim]`).
pub enum KvPagesMut<'a> {
    /// FP8 E4M3 codes of value / scale.
    Fp8 {
        /// Keys.
        keys: &'a mut DeviceSlice<u8>,
        /// Values.
        values: &'a mut DeviceSlice<u8>,
        /// The layer's key scale.
        k_scale: f32,
        /// The layer's value scale.
        v_scale: f32,
    },
    /// bf16 bits.
    Bf16 {
        /// Keys.
        keys: &'a mut DeviceSlice<u16>,
        /// Values.
        values: &'a mut DeviceSlice<u16>,
    },
    /// f32 values.
    F32 {
        /// Keys.
        keys: &'a mut DeviceSlice<f32>,
        /// Values.
        values: &'a mut DeviceSlice<f32>,
    },
}

/// The layer's KV shape and its pages.
pub struct KvLayerMut<'a> {
    /// The pages.
    pub pages: KvPagesMut<'a>,
    /// KV heads.
    pub kv_heads: usize,
    /// Head width.
    pub head_dim: usize,
    /// Rows per page.
    pub block_size: usize,
}

impl KvLayerMut<'_> {
    /// Cache slots the pages hold, after checking keys and values hold whole pages.
    fn slots(&self, op: &'static str) -> Result<usize> {
        let page = self.kv_heads * self.block_size * self.head_dim;
        if page == 0 {
            return Err(ModelError::OperandMismatch {
                op,
                reason: format!(
                    "{} KV heads of {}, {} rows a page",
                    self.kv_heads, self.head_dim, self.block_size
                ),
            });
        }
        let (k, v) = match &self.pages {
            KvPagesMut::Fp8 { keys, values, .. } => (keys.len(), values.len()),
            KvPagesMut::Bf16 { keys, values } => (keys.len(), values.len()),
            KvPagesMut::F32 { keys, values } => (keys.len(), values.len()),
        };
        check_len(op, "keys", k / page * page, k)?;
        check_len(op, "values", k, v)?;
        Ok(k / page * self.block_size)
    }
}

/// Stores row `i` of `k` and `v` (`[rows, kv_heads · head_dim]`) in cache slot
/// `rows.host().stores[i]`.
pub fn kv_store(
    dev: &CudaDevice,
    layer: &mut KvLayerMut<'_>,
    rows: &DeviceAttentionRows,
    k: &DeviceSlice<f32>,
    v: &DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "kv_store";
    let slots = layer.slots(OP)?;
    let host = rows.host();
    if host.block_size != layer.block_size {
        return Err(ModelError::OperandMismatch {
            op: OP,
            reason: format!(
                "rows planned for pages of {}, the cache has {}",
                host.block_size, layer.block_size
            ),
        });
    }
    let n = host.rows();
    let width = layer.kv_heads * layer.head_dim;
    check_len(OP, "k", n * width, k.len())?;
    check_len(OP, "v", n * width, v.len())?;
    if let Some(&bad) = host.stores.iter().find(|&&s| s as usize >= slots) {
        return Err(ModelError::IndexOutOfRange {
            op: OP,
            what: "cache slot",
            index: bad as usize,
            len: slots,
        });
    }
    if n == 0 {
        return Ok(());
    }
    let dims = [
        dim_u32(OP, "kv heads", layer.kv_heads)?,
        dim_u32(OP, "block", layer.block_size)?,
        dim_u32(OP, "head dim", layer.head_dim)?,
    ];
    let blocks = (n * width).div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS) as u32;
    let store = Store {
        dev,
        cfg: LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        },
        rows,
        k,
        v,
        dims,
        n: n as u64,
    };
    match &mut layer.pages {
        KvPagesMut::Fp8 {
            keys,
            values,
            k_scale,
            v_scale,
        } => store.run("eq_kv_store_fp8", keys, values, *k_scale, *v_scale),
        KvPagesMut::Bf16 { keys, values } => store.run("eq_kv_store_bf16", keys, values, 1.0, 1.0),
        KvPagesMut::F32 { keys, values } => store.run("eq_kv_store_f32", keys, values, 1.0, 1.0),
    }
}

/// The store's arguments other than the pages.
struct Store<'a> {
    dev: &'a CudaDevice,
    cfg: LaunchConfig,
    rows: &'a DeviceAttentionRows,
    k: &'a DeviceSlice<f32>,
    v: &'a DeviceSlice<f32>,
    /// kv_heads, block, head_dim.
    dims: [u32; 3],
    n: u64,
}

impl Store<'_> {
    fn run<T: DeviceElem>(
        &self,
        entry: &str,
        keys: &mut DeviceSlice<T>,
        values: &mut DeviceSlice<T>,
        k_scale: f32,
        v_scale: f32,
    ) -> Result<()> {
        let func = self.dev.function(&KV_STORE, entry)?;
        let mut launch = self.dev.launch_builder(&func);
        launch
            .arg(self.k)
            .arg(self.v)
            .arg(self.rows.stores())
            .arg(keys)
            .arg(values)
            .arg(&k_scale)
            .arg(&v_scale)
            .arg(&self.dims[0])
            .arg(&self.dims[1])
            .arg(&self.dims[2])
            .arg(&self.n);
        // SAFETY: eq_kv_store_<kv>(const float* k, const float* v, const u32* slots, KV* keys,
        // KV* values, float k_scale, float v_scale, u32 kv_heads, u32 block, u32 dim, u64
        // rows) with KV the pages' element type: k and v hold rows·kv_heads·dim values, the
        // slots one per row, each inside the pages (checked by kv_store); grid-stride.
        unsafe { launch.launch(self.cfg) }?;
        Ok(())
    }
}

/// Copies cached rows `(from, to)` (cache slots, `page · block + row`) in order: a later
/// move reads what an earlier one wrote.
pub fn kv_copy_rows(
    dev: &CudaDevice,
    layer: &mut KvLayerMut<'_>,
    moves: &[(u32, u32)],
) -> Result<()> {
    const OP: &str = "kv_copy_rows";
    let slots = layer.slots(OP)?;
    if let Some(&bad) = moves
        .iter()
        .find(|&&(a, b)| a as usize >= slots || b as usize >= slots)
    {
        let (from, to) = bad;
        return Err(ModelError::IndexOutOfRange {
            op: OP,
            what: "cache slot of a move",
            index: (from as usize).max(to as usize),
            len: slots,
        });
    }
    if moves.is_empty() {
        return Ok(());
    }
    let flat: Vec<u32> = moves.iter().flat_map(|&(a, b)| [a, b]).collect();
    let on_device = dev.upload(&flat)?;
    let n_moves = dim_u32(OP, "moves", moves.len())?;
    let dims = [
        dim_u32(OP, "kv heads", layer.kv_heads)?,
        dim_u32(OP, "block", layer.block_size)?,
        dim_u32(OP, "head dim", layer.head_dim)?,
    ];
    let copy = Copy {
        dev,
        moves: &on_device,
        n_moves,
        dims,
    };
    match &mut layer.pages {
        KvPagesMut::Fp8 { keys, values, .. } => copy.run("eq_kv_copy_rows_fp8", keys, values),
        KvPagesMut::Bf16 { keys, values } => copy.run("eq_kv_copy_rows_bf16", keys, values),
        KvPagesMut::F32 { keys, values } => copy.run("eq_kv_copy_rows_f32", keys, values),
    }
}

/// The row copy's arguments other than the pages.
struct Copy<'a> {
    dev: &'a CudaDevice,
    moves: &'a DeviceSlice<u32>,
    n_moves: u32,
    /// kv_heads, block, head_dim.
    dims: [u32; 3],
}

impl Copy<'_> {
    fn run<T: DeviceElem>(
        &self,
        entry: &str,
        keys: &mut DeviceSlice<T>,
        values: &mut DeviceSlice<T>,
    ) -> Result<()> {
        let func = self.dev.function(&KV_STORE, entry)?;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = self.dev.launch_builder(&func);
        launch
            .arg(keys)
            .arg(values)
            .arg(self.moves)
            .arg(&self.n_moves)
            .arg(&self.dims[0])
            .arg(&self.dims[1])
            .arg(&self.dims[2]);
        // SAFETY: eq_kv_copy_rows_<kv>(KV* keys, KV* values, const u32* moves, u32 n_moves,
        // u32 kv_heads, u32 block, u32 dim) with KV the pages' element type: moves holds
        // 2·n_moves slots, each inside the pages (checked by kv_copy_rows); one block.
        unsafe { launch.launch(cfg) }?;
        Ok(())
    }
}
