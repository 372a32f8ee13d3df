//! Attention over the paged KV cache on the GPU (`kernels/model/attention.cu`): decode,
//! prompt and token-tree rows alike (each query row sees the rows its
//! [`AttentionRows`] entry names), the sequence split across CTAs and merged by a second
//! pass. Prompt chunks and trees over FP8 or bf16 pages take the tensor-core tile kernel
//! (`attention_tiles.rs`) for the first pass.

use super::attention_tiles::{self, DeviceTiles, TILE_THREADS};
use super::ops::{check_len, dim_u32};
use crate::kernel_sources::{ATTENTION, ATTENTION_TILES};
use crate::{AttentionRows, ModelError, Result};
use edge_core::cuda::{CudaDevice, DeviceSlice};
use edge_core::cuda::{DeviceElem, LaunchConfig};
use std::sync::OnceLock;

/// Threads per CTA of the first pass (`EQ_ATTN_THREADS`).
const THREADS: u32 = 128;
/// Query heads per KV head the kernel holds (`EQ_ATTN_MAX_GROUP`).
pub const MAX_GROUP: usize = 8;
/// The fewest cache rows per CTA of the first pass: long enough that the merge is cheap
/// (short prefixes are not split further).
const SPLIT_ROWS: usize = 256;
/// CTAs the first pass aims for when it splits sequences: several per SM on the
/// largest GPUs.
const TARGET_CTAS: usize = 1024;
/// Query rows one launch takes (the grid's y limit).
pub const MAX_ROWS: usize = 65_535;

/// One attention layer's pages on the device, in the CPU cache's layout (keys and values
/// each `[pages, kv_heads, block, head_dim]`) and element type.
pub enum KvPages<'a> {
    /// FP8 E4M3 codes; the values are code × `k_scale` / `v_scale`.
    Fp8 {
        /// Keys.
        keys: &'a DeviceSlice<u8>,
        /// Values.
        values: &'a DeviceSlice<u8>,
        /// The layer's key scale.
        k_scale: f32,
        /// The layer's value scale.
        v_scale: f32,
    },
    /// bf16 bits.
    Bf16 {
        /// Keys.
        keys: &'a DeviceSlice<u16>,
        /// Values.
        values: &'a DeviceSlice<u16>,
    },
    /// f32 values.
    F32 {
        /// Keys.
        keys: &'a DeviceSlice<f32>,
        /// Values.
        values: &'a DeviceSlice<f32>,
    },
}

/// The layer's attention shape and its cache.
pub struct PagedAttention<'a> {
    /// The pages.
    pub pages: KvPages<'a>,
    /// KV heads.
    pub kv_heads: usize,
    /// Query heads per KV head (1..=[`MAX_GROUP`]).
    pub group: usize,
    /// Head width: 32, 64, 128 or 256.
    pub head_dim: usize,
}

/// A pass's [`AttentionRows`] on the device (uploaded once, read by every attention
/// layer), with the host copy the launches check against.
pub struct DeviceAttentionRows {
    host: AttentionRows,
    table: DeviceSlice<u32>,
    span_of: DeviceSlice<u32>,
    lens: DeviceSlice<u32>,
    masks: DeviceSlice<u64>,
    stores: DeviceSlice<u32>,
    /// The query tiles, planned by the first launch that may use them (every attention
    /// layer of a model has the same group size); `None` inside where tiling does not pay.
    pub(super) tiles: OnceLock<Option<DeviceTiles>>,
}

impl DeviceAttentionRows {
    /// Checks `rows` and uploads them.
    pub fn upload(dev: &CudaDevice, rows: AttentionRows) -> Result<Self> {
        rows.check()?;
        if rows.rows() > MAX_ROWS {
            return Err(ModelError::Unsupported {
                backend: "cuda",
                what: format!(
                    "attention over {} query rows in one launch (at most {MAX_ROWS})",
                    rows.rows()
                ),
            });
        }
        // A zero-length upload is not a valid allocation: keep one padding entry.
        let pad = |v: &[u32]| if v.is_empty() { vec![0] } else { v.to_vec() };
        let masks = if rows.masks.is_empty() {
            vec![0]
        } else {
            rows.masks.clone()
        };
        Ok(DeviceAttentionRows {
            table: dev.upload(&pad(&rows.table))?,
            span_of: dev.upload(&pad(&rows.span_of))?,
            lens: dev.upload(&pad(&rows.lens))?,
            masks: dev.upload(&masks)?,
            stores: dev.upload(&pad(&rows.stores))?,
            host: rows,
            tiles: OnceLock::new(),
        })
    }

    /// The host copy.
    pub fn host(&self) -> &AttentionRows {
        &self.host
    }

    /// Each row's cache slot on the device ([`AttentionRows::stores`]).
    pub(super) fn stores(&self) -> &DeviceSlice<u32> {
        &self.stores
    }
}

/// `out[i, h, :] = softmax(q[i, h] · Kᵀ / √head_dim) · V` over the cache rows query row
/// `i` sees (see [`AttentionRows`]), for every query head `h` (KV head `h / group`);
/// `q` and `out` are `[rows, kv_heads · group, head_dim]`.
pub fn attention_rows(
    dev: &CudaDevice,
    layer: &PagedAttention<'_>,
    rows: &DeviceAttentionRows,
    q: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    attention_pass(dev, layer, rows, q, out, FirstPassKernel::Auto)
}

/// The kernel of the first pass: the tile kernel where it pays ([`attention_rows`]), or
/// the row kernel always (the tests compare the two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FirstPassKernel {
    Auto,
    Rows,
}

/// [`attention_rows`] with the first pass's kernel chosen by `kernel`.
pub(super) fn attention_pass(
    dev: &CudaDevice,
    layer: &PagedAttention<'_>,
    rows: &DeviceAttentionRows,
    q: &DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    kernel: FirstPassKernel,
) -> Result<()> {
    const OP: &str = "attention";
    let host = &rows.host;
    let (kvh, group, dim, block) = (layer.kv_heads, layer.group, layer.head_dim, host.block_size);
    if kvh == 0 || !(1..=MAX_GROUP).contains(&group) || ![32, 64, 128, 256].contains(&dim) {
        return Err(ModelError::Unsupported {
            backend: "cuda",
            what: format!(
                "{OP} with {kvh} KV heads, group {group}, head_dim {dim} (group \
                 1..={MAX_GROUP}, head_dim 32/64/128/256)"
            ),
        });
    }
    let n = host.rows();
    let heads = kvh * group;
    check_len(OP, "q", n * heads * dim, q.len())?;
    check_len(OP, "out", n * heads * dim, out.len())?;
    let page_elems = kvh * block * dim;
    let stored = match &layer.pages {
        KvPages::Fp8 { keys, values, .. } => (keys.len(), values.len()),
        KvPages::Bf16 { keys, values } => (keys.len(), values.len()),
        KvPages::F32 { keys, values } => (keys.len(), values.len()),
    };
    let pool = stored.0 / page_elems;
    check_len(OP, "keys", pool * page_elems, stored.0)?;
    check_len(OP, "values", pool * page_elems, stored.1)?;
    if let Some(&bad) = host.table.iter().find(|&&p| p as usize >= pool) {
        return Err(ModelError::IndexOutOfRange {
            op: OP,
            what: "page",
            index: bad as usize,
            len: pool,
        });
    }
    if n == 0 {
        return Ok(());
    }
    // The tile kernel reads bf16-exact pages only (FP8 codes, bf16): f32 pages take rows.
    let fresh;
    let tiles = if kernel == FirstPassKernel::Rows || matches!(layer.pages, KvPages::F32 { .. }) {
        None
    } else {
        let most = attention_tiles::TILE_PAIRS / group;
        match rows.tiles.get() {
            Some(cached) if cached.as_ref().is_none_or(|t| t.most == most) => cached.as_ref(),
            Some(_) => {
                fresh = attention_tiles::plan(dev, host, group)?;
                fresh.as_ref()
            }
            None => {
                let planned = attention_tiles::plan(dev, host, group)?;
                rows.tiles.get_or_init(|| planned).as_ref()
            }
        }
    };
    let (splits, split_rows) = split(host.longest(), kvh * tiles.map_or(n, |t| t.tiles));
    let mut part_m = dev.zeros::<f32>(n * heads * splits)?;
    let mut part_l = dev.zeros::<f32>(n * heads * splits)?;
    let mut part_acc = dev.zeros::<f32>(n * heads * splits * dim)?;
    let dims = Dims {
        kv_heads: dim_u32(OP, "kv heads", kvh)?,
        group: dim_u32(OP, "group", group)?,
        block: dim_u32(OP, "block", block)?,
        max_pages: dim_u32(OP, "max pages", host.max_pages)?,
        split_rows: dim_u32(OP, "split rows", split_rows)?,
        rows: dim_u32(OP, "rows", n)?,
        splits: dim_u32(OP, "splits", splits)?,
    };
    let scale = 1.0 / (dim as f32).sqrt();
    let mut pass = FirstPass {
        dev,
        dim,
        scale,
        rows,
        tiles,
        q,
        parts: (&mut part_m, &mut part_l, &mut part_acc),
        dims: &dims,
    };
    match &layer.pages {
        KvPages::Fp8 {
            keys,
            values,
            k_scale,
            v_scale,
        } => pass.run("fp8", keys, values, *k_scale, *v_scale)?,
        KvPages::Bf16 { keys, values } => pass.run("bf16", keys, values, 1.0, 1.0)?,
        KvPages::F32 { keys, values } => pass.run("f32", keys, values, 1.0, 1.0)?,
    }
    let heads_u32 = dims.kv_heads * dims.group;
    let dim_u32v = dim as u32;
    let func = dev.function(&ATTENTION, "eq_attn_combine")?;
    let cfg = LaunchConfig {
        grid_dim: (heads_u32, dims.rows, 1),
        block_dim: (dim_u32v, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(&part_m)
        .arg(&part_l)
        .arg(&part_acc)
        .arg(out)
        .arg(&heads_u32)
        .arg(&dim_u32v)
        .arg(&dims.splits);
    // SAFETY: eq_attn_combine(const float* m, const float* l, const float* acc, float* out,
    // u32 heads, u32 dim, u32 splits): the partials hold rows·heads·splits (·dim) values
    // (allocated above), out rows·heads·dim (checked); grid (heads, rows), dim ≤ 256
    // threads.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// How to split sequences of up to `longest` rows for a first pass of `blocks` CTAs per
/// split: `(splits, rows per split)`. Enough splits to give the GPU about [`TARGET_CTAS`] CTAs,
/// never splits shorter than [`SPLIT_ROWS`]: a decode batch splits its long prefixes
/// finely, while a prompt chunk, which has CTAs enough in its rows or tiles, keeps few
/// splits and so few partials (a 512-row chunk at 64K rows split every 256 rows would
/// need 3 GB of them at the 27B shape).
pub(super) fn split(longest: usize, blocks: usize) -> (usize, usize) {
    let most = longest.div_ceil(SPLIT_ROWS).max(1);
    let splits = TARGET_CTAS.div_ceil(blocks.max(1)).clamp(1, most);
    (splits, longest.div_ceil(splits).max(1))
}

/// The u32 launch parameters.
struct Dims {
    kv_heads: u32,
    group: u32,
    block: u32,
    max_pages: u32,
    split_rows: u32,
    rows: u32,
    splits: u32,
}

/// The first pass's arguments other than the pages.
struct FirstPass<'a> {
    dev: &'a CudaDevice,
    dim: usize,
    /// The softmax scale, `1/√head_dim`.
    scale: f32,
    rows: &'a DeviceAttentionRows,
    /// The query tiles where the tile kernel runs the pass.
    tiles: Option<&'a DeviceTiles>,
    q: &'a DeviceSlice<f32>,
    parts: (
        &'a mut DeviceSlice<f32>,
        &'a mut DeviceSlice<f32>,
        &'a mut DeviceSlice<f32>,
    ),
    dims: &'a Dims,
}

impl FirstPass<'_> {
    /// Launches the first pass over pages of element type `T` (`kv` its kernel tag): the
    /// tile kernel where the pass has tiles, else the row kernel.
    fn run<T: DeviceElem>(
        &mut self,
        kv: &str,
        keys: &DeviceSlice<T>,
        values: &DeviceSlice<T>,
        k_scale: f32,
        v_scale: f32,
    ) -> Result<()> {
        let FirstPass {
            dev,
            dim,
            scale,
            rows,
            tiles,
            q,
            dims: d,
            ..
        } = *self;
        let (part_m, part_l, part_acc) =
            (&mut *self.parts.0, &mut *self.parts.1, &mut *self.parts.2);
        let (func, cfg) = match tiles {
            Some(t) => (
                dev.function(&ATTENTION_TILES, &format!("eq_attn_tile_{kv}_d{dim}"))?,
                LaunchConfig {
                    grid_dim: (
                        d.kv_heads,
                        dim_u32("attention", "tiles", t.tiles)?,
                        d.splits,
                    ),
                    block_dim: (TILE_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
            ),
            None => (
                dev.function(&ATTENTION, &format!("eq_attn_rows_{kv}_d{dim}"))?,
                LaunchConfig {
                    grid_dim: (d.kv_heads, d.rows, d.splits),
                    block_dim: (THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
            ),
        };
        let mut launch = dev.launch_builder(&func);
        launch
            .arg(q)
            .arg(&rows.table)
            .arg(&rows.span_of)
            .arg(&rows.lens)
            .arg(&rows.masks);
        if let Some(t) = tiles {
            launch.arg(&t.first).arg(&t.count);
        }
        launch
            .arg(keys)
            .arg(values)
            .arg(&k_scale)
            .arg(&v_scale)
            .arg(&scale)
            .arg(part_m)
            .arg(part_l)
            .arg(part_acc)
            .arg(&d.kv_heads)
            .arg(&d.group)
            .arg(&d.block)
            .arg(&d.max_pages)
            .arg(&d.split_rows);
        // SAFETY: matches EQ_ATTN_ENTRY's parameters (EQ_TILE_ENTRY's with the tile arrays
        // after masks) for the named cache type and head_dim. The tiles are runs of rows
        // of one span planned from the same host rows (first + count ≤ rows, at most
        // EQ_TILE_PAIRS / group rows each). Checked by the caller and
        // DeviceAttentionRows::upload: q holds rows·heads·dim
        // values; the row arrays hold one entry per row and name spans of the table; every
        // table entry is a page of the pool and no row sees past its table, so every row
        // read is inside keys/values; the partials hold rows·heads·splits (·dim) values for
        // the grid (kv_heads, rows or tiles, splits) with splits·split_rows ≥ every
        // row's end.
        unsafe { launch.launch(cfg) }?;
        Ok(())
    }
}
