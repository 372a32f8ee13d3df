//! The gated attention's inputs on the GPU (`kernels/model/rope.cu`): the query/gate
//! split, the per-head q/k norms and the partial rotary embedding, as
//! `cpu::attention::prepare`.

use super::ops::{check_len, dim_u32};
use crate::kernel_sources::ROPE;
use crate::{ModelError, Result};
use edge_core::cuda::LaunchConfig;
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// Threads per block (`EQ_ROPE_THREADS`).
const THREADS: u32 = 128;
/// Widest head the kernel's shared row holds (`EQ_ROPE_MAX_DIM`).
const MAX_DIM: usize = 256;

/// An attention layer's head shape and its norm and rotary parameters on the device.
pub struct AttentionNorms<'a> {
    /// Query heads.
    pub heads: usize,
    /// KV heads.
    pub kv_heads: usize,
    /// Head width (even, at most 256).
    pub head_dim: usize,
    /// The query norm's weight (`head_dim`, zero-centred: the scale is `1 + w`).
    pub q_norm: &'a DeviceSlice<f32>,
    /// The key norm's weight.
    pub k_norm: &'a DeviceSlice<f32>,
    /// The rotary inverse frequencies (`rotary_dim / 2`), the CPU's table.
    pub inv_freq: &'a DeviceSlice<f32>,
    /// The norms' epsilon.
    pub eps: f32,
}

/// Splits `qg` (`[rows, heads, 2 · head_dim]`, per head the queries then the gate) into
/// `q` and `gate` (`[rows, heads, head_dim]`), then normalises and rotates `q` and, in
/// place, `k` (`[rows, kv_heads, head_dim]`) at each row's position.
pub fn attention_inputs(
    dev: &CudaDevice,
    layer: &AttentionNorms<'_>,
    qg: &DeviceSlice<f32>,
    k: &mut DeviceSlice<f32>,
    positions: &DeviceSlice<u32>,
    q: &mut DeviceSlice<f32>,
    gate: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "attention_inputs";
    let (h, hkv, d) = (layer.heads, layer.kv_heads, layer.head_dim);
    let half = layer.inv_freq.len();
    if h == 0 || hkv == 0 || d == 0 || d % 2 != 0 || d > MAX_DIM || 2 * half > d {
        return Err(ModelError::Unsupported {
            backend: "cuda",
            what: format!(
                "{OP} with {h} heads, {hkv} KV heads of {d} and {half} rotary pairs (an \
                 even head_dim of at most {MAX_DIM})"
            ),
        });
    }
    let rows = positions.len();
    check_len(OP, "qg", rows * h * 2 * d, qg.len())?;
    check_len(OP, "k", rows * hkv * d, k.len())?;
    check_len(OP, "q", rows * h * d, q.len())?;
    check_len(OP, "gate", rows * h * d, gate.len())?;
    check_len(OP, "q_norm", d, layer.q_norm.len())?;
    check_len(OP, "k_norm", d, layer.k_norm.len())?;
    if rows == 0 {
        return Ok(());
    }
    let (heads, kv_heads) = (dim_u32(OP, "heads", h)?, dim_u32(OP, "kv heads", hkv)?);
    let (dim, half) = (d as u32, half as u32);
    let func = dev.function(&ROPE, "eq_attn_inputs_f32")?;
    let cfg = LaunchConfig {
        grid_dim: (heads + kv_heads, dim_u32(OP, "rows", rows)?, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(qg)
        .arg(k)
        .arg(positions)
        .arg(layer.q_norm)
        .arg(layer.k_norm)
        .arg(layer.inv_freq)
        .arg(q)
        .arg(gate)
        .arg(&heads)
        .arg(&kv_heads)
        .arg(&dim)
        .arg(&half)
        .arg(&layer.eps);
    // SAFETY: eq_attn_inputs_f32(const float* qg, float* k, const u32* positions, const
    // float* q_norm, const float* k_norm, const float* inv_freq, float* q, float* gate, u32
    // heads, u32 kv_heads, u32 dim, u32 half, float eps): every buffer's length was checked
    // against rows (= positions), heads, kv_heads and dim; dim ≤ EQ_ROPE_MAX_DIM and
    // 2·half ≤ dim; grid (heads + kv_heads, rows).
    unsafe { launch.launch(cfg) }?;
    Ok(())
}
