//! The Gated DeltaNet on the GPU (`kernels/model/gdn.cu`) over a pass's spans
//! ([`GdnRows`]: decode steps, prompt chunks and token trees): [`gdn_conv`] (the causal
//! conv + SiLU continuing each chain span's conv window, each tree row over its path's
//! window, then the q/k L2 norms, as `cpu::gdn::conv` and `cpu::gdn_tree::conv`) and
//! [`gdn_recurrence`] (the gated delta rule on each chain span's state slot, row after
//! row, each tree row from the committed state along its path, then the gated RMSNorm, as
//! `cpu::gdn::recurrence` and `cpu::gdn_tree::recurrence`). A tree commit
//! (`GatedDeltaNet::commit`) gathers the accepted path's kept inputs and runs both ops
//! on a one-span chain, the recurrence's output dropped (`Backend::gdn_advance`).

use super::ops::{check_len, dim_u32};
use crate::kernel_sources::GDN;
use crate::{GdnRows, ModelError, Result};
use edge_core::cuda::LaunchConfig;
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// Threads per block (`EQ_GDN_THREADS`).
const THREADS: u32 = 128;
/// Largest key or value head width the kernel's shared buffers hold (`EQ_GDN_MAX_DIM`).
pub const MAX_HEAD_DIM: usize = 256;
/// Longest conv the kernel keeps in registers (`EQ_GDN_MAX_KERNEL`).
pub const MAX_CONV_KERNEL: usize = 8;
/// Widest key and value heads the chunked kernel takes (`EQ_GDN_CHUNK_MAX_DIM`; the
/// value width is also its thread count).
pub const MAX_CHUNKED_HEAD_DIM: usize = 128;

/// A Gated DeltaNet layer's head shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GdnHeads {
    /// Key heads.
    pub key_heads: usize,
    /// Value heads (a multiple of `key_heads`).
    pub value_heads: usize,
    /// Key head width.
    pub key_dim: usize,
    /// Value head width.
    pub value_dim: usize,
}

/// A Gated DeltaNet layer's recurrence parameters on the device.
pub struct GdnLayer<'a> {
    /// The head shape.
    pub heads: GdnHeads,
    /// `−exp(A_log)` per value head.
    pub neg_a: &'a DeviceSlice<f32>,
    /// The decay bias per value head.
    pub dt_bias: &'a DeviceSlice<f32>,
    /// The gated norm's weight (`value_dim`).
    pub norm_weight: &'a DeviceSlice<f32>,
    /// The gated norm's epsilon.
    pub eps: f32,
}

/// A recurrence's inputs: `q`, `k` (`[key_heads, n, key_dim]` per span of n rows,
/// normalised, `q` scaled) and `v` (`[value_heads, n, value_dim]` per span) as
/// [`gdn_conv`] writes them; token-major `z` (`[rows, value_heads, value_dim]`), `b`, `a`
/// (`[rows, value_heads]`).
pub struct GdnInputs<'a> {
    /// Queries.
    pub q: &'a DeviceSlice<f32>,
    /// Keys.
    pub k: &'a DeviceSlice<f32>,
    /// Values.
    pub v: &'a DeviceSlice<f32>,
    /// β logits.
    pub b: &'a DeviceSlice<f32>,
    /// Decay inputs.
    pub a: &'a DeviceSlice<f32>,
    /// Output gate.
    pub z: &'a DeviceSlice<f32>,
}

/// A pass's [`GdnRows`] on the device (uploaded once, read by every GDN layer), with the
/// host copy the launches check against.
pub struct GdnSpans {
    host: GdnRows,
    slots: DeviceSlice<u32>,
    starts: DeviceSlice<u32>,
    tree_of: DeviceSlice<u32>,
    parents: DeviceSlice<u32>,
}

impl GdnSpans {
    /// Checks `rows` and uploads them.
    pub fn upload(dev: &CudaDevice, rows: GdnRows) -> Result<Self> {
        rows.check()?;
        // A zero-length upload is not a valid allocation: keep one padding entry.
        let up = |v: &[u32]| dev.upload(if v.is_empty() { &[0][..] } else { v });
        Ok(GdnSpans {
            slots: up(&rows.slots)?,
            starts: up(&rows.starts)?,
            tree_of: up(&rows.tree_of)?,
            parents: up(&rows.parents)?,
            host: rows,
        })
    }
}

/// Fails unless the slots are distinct and inside a pool of `pool`.
fn check_slots(op: &'static str, slots_host: &[u32], pool: usize) -> Result<()> {
    for (i, &s) in slots_host.iter().enumerate() {
        if s as usize >= pool || slots_host[..i].contains(&s) {
            return Err(if s as usize >= pool {
                ModelError::IndexOutOfRange {
                    op,
                    what: "state slot",
                    index: s as usize,
                    len: pool,
                }
            } else {
                ModelError::OperandMismatch {
                    op,
                    reason: format!("state slot {s} is used twice"),
                }
            });
        }
    }
    Ok(())
}

/// Fails unless the head shape is one the kernels take.
fn check_heads(op: &'static str, hk: usize, hv: usize, dk: usize, dv: usize) -> Result<()> {
    if hk == 0
        || !hv.is_multiple_of(hk)
        || dk == 0
        || dv == 0
        || dk > MAX_HEAD_DIM
        || dv > MAX_HEAD_DIM
    {
        return Err(ModelError::Unsupported {
            backend: "cuda",
            what: format!(
                "{op} with {hk} key heads of {dk} and {hv} value heads of {dv} (value heads \
                 a multiple of key heads, widths 1..={MAX_HEAD_DIM})"
            ),
        });
    }
    Ok(())
}

/// The head counts and widths as the kernels' u32s: key heads, value heads, key dim,
/// value dim.
fn head_dims(op: &'static str, heads: GdnHeads) -> Result<[u32; 4]> {
    Ok([
        dim_u32(op, "key heads", heads.key_heads)?,
        dim_u32(op, "value heads", heads.value_heads)?,
        dim_u32(op, "key dim", heads.key_dim)?,
        dim_u32(op, "value dim", heads.value_dim)?,
    ])
}

/// A block of THREADS per (head, span).
fn launch_shape(op: &'static str, heads: u32, spans: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        grid_dim: (heads, dim_u32(op, "spans", spans)?, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The conv: `qkv` (`[rows, channels]`, channels = q heads, k heads, v heads) through the
/// depthwise conv of `taps` (`[kernel, channels]`, kernel ≤ [`MAX_CONV_KERNEL`])
/// continuing each span's window in `windows` (`[slots, kernel − 1, channels]`, oldest row
/// first, updated), then SiLU; writes per span `q`, `k` (`[key_heads, n, key_dim]`,
/// L2-normalised, `q` scaled by `1/√key_dim`) and `v` (`[value_heads, n, value_dim]`).
pub fn gdn_conv(
    dev: &CudaDevice,
    heads: GdnHeads,
    taps: &DeviceSlice<f32>,
    windows: &mut DeviceSlice<f32>,
    spans: &GdnSpans,
    qkv: &DeviceSlice<f32>,
    (q, k, v): (
        &mut DeviceSlice<f32>,
        &mut DeviceSlice<f32>,
        &mut DeviceSlice<f32>,
    ),
) -> Result<()> {
    const OP: &str = "gdn_conv";
    let GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    } = heads;
    check_heads(OP, hk, hv, dk, dv)?;
    let channels = 2 * hk * dk + hv * dv;
    let kernel = taps.len() / channels;
    if kernel == 0 || kernel > MAX_CONV_KERNEL || taps.len() != kernel * channels {
        return Err(ModelError::Unsupported {
            backend: "cuda",
            what: format!(
                "{OP} with {} taps (1..={MAX_CONV_KERNEL} rows of the {channels} channels)",
                taps.len()
            ),
        });
    }
    let rows = spans.host.rows();
    check_len(OP, "qkv", rows * channels, qkv.len())?;
    check_len(OP, "q", rows * hk * dk, q.len())?;
    check_len(OP, "k", rows * hk * dk, k.len())?;
    check_len(OP, "v", rows * hv * dv, v.len())?;
    let per_slot = (kernel - 1) * channels;
    // A kernel of 1 keeps no window: any slot number is accepted.
    let pool = windows.len().checked_div(per_slot).unwrap_or(usize::MAX);
    if per_slot != 0 {
        check_len(OP, "windows", pool * per_slot, windows.len())?;
    }
    check_slots(OP, &spans.host.slots, pool)?;
    if spans.host.spans() == 0 {
        return Ok(());
    }
    let [hk32, hv32, dk32, dv32] = head_dims(OP, heads)?;
    let dims = [hk32, hv32, dk32, dv32, dim_u32(OP, "kernel", kernel)?];
    let func = dev.function(&GDN, "eq_gdn_conv_f32")?;
    let cfg = launch_shape(OP, 2 * hk32 + hv32, spans.host.spans())?;
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(windows)
        .arg(&spans.slots)
        .arg(&spans.starts)
        .arg(&spans.tree_of)
        .arg(&spans.parents)
        .arg(qkv)
        .arg(taps)
        .arg(q)
        .arg(k)
        .arg(v);
    for d in &dims {
        launch.arg(d);
    }
    // SAFETY: matches eq_gdn_conv_f32's parameters (gdn.cu). Lengths checked above against
    // the shape and the spans' rows, the span arrays consistent (GdnRows::check: starts
    // ascend from 0, parents earlier rows of their tree), slots distinct and inside the
    // window pool, kernel ≤ EQ_GDN_MAX_KERNEL; grid (2·hk + hv, spans), EQ_GDN_THREADS
    // threads.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// The recurrence's kernel for a pass: the chunked form (`eq_gdn_chunked_f32`, the state
/// read and written once per 32 rows instead of once per row, as the CPU's
/// `delta_rule::chunked`) where a span has several rows, the pass has no token trees and
/// the heads are at most [`MAX_CHUNKED_HEAD_DIM`] wide; else the row kernel (every
/// decode step and tree verification).
pub(super) fn recurrence_kernel(heads: GdnHeads, spans: &GdnRows) -> &'static str {
    let fits = heads.key_dim.max(heads.value_dim) <= MAX_CHUNKED_HEAD_DIM;
    if fits && spans.trees() == 0 && spans.longest() > 1 {
        "eq_gdn_chunked_f32"
    } else {
        "eq_gdn_recurrence_f32"
    }
}

/// The recurrence: updates `states` (`[slots, value_heads, key_dim, value_dim]`) at each
/// span's slot, as row after row would, and writes `out` (`[rows, value_heads,
/// value_dim]`, token-major). Prompt chunks take the chunked kernel where
/// `recurrence_kernel` allows it.
pub fn gdn_recurrence(
    dev: &CudaDevice,
    layer: &GdnLayer<'_>,
    states: &mut DeviceSlice<f32>,
    spans: &GdnSpans,
    x: &GdnInputs<'_>,
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "gdn_recurrence";
    let GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    } = layer.heads;
    check_heads(OP, hk, hv, dk, dv)?;
    let rows = spans.host.rows();
    check_len(OP, "q", rows * hk * dk, x.q.len())?;
    check_len(OP, "k", rows * hk * dk, x.k.len())?;
    check_len(OP, "v", rows * hv * dv, x.v.len())?;
    check_len(OP, "z", rows * hv * dv, x.z.len())?;
    check_len(OP, "b", rows * hv, x.b.len())?;
    check_len(OP, "a", rows * hv, x.a.len())?;
    check_len(OP, "out", rows * hv * dv, out.len())?;
    check_len(OP, "neg_a", hv, layer.neg_a.len())?;
    check_len(OP, "dt_bias", hv, layer.dt_bias.len())?;
    check_len(OP, "norm weight", dv, layer.norm_weight.len())?;
    let per_slot = hv * dk * dv;
    let pool = states.len() / per_slot;
    check_len(OP, "states", pool * per_slot, states.len())?;
    check_slots(OP, &spans.host.slots, pool)?;
    if spans.host.spans() == 0 {
        return Ok(());
    }
    let dims = head_dims(OP, layer.heads)?;
    // Each tree row's state along its path, one [hv, dk, dv] block per tree (not cached:
    // allocated per call until the backend's allocator exists). Chain-only passes (every
    // decode step) never read it: they get a one-value placeholder, not a state's worth.
    let trees = spans.host.trees();
    let mut scratch = dev.zeros::<f32>(if trees == 0 { 1 } else { trees * per_slot })?;
    let func = dev.function(&GDN, recurrence_kernel(layer.heads, &spans.host))?;
    let cfg = launch_shape(OP, dims[1], spans.host.spans())?;
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(states)
        .arg(&spans.slots)
        .arg(&spans.starts)
        .arg(&spans.tree_of)
        .arg(&spans.parents)
        .arg(&mut scratch)
        .arg(x.q)
        .arg(x.k)
        .arg(x.v)
        .arg(x.b)
        .arg(x.a)
        .arg(x.z)
        .arg(layer.neg_a)
        .arg(layer.dt_bias)
        .arg(layer.norm_weight)
        .arg(out)
        .arg(&dims[0])
        .arg(&dims[1])
        .arg(&dims[2])
        .arg(&dims[3])
        .arg(&layer.eps);
    // SAFETY: matches eq_gdn_recurrence_f32's parameter list (gdn.cu), which
    // eq_gdn_chunked_f32 shares (chosen only without trees and for dk, dv ≤
    // EQ_GDN_CHUNK_MAX_DIM ≤ EQ_GDN_THREADS, its shared buffers and thread count). Every buffer's
    // length was checked against the shape and the spans' rows above, the span arrays are
    // consistent (GdnRows::check: starts ascend, parents are earlier rows of their tree,
    // trees numbered 0.. and at most 64 rows), the slots are distinct and inside the pool,
    // scratch holds one [hv, dk, dv] block per tree, dk, dv ≤ EQ_GDN_MAX_DIM (the shared
    // buffers), and the grid is (value heads, spans) with EQ_GDN_THREADS threads.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}
