//! bf16-weight products on tensor cores (`kernels/bf16/mma.cu`): the unquantized
//! checkpoints' linear layers and the (tied) vocabulary projection, `mma.sync` m16n8k16
//! for sm_80 and newer.
//!
//! Numerics are those of [`crate::linear`] with bf16 weights and bf16 activations: f32
//! activations are rounded to bf16 (nearest even) in the kernel and the products summed
//! in f32, so f32 and bf16 input give the same result when the f32 input is already
//! bf16-exact. Like the NVFP4 tensor-core path it has passed its host-emulated check
//! (`kernels/host_emulation/check.py bf16_linear_tc`) but not yet a GPU run.

use super::nvfp4::{Activation, LinearDims, output_len};
use super::nvfp4_tc::{check_tensor_cores, tc_launch};
use super::{check_nonempty, sources};
use crate::error::{QuantError, Result};
use edge_core::cuda::{CudaDevice, DeviceSlice};
use std::sync::Arc;

/// A `[rows, cols]` bf16 matrix resident on the GPU (raw bf16 bits, row-major), `cols` a
/// multiple of 16. Its memory may be shared ([`CudaBf16Matrix::from_shared`]): a tied
/// vocabulary projection reads the embedding table's own copy.
pub struct CudaBf16Matrix {
    data: Arc<DeviceSlice<u16>>,
    rows: usize,
    cols: usize,
}

impl CudaBf16Matrix {
    /// Uploads `bits` (`half::bf16::to_bits` of each element) as a `[rows, cols]` matrix.
    pub fn upload(dev: &CudaDevice, bits: &[u16], rows: usize, cols: usize) -> Result<Self> {
        Self::check_shape(rows, cols, bits.len())?;
        Ok(CudaBf16Matrix {
            data: Arc::new(dev.upload(bits)?),
            rows,
            cols,
        })
    }

    /// A `[rows, cols]` matrix over bf16 bits already on the device (`data` holds exactly
    /// `rows · cols` of them), shared with their other owners rather than copied.
    pub fn from_shared(data: Arc<DeviceSlice<u16>>, rows: usize, cols: usize) -> Result<Self> {
        Self::check_shape(rows, cols, data.len())?;
        Ok(CudaBf16Matrix { data, rows, cols })
    }

    /// The device memory, for sharing ([`CudaBf16Matrix::from_shared`]).
    pub fn shared(&self) -> &Arc<DeviceSlice<u16>> {
        &self.data
    }

    fn check_shape(rows: usize, cols: usize, len: usize) -> Result<()> {
        check_nonempty("bf16 matrix", &[("rows", rows), ("cols", cols)])?;
        if !cols.is_multiple_of(16) {
            return Err(QuantError::NotMultiple {
                what: "bf16 matrix columns",
                multiple: 16,
                got: cols,
            });
        }
        if rows.checked_mul(cols) != Some(len) {
            return Err(QuantError::LengthMismatch {
                what: "bf16 matrix",
                expected: rows.saturating_mul(cols),
                got: len,
            });
        }
        Ok(())
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes on the device (what one pass reads).
    pub fn storage_bytes(&self) -> usize {
        2 * self.rows * self.cols
    }
}

/// `y = x · Wᵀ` on tensor cores for `tokens` rows of `x` (`[tokens, w.cols]`, f32, rounded
/// to bf16 in the kernel) into a new `[tokens, w.rows]` f32 buffer.
pub fn bf16_linear_tc(
    dev: &CudaDevice,
    w: &CudaBf16Matrix,
    x: &DeviceSlice<f32>,
    tokens: usize,
) -> Result<DeviceSlice<f32>> {
    let mut y = dev.zeros::<f32>(output_len(w.rows, tokens)?)?;
    tc_into(dev, w, x, tokens, &mut y)?;
    Ok(y)
}

/// [`bf16_linear_tc`] into an existing `y` of exactly `tokens · w.rows` elements.
pub fn bf16_linear_tc_into(
    dev: &CudaDevice,
    w: &CudaBf16Matrix,
    x: &DeviceSlice<f32>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    tc_into(dev, w, x, tokens, y)
}

/// [`bf16_linear_tc_into`] with bf16 activations, given as raw bf16 bits.
pub fn bf16_linear_tc_bf16_into(
    dev: &CudaDevice,
    w: &CudaBf16Matrix,
    x: &DeviceSlice<u16>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    tc_into(dev, w, x, tokens, y)
}

fn tc_into<A: Activation>(
    dev: &CudaDevice,
    w: &CudaBf16Matrix,
    x: &DeviceSlice<A>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "bf16_linear_tc";
    check_tensor_cores(dev, OP)?;
    let LinearDims {
        rows,
        cols,
        tokens: tokens_u32,
    } = LinearDims::check(OP, (w.rows, w.cols), x.len(), tokens, y.len())?;
    let (tile, cfg) = tc_launch(OP, rows, tokens)?;
    let name = format!("eq_bf16_mma_{}_t{tile}", A::TAG);
    let func = dev.function(&sources::BF16_MMA, &name)?;
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(w.data.as_ref())
        .arg(x)
        .arg(y)
        .arg(&rows)
        .arg(&cols)
        .arg(&tokens_u32);
    // SAFETY: matches `eq_bf16_mma_*(const u16* w, const Act* x, float* y, u32 rows, u32
    // cols, u32 tokens)` with Act = f32 or u16 (bf16 bits) as named. w holds rows·cols
    // values with cols % 16 == 0 (checked at upload); x holds tokens·cols and y tokens·rows
    // elements (checked above). The kernel clamps rows and tokens, masks tail chunks and
    // writes y[t·rows + r] for valid t, r only; block 32·W as tc_launch chose for the tile.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}
