//! The tile path of [`attention_rows`](super::attention_rows)
//! (`kernels/model/attention_tiles.cu`): prompt chunks and token trees in tiles of query
//! rows of one sequence, each tile reading the cached rows once for all its rows, the
//! products on the tensor cores. Its partials are those of the row kernel, merged by the
//! same second pass.

use crate::{AttentionRows, Result};
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// (Query row, query head) pairs per CTA of the tile kernel (`EQ_TILE_PAIRS`).
pub(super) const TILE_PAIRS: usize = 64;
/// Threads per CTA of the tile kernel (`EQ_TILE_THREADS`).
pub(super) const TILE_THREADS: u32 = 128;

/// A pass's query tiles on the device, for one GQA group size.
pub(super) struct DeviceTiles {
    /// Rows per tile at most (`TILE_PAIRS / group`).
    pub most: usize,
    /// Tiles.
    pub tiles: usize,
    /// Each tile's first row.
    pub first: DeviceSlice<u32>,
    /// Each tile's rows.
    pub count: DeviceSlice<u32>,
}

/// The tiles of `rows` for query heads per KV head `group`, or `None` where tiling does
/// not pay: with under two rows a tile on average (a batch of decode rows) the row kernel
/// reads the cache as often and keeps the whole GPU busy with fewer wasted lanes.
pub(super) fn plan(
    dev: &CudaDevice,
    rows: &AttentionRows,
    group: usize,
) -> Result<Option<DeviceTiles>> {
    let most = TILE_PAIRS / group.max(1);
    let tiles = rows.query_tiles(most)?;
    if tiles.is_empty() || tiles.len() * 2 > rows.rows() {
        return Ok(None);
    }
    Ok(Some(DeviceTiles {
        most,
        tiles: tiles.len(),
        first: dev.upload(&tiles.first)?,
        count: dev.upload(&tiles.count)?,
    }))
}
