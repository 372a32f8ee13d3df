//! NVFP4 products on tensor cores (`kernels/nvfp4/mma.cu`): `mma.sync` m16n8k16 with
//! bf16 inputs after in-register dequantization, for sm_80 and newer.
//!
//! The numerics are those of bf16 activations: the weights are dequantized to bf16
//! exactly (block scale folded in), f32 activations are rounded to bf16 (nearest even)
//! and the products are summed in f32. So the result of [`nvfp4_linear_tc`] on f32 input
//! equals [`nvfp4_linear_tc_bf16`] on the same input rounded to bf16, up to summation
//! order; against [`super::nvfp4_linear`] (f32 activations) it differs by the activation
//! rounding.
//!
//! The CUDA-core kernels ([`super::nvfp4_linear`]) remain the default: this path has
//! passed its host-emulated parity check (`kernels/host_emulation/check.py`) but not yet
//! a GPU run (`tests/cuda_parity.rs`, ignored without a GPU).

use super::nvfp4::{Activation, LinearDims, MAX_TOKEN_TILES, output_len};
use super::{CudaNvfp4Tensor, sources};
use crate::error::{QuantError, Result};
use edge_core::cuda::LaunchConfig;
use edge_core::cuda::{CudaDevice, DeviceSlice};

/// Weight rows per CTA (`EQ_MMA_ROWS` in common/mma.cuh).
pub(super) const MMA_ROWS: u32 = 32;
/// The oldest architecture with bf16 `mma.sync` (Ampere).
const MIN_MAJOR: u32 = 8;

/// Fails unless the GPU has bf16 `mma.sync` (sm_80+).
pub(super) fn check_tensor_cores(dev: &CudaDevice, op: &str) -> Result<()> {
    let arch = dev.arch();
    if arch.major < MIN_MAJOR {
        return Err(QuantError::Unsupported(format!(
            "{op}: bf16 tensor cores need sm_80 or newer; this GPU is {}",
            arch.sm_name()
        )));
    }
    Ok(())
}

/// The launch shape of a tensor-core product of `rows` weight rows and `tokens` tokens:
/// the entry point's tile suffix (`t8` … `t64`) and the config.
pub(super) fn tc_launch(op: &str, rows: u32, tokens: usize) -> Result<(usize, LaunchConfig)> {
    let (tile, warps) = tile_for(tokens);
    let tiles = tokens.div_ceil(tile);
    if tiles > MAX_TOKEN_TILES {
        return Err(QuantError::Unsupported(format!(
            "{op}: {tokens} tokens need {tiles} tiles of {tile}; at most {MAX_TOKEN_TILES}"
        )));
    }
    let cfg = LaunchConfig {
        grid_dim: (rows.div_ceil(MMA_ROWS), tiles as u32, 1),
        block_dim: (32 * warps, 1, 1),
        // The reduction tile is static shared memory (36 KiB at most).
        shared_mem_bytes: 0,
    };
    Ok((tile, cfg))
}

/// The token tile and warps per CTA for `tokens` tokens: the smallest tile of 8, 16, 32
/// or 64 that holds them (64 for more, in several tiles); 64-token tiles run 4 warps so
/// that the reduction tile fits in static shared memory.
fn tile_for(tokens: usize) -> (usize, u32) {
    match tokens {
        0..=8 => (8, 8),
        9..=16 => (16, 8),
        17..=32 => (32, 8),
        _ => (64, 4),
    }
}

/// `y = x · Wᵀ` on tensor cores for `tokens` rows of `x` (`[tokens, w.cols]`, f32, rounded
/// to bf16 in the kernel) into a new `[tokens, w.rows]` f32 buffer.
pub fn nvfp4_linear_tc(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<f32>,
    tokens: usize,
) -> Result<DeviceSlice<f32>> {
    let mut y = dev.zeros::<f32>(output_len(w.rows(), tokens)?)?;
    tc_into(dev, w, x, tokens, &mut y)?;
    Ok(y)
}

/// [`nvfp4_linear_tc`] into an existing `y` of exactly `tokens · w.rows` elements.
pub fn nvfp4_linear_tc_into(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<f32>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    tc_into(dev, w, x, tokens, y)
}

/// [`nvfp4_linear_tc`] with bf16 activations, given as raw bf16 bits.
pub fn nvfp4_linear_tc_bf16(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<u16>,
    tokens: usize,
) -> Result<DeviceSlice<f32>> {
    let mut y = dev.zeros::<f32>(output_len(w.rows(), tokens)?)?;
    tc_into(dev, w, x, tokens, &mut y)?;
    Ok(y)
}

/// [`nvfp4_linear_tc_bf16`] into an existing `y` of exactly `tokens · w.rows` elements.
pub fn nvfp4_linear_tc_bf16_into(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<u16>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    tc_into(dev, w, x, tokens, y)
}

fn tc_into<A: Activation>(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<A>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "nvfp4_linear_tc";
    check_tensor_cores(dev, OP)?;
    let LinearDims {
        rows,
        cols,
        tokens: tokens_u32,
    } = LinearDims::check(OP, (w.rows(), w.cols()), x.len(), tokens, y.len())?;
    let (tile, cfg) = tc_launch(OP, rows, tokens)?;
    let name = format!("eq_nvfp4_mma_{}_t{tile}", A::TAG);
    let func = dev.function(&sources::NVFP4_MMA, &name)?;
    let global_scale = w.global_scale();
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(w.codes())
        .arg(w.scales())
        .arg(x)
        .arg(y)
        .arg(&global_scale)
        .arg(&rows)
        .arg(&cols)
        .arg(&tokens_u32);
    // SAFETY: matches `eq_nvfp4_mma_*(const u8*, const u8*, const Act*, float*, float,
    // u32 rows, u32 cols, u32 tokens)` with Act = f32 or u16 (bf16 bits) as named. The
    // tensor holds rows·cols/2 code and rows·cols/16 scale bytes with cols % 16 == 0
    // (Nvfp4Tensor invariant); x holds tokens·cols and y tokens·rows elements (checked
    // above). The kernel reads rows < `rows` and tokens < `tokens` (clamped), columns <
    // `cols` (tail blocks masked), and writes y[t·rows + r] for valid t, r only. The
    // block size is 32·W for the W the entry point was instantiated with (tile_for).
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::tile_for;

    #[test]
    fn tiles_cover_tokens_with_the_smallest_fitting_tile() {
        assert_eq!(tile_for(1), (8, 8));
        assert_eq!(tile_for(8), (8, 8));
        assert_eq!(tile_for(9), (16, 8));
        assert_eq!(tile_for(32), (32, 8));
        assert_eq!(tile_for(33), (64, 4));
        assert_eq!(tile_for(1000), (64, 4));
    }
}
