//! The Gated DeltaNet decode step on the GPU (`kernels/model/gdn.cu`), for one-token
//! spans: [`gdn_conv_decode`] (the causal conv + SiLU on each span's conv window, then
//! the q/k L2 norms, as `cpu::gdn::conv`) and [`gdn_decode`] (the gated delta rule on each
//! span's state slot and the gated RMSNorm, as `cpu::gdn::recurrence`).

use super::ops::{check_len, cuda_err, dim_u32};
use crate::kernel_sources::GDN;
use crate::{ModelError, Result};
use cudarc::driver::{LaunchConfig, PushKernelArg};
use edge_core::cuda::{CudaDevice, CudaSlice};

/// Threads per block (`EQ_GDN_THREADS`).
const THREADS: u32 = 128;
/// Largest key or value head width the kernel's shared buffers hold (`EQ_GDN_MAX_DIM`).
pub const MAX_HEAD_DIM: usize = 256;

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
pub struct GdnDecodeLayer<'a> {
    /// The head shape.
    pub heads: GdnHeads,
    /// `−exp(A_log)` per value head.
    pub neg_a: &'a CudaSlice<f32>,
    /// The decay bias per value head.
    pub dt_bias: &'a CudaSlice<f32>,
    /// The gated norm's weight (`value_dim`).
    pub norm_weight: &'a CudaSlice<f32>,
    /// The gated norm's epsilon.
    pub eps: f32,
}

/// One decode step's inputs, one token per span: `q`, `k` `[spans, key_heads, key_dim]`
/// (normalised, `q` scaled), `v`, `z` `[spans, value_heads, value_dim]`, `b`, `a`
/// `[spans, value_heads]`.
pub struct GdnDecodeInputs<'a> {
    /// Queries.
    pub q: &'a CudaSlice<f32>,
    /// Keys.
    pub k: &'a CudaSlice<f32>,
    /// Values.
    pub v: &'a CudaSlice<f32>,
    /// β logits.
    pub b: &'a CudaSlice<f32>,
    /// Decay inputs.
    pub a: &'a CudaSlice<f32>,
    /// Output gate.
    pub z: &'a CudaSlice<f32>,
}

/// Fails unless the slots are distinct and inside a pool of `pool`.
fn check_slots(op: &str, slots_host: &[u32], pool: usize) -> Result<()> {
    for (i, &s) in slots_host.iter().enumerate() {
        if s as usize >= pool || slots_host[..i].contains(&s) {
            return Err(ModelError::InvalidInput(format!(
                "{op}: slot {s} (of a pool of {pool}) is out of range or used twice"
            )));
        }
    }
    Ok(())
}

/// Fails unless the head shape is one the kernels take.
fn check_heads(op: &str, hk: usize, hv: usize, dk: usize, dv: usize) -> Result<()> {
    if hk == 0
        || !hv.is_multiple_of(hk)
        || dk == 0
        || dv == 0
        || dk > MAX_HEAD_DIM
        || dv > MAX_HEAD_DIM
    {
        return Err(ModelError::InvalidInput(format!(
            "{op}: {hk} key heads of {dk} and {hv} value heads of {dv} (value heads a multiple \
             of key heads, widths 1..={MAX_HEAD_DIM})"
        )));
    }
    Ok(())
}

/// The head counts and widths as the kernels' u32s: key heads, value heads, key dim,
/// value dim.
fn head_dims(op: &str, heads: GdnHeads) -> Result<[u32; 4]> {
    Ok([
        dim_u32(op, "key heads", heads.key_heads)?,
        dim_u32(op, "value heads", heads.value_heads)?,
        dim_u32(op, "key dim", heads.key_dim)?,
        dim_u32(op, "value dim", heads.value_dim)?,
    ])
}

/// A block of THREADS per (head, span).
fn launch_shape(op: &str, heads: u32, spans: usize) -> Result<LaunchConfig> {
    Ok(LaunchConfig {
        grid_dim: (heads, dim_u32(op, "spans", spans)?, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The conv of one decode step: `qkv` (`[spans, channels]`, channels = q heads, k heads,
/// v heads) through the depthwise conv of `taps` (`[kernel, channels]`) continuing each
/// span's window in `windows` (`[slots, kernel − 1, channels]`, oldest row first, updated),
/// then SiLU; writes `q`, `k` (`[spans, key_heads, key_dim]`, L2-normalised, `q` scaled by
/// `1/√key_dim`) and `v` (`[spans, value_heads, value_dim]`).
#[allow(clippy::too_many_arguments)]
pub fn gdn_conv_decode(
    dev: &CudaDevice,
    heads: GdnHeads,
    taps: &CudaSlice<f32>,
    windows: &mut CudaSlice<f32>,
    slots: &CudaSlice<u32>,
    slots_host: &[u32],
    qkv: &CudaSlice<f32>,
    (q, k, v): (
        &mut CudaSlice<f32>,
        &mut CudaSlice<f32>,
        &mut CudaSlice<f32>,
    ),
) -> Result<()> {
    const OP: &str = "gdn_conv_decode";
    let GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    } = heads;
    check_heads(OP, hk, hv, dk, dv)?;
    let channels = 2 * hk * dk + hv * dv;
    let kernel = taps.len() / channels;
    if kernel == 0 || taps.len() != kernel * channels {
        return Err(ModelError::InvalidInput(format!(
            "{OP}: {} taps are not rows of the {channels} channels",
            taps.len()
        )));
    }
    let spans = slots_host.len();
    check_len(OP, "slots", spans, slots.len())?;
    check_len(OP, "qkv", spans * channels, qkv.len())?;
    check_len(OP, "q", spans * hk * dk, q.len())?;
    check_len(OP, "k", spans * hk * dk, k.len())?;
    check_len(OP, "v", spans * hv * dv, v.len())?;
    let per_slot = (kernel - 1) * channels;
    // A kernel of 1 keeps no window: any slot number is accepted.
    let pool = windows.len().checked_div(per_slot).unwrap_or(usize::MAX);
    if per_slot != 0 {
        check_len(OP, "windows", pool * per_slot, windows.len())?;
    }
    check_slots(OP, slots_host, pool)?;
    if spans == 0 {
        return Ok(());
    }
    let [hk32, hv32, dk32, dv32] = head_dims(OP, heads)?;
    let dims = [hk32, hv32, dk32, dv32, dim_u32(OP, "kernel", kernel)?];
    let func = dev.function(&GDN, "eq_gdn_conv_decode_f32")?;
    let cfg = launch_shape(OP, 2 * hk32 + hv32, spans)?;
    let mut launch = dev.stream().launch_builder(&func);
    launch
        .arg(windows)
        .arg(slots)
        .arg(qkv)
        .arg(taps)
        .arg(q)
        .arg(k)
        .arg(v);
    for d in &dims {
        launch.arg(d);
    }
    // SAFETY: matches eq_gdn_conv_decode_f32's parameters (gdn.cu). Lengths checked above
    // against the shape, slots distinct and inside the window pool, dk, dv ≤
    // EQ_GDN_MAX_DIM; grid (2·hk + hv, spans) with EQ_GDN_THREADS threads.
    unsafe { launch.launch(cfg) }.map_err(cuda_err)?;
    Ok(())
}

/// Runs the step: updates `states` (`[slots, value_heads, key_dim, value_dim]`) at each
/// span's slot (`slots` on the device, `slots_host` the same on the host: checked against
/// the pool and for repeats before the launch) and writes `out`
/// (`[spans, value_heads, value_dim]`).
pub fn gdn_decode(
    dev: &CudaDevice,
    layer: &GdnDecodeLayer<'_>,
    states: &mut CudaSlice<f32>,
    slots: &CudaSlice<u32>,
    slots_host: &[u32],
    x: &GdnDecodeInputs<'_>,
    out: &mut CudaSlice<f32>,
) -> Result<()> {
    const OP: &str = "gdn_decode";
    let GdnHeads {
        key_heads: hk,
        value_heads: hv,
        key_dim: dk,
        value_dim: dv,
    } = layer.heads;
    check_heads(OP, hk, hv, dk, dv)?;
    let spans = slots_host.len();
    check_len(OP, "slots", spans, slots.len())?;
    check_len(OP, "q", spans * hk * dk, x.q.len())?;
    check_len(OP, "k", spans * hk * dk, x.k.len())?;
    check_len(OP, "v", spans * hv * dv, x.v.len())?;
    check_len(OP, "z", spans * hv * dv, x.z.len())?;
    check_len(OP, "b", spans * hv, x.b.len())?;
    check_len(OP, "a", spans * hv, x.a.len())?;
    check_len(OP, "out", spans * hv * dv, out.len())?;
    check_len(OP, "neg_a", hv, layer.neg_a.len())?;
    check_len(OP, "dt_bias", hv, layer.dt_bias.len())?;
    check_len(OP, "norm weight", dv, layer.norm_weight.len())?;
    let per_slot = hv * dk * dv;
    let pool = states.len() / per_slot;
    check_len(OP, "states", pool * per_slot, states.len())?;
    check_slots(OP, slots_host, pool)?;
    if spans == 0 {
        return Ok(());
    }
    let dims = head_dims(OP, layer.heads)?;
    let func = dev.function(&GDN, "eq_gdn_decode_f32")?;
    let cfg = launch_shape(OP, dims[1], spans)?;
    let mut launch = dev.stream().launch_builder(&func);
    launch
        .arg(states)
        .arg(slots)
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
    // SAFETY: matches eq_gdn_decode_f32's parameter list (gdn.cu). Every buffer's length
    // was checked against the shape above, the slots are distinct and inside the pool
    // (checked on the host copy), dk, dv ≤ EQ_GDN_MAX_DIM (the shared buffers), and the
    // grid is (value heads, spans) with EQ_GDN_THREADS threads as the kernel expects.
    unsafe { launch.launch(cfg) }.map_err(cuda_err)?;
    Ok(())
}
