//! NVFP4 on the GPU: resident tensors, quantize, dequantize and the linear products.

use super::{
    ELEMENTWISE_THREADS, absmax, blocks_for, check_nonempty, check_positive_scale, dim_u32, sources,
};
use crate::error::{QuantError, Result, check_finite, check_len};
use crate::nvfp4::quantize::global_scale_for;
use crate::nvfp4::{BLOCK, Nvfp4Tensor, check_cols};
use edge_core::cuda::{CudaDevice, DeviceSlice};
use edge_core::cuda::{DeviceElem, LaunchConfig};

/// Warps (= output rows) per block of the GEMV kernels (`EQ_GEMV_WARPS` in gemv.cu).
const GEMV_WARPS: u32 = 4;
/// Output rows per block of the small-batch GEMM kernels (`EQ_GEMM_ROWS` in gemv.cu).
const GEMM_ROWS: u32 = 32;
/// Threads per block of the small-batch GEMM kernels (`32 · EQ_GEMM_WARPS`).
const GEMM_THREADS: u32 = 256;
/// The most token tiles one launch may cover (the CUDA limit on `gridDim.y`).
pub(super) const MAX_TOKEN_TILES: usize = 65_535;

/// An NVFP4 matrix resident on the GPU, in checkpoint layout: packed codes
/// `[rows, cols/2]` (even element in the low nibble), row-major E4M3 block scales
/// `[rows, cols/16]`, and the f32 global scale (`weight_scale_2`).
#[derive(Debug)]
pub struct CudaNvfp4Tensor {
    rows: usize,
    cols: usize,
    codes: DeviceSlice<u8>,
    scales: DeviceSlice<u8>,
    global_scale: f32,
}

impl CudaNvfp4Tensor {
    /// Copies a host tensor to the GPU.
    pub fn upload(dev: &CudaDevice, t: &Nvfp4Tensor) -> Result<Self> {
        check_nonempty("NVFP4 upload", &[("rows", t.rows()), ("cols", t.cols())])?;
        Ok(CudaNvfp4Tensor {
            rows: t.rows(),
            cols: t.cols(),
            codes: dev.upload(t.codes())?,
            scales: dev.upload(t.scales())?,
            global_scale: t.global_scale(),
        })
    }

    /// Copies the tensor back to the host (synchronising the stream).
    pub fn download(&self, dev: &CudaDevice) -> Result<Nvfp4Tensor> {
        Nvfp4Tensor::from_parts(
            self.rows,
            self.cols,
            dev.download(&self.codes)?,
            dev.download(&self.scales)?,
            self.global_scale,
        )
    }

    /// Number of rows (output features of a weight).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (input features of a weight).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The packed E2M1 codes, `[rows, cols/2]`.
    pub fn codes(&self) -> &DeviceSlice<u8> {
        &self.codes
    }

    /// The E4M3 block-scale bytes, `[rows, cols/16]`.
    pub fn scales(&self) -> &DeviceSlice<u8> {
        &self.scales
    }

    /// The f32 global scale.
    pub fn global_scale(&self) -> f32 {
        self.global_scale
    }

    /// Bytes one pass over the tensor reads (codes + scales).
    pub fn storage_bytes(&self) -> usize {
        self.codes.len() + self.scales.len()
    }
}

/// `rows · cols`, or a shape error on overflow.
fn elements(op: &'static str, rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .ok_or_else(|| QuantError::ShapeMismatch {
            op,
            detail: format!("{rows} × {cols} overflows usize"),
        })
}

/// Quantizes the row-major f32 matrix `x` (`[rows, cols]`, `cols` a multiple of 16) to
/// NVFP4 with the given global scale, on the GPU.
///
/// Per 16-element block: `s = amax / (6·g)`, `s == 0 → 1`, clamped to `[2^-9, 448]`,
/// rounded to E4M3; codes are `e2m1_rne(x / (f32(s)·g))`. The bytes are identical to the
/// CPU quantizer's. A NaN or infinity in `x` gives [`QuantError::NonFinite`] with the
/// flat index of the first one, as on the CPU.
pub fn nvfp4_quantize(
    dev: &CudaDevice,
    rows: usize,
    cols: usize,
    x: &DeviceSlice<f32>,
    global_scale: f32,
) -> Result<CudaNvfp4Tensor> {
    const OP: &str = "nvfp4_quantize";
    check_cols(cols)?;
    check_nonempty(OP, &[("rows", rows), ("cols", cols)])?;
    let n = elements(OP, rows, cols)?;
    check_len("NVFP4 quantize input", n, x.len())?;
    check_positive_scale("NVFP4 global scale", global_scale)?;

    let n_blocks = n / BLOCK;
    let mut codes = dev.zeros::<u8>(n / 2)?;
    let mut scales = dev.zeros::<u8>(n_blocks)?;
    let mut bad = dev.upload(&[u64::MAX])?;
    let func = dev.function(&sources::NVFP4_QUANTIZE, "eq_nvfp4_quantize_f32")?;
    let n_blocks_u64 = n_blocks as u64;
    let cfg = LaunchConfig {
        grid_dim: (
            blocks_for(n_blocks, ELEMENTWISE_THREADS, i32::MAX as usize),
            1,
            1,
        ),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(x)
        .arg(&mut codes)
        .arg(&mut scales)
        .arg(&mut bad)
        .arg(&global_scale)
        .arg(&n_blocks_u64);
    // SAFETY: the argument list matches `eq_nvfp4_quantize_f32(const float*, u8*, u8*,
    // u64*, float, u64)`. x holds n = 16·n_blocks floats (checked above), codes n/2 =
    // 8·n_blocks bytes, scales n_blocks bytes, bad one u64; the kernel touches block b <
    // n_blocks only (x[16b..16b+16], codes[8b..8b+8], scales[b]). All are separate
    // allocations (256-byte aligned), as the float4/uint2 accesses need.
    unsafe { launch.launch(cfg) }?;

    let first_bad = dev.download(&bad)?[0];
    if first_bad != u64::MAX {
        let index = first_bad as usize;
        let value = dev.download_range(x, index..index + 1)?[0];
        return Err(QuantError::NonFinite {
            what: "NVFP4 quantize input",
            index,
            value,
        });
    }
    Ok(CudaNvfp4Tensor {
        rows,
        cols,
        codes,
        scales,
        global_scale,
    })
}

/// Quantizes like [`Nvfp4Tensor::quantize`]: the global scale is
/// [`global_scale_for`]`(amax(x))`, with the abs-max reduced on the GPU, then
/// [`nvfp4_quantize`]. Byte-identical to the CPU, errors included (a non-finite input
/// gives [`QuantError::NonFinite`] with the first offending index).
pub fn nvfp4_quantize_auto(
    dev: &CudaDevice,
    rows: usize,
    cols: usize,
    x: &DeviceSlice<f32>,
) -> Result<CudaNvfp4Tensor> {
    check_cols(cols)?;
    check_nonempty("nvfp4_quantize", &[("rows", rows), ("cols", cols)])?;
    check_len(
        "NVFP4 quantize input",
        elements("nvfp4_quantize", rows, cols)?,
        x.len(),
    )?;
    let amax = absmax(dev, x)?;
    if !amax.is_finite() {
        // Rare error path: find the first offending element exactly as the CPU does.
        check_finite("NVFP4 quantize input", &dev.download(x)?)?;
    }
    nvfp4_quantize(dev, rows, cols, x, global_scale_for(amax))
}

/// Dequantizes to a row-major f32 matrix `[rows, cols]`, bit-identical to
/// [`Nvfp4Tensor::dequantize`].
pub fn nvfp4_dequantize(dev: &CudaDevice, w: &CudaNvfp4Tensor) -> Result<DeviceSlice<f32>> {
    let mut out = dev.zeros::<f32>(w.rows * w.cols)?;
    nvfp4_dequantize_into(dev, w, &mut out)?;
    Ok(out)
}

/// [`nvfp4_dequantize`] into an existing `out` of exactly `rows · cols` elements.
pub fn nvfp4_dequantize_into(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    out: &mut DeviceSlice<f32>,
) -> Result<()> {
    let n = w.rows * w.cols;
    check_len("nvfp4_dequantize output", n, out.len())?;
    let n_blocks = n / BLOCK;
    let func = dev.function(&sources::NVFP4_DEQUANTIZE, "eq_nvfp4_dequantize_f32")?;
    let n_blocks_u64 = n_blocks as u64;
    let cfg = LaunchConfig {
        grid_dim: (
            blocks_for(n_blocks, ELEMENTWISE_THREADS, i32::MAX as usize),
            1,
            1,
        ),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(&w.codes)
        .arg(&w.scales)
        .arg(out)
        .arg(&w.global_scale)
        .arg(&n_blocks_u64);
    // SAFETY: matches `eq_nvfp4_dequantize_f32(const u8*, const u8*, float*, float, u64)`.
    // A CudaNvfp4Tensor always holds rows·cols/2 code bytes and rows·cols/16 scale bytes
    // (built by upload from a checked Nvfp4Tensor, or by nvfp4_quantize), out holds
    // rows·cols = 16·n_blocks floats (checked above) in its own 256-byte-aligned
    // allocation (float4 stores), and the kernel touches block b < n_blocks only.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// Activation element types the linear kernels take.
pub(super) trait Activation: DeviceElem {
    /// The kernel-name tag.
    const TAG: &'static str;
}

impl Activation for f32 {
    const TAG: &'static str = "f32";
}

/// bf16 activations travel as their raw `u16` bits.
impl Activation for u16 {
    const TAG: &'static str = "bf16";
}

/// `y = x · Wᵀ` for `tokens` rows of `x` (`[tokens, w.cols]`, row-major f32) into a new
/// `[tokens, w.rows]` f32 buffer.
///
/// One to four tokens run the GEMV kernel (a warp per output row); more run the
/// small-batch GEMM in tiles of 8 or 16 tokens. Both dequantize in registers and apply
/// each block scale once per 16 products. Results match the f64 reference within the
/// tolerance documented in `tests/cuda_parity.rs`.
pub fn nvfp4_linear(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<f32>,
    tokens: usize,
) -> Result<DeviceSlice<f32>> {
    let mut y = dev.zeros::<f32>(output_len(w.rows, tokens)?)?;
    linear_into(dev, w, x, tokens, &mut y)?;
    Ok(y)
}

/// [`nvfp4_linear`] into an existing `y` of exactly `tokens · w.rows` elements
/// (no allocation; the decode loop's form).
pub fn nvfp4_linear_into(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<f32>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    linear_into(dev, w, x, tokens, y)
}

/// [`nvfp4_linear`] with bf16 activations, given as raw bf16 bits (`half::bf16::to_bits`).
pub fn nvfp4_linear_bf16(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<u16>,
    tokens: usize,
) -> Result<DeviceSlice<f32>> {
    let mut y = dev.zeros::<f32>(output_len(w.rows, tokens)?)?;
    linear_into(dev, w, x, tokens, &mut y)?;
    Ok(y)
}

/// [`nvfp4_linear_bf16`] into an existing `y` of exactly `tokens · w.rows` elements.
pub fn nvfp4_linear_bf16_into(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<u16>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    linear_into(dev, w, x, tokens, y)
}

/// Elements of the `[tokens, rows]` output, checking `tokens > 0` before allocation.
pub(super) fn output_len(rows: usize, tokens: usize) -> Result<usize> {
    check_nonempty("linear", &[("tokens", tokens)])?;
    elements("linear", tokens, rows)
}

/// Picks the kernel for `tokens`: (token tile, is the small-batch GEMM).
fn token_tile(tokens: usize) -> (usize, bool) {
    match tokens {
        0..=1 => (1, false),
        2 => (2, false),
        3..=4 => (4, false),
        5..=8 => (8, true),
        _ => (16, true),
    }
}

/// A product's dimensions after checking its operands (what every linear kernel takes).
pub(super) struct LinearDims {
    pub rows: u32,
    pub cols: u32,
    pub tokens: u32,
}

impl LinearDims {
    /// Checks `tokens > 0`, `x` = `[tokens, cols]` and `y` = `[tokens, rows]` for a
    /// `[rows, cols]` weight.
    pub(super) fn check(
        op: &'static str,
        (rows, cols): (usize, usize),
        x_len: usize,
        tokens: usize,
        y_len: usize,
    ) -> Result<Self> {
        check_nonempty(op, &[("tokens", tokens)])?;
        check_len("linear activations", elements(op, tokens, cols)?, x_len)?;
        check_len("linear output", elements(op, tokens, rows)?, y_len)?;
        Ok(LinearDims {
            rows: dim_u32(op, "rows", rows)?,
            cols: dim_u32(op, "cols", cols)?,
            tokens: dim_u32(op, "tokens", tokens)?,
        })
    }
}

fn linear_into<A: Activation>(
    dev: &CudaDevice,
    w: &CudaNvfp4Tensor,
    x: &DeviceSlice<A>,
    tokens: usize,
    y: &mut DeviceSlice<f32>,
) -> Result<()> {
    const OP: &str = "nvfp4_linear";
    let LinearDims {
        rows,
        cols,
        tokens: tokens_u32,
    } = LinearDims::check(OP, (w.rows, w.cols), x.len(), tokens, y.len())?;

    let (tile, gemm) = token_tile(tokens);
    let tiles = tokens.div_ceil(tile);
    if tiles > MAX_TOKEN_TILES {
        return Err(QuantError::Unsupported(format!(
            "{OP}: {tokens} tokens need {tiles} tiles of {tile}; at most {MAX_TOKEN_TILES}"
        )));
    }
    let kind = if gemm { "gemm" } else { "gemv" };
    let name = format!("eq_nvfp4_{kind}_{}_t{tile}", A::TAG);
    let func = dev.function(&sources::NVFP4_GEMV, &name)?;
    let (grid_x, threads) = if gemm {
        (rows.div_ceil(GEMM_ROWS), GEMM_THREADS)
    } else {
        (rows.div_ceil(GEMV_WARPS), 32 * GEMV_WARPS)
    };
    let cfg = LaunchConfig {
        grid_dim: (grid_x, tiles as u32, 1),
        block_dim: (threads, 1, 1),
        // The GEMM's activation tile is static shared memory (≤ 40 KiB).
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch
        .arg(&w.codes)
        .arg(&w.scales)
        .arg(x)
        .arg(y)
        .arg(&w.global_scale)
        .arg(&rows)
        .arg(&cols)
        .arg(&tokens_u32);
    // SAFETY: matches `eq_nvfp4_{gemv,gemm}_*(const u8*, const u8*, const Act*, float*,
    // float, u32 rows, u32 cols, u32 tokens)` with Act = f32 or u16 (bf16 bits) as named.
    // The tensor holds rows·cols/2 code and rows·cols/16 scale bytes with cols % 16 == 0
    // (Nvfp4Tensor invariant); x holds tokens·cols and y tokens·rows elements (checked
    // above). The kernels read rows < `rows`, tokens < `tokens` (partial tiles clamp or
    // zero-fill) and columns < `cols`, and write y[t·rows + r] for valid t, r only. The
    // launch shape is the one gemv.cu documents (block = 32·warps, grid.y = token tiles).
    unsafe { launch.launch(cfg) }?;
    Ok(())
}
