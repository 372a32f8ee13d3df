//! Per-tensor FP8 E4M3 on the GPU: quantize, dequantize, abs-max, resident tensors.

use super::{ELEMENTWISE_THREADS, blocks_for, check_nonempty, check_positive_scale, sources};
use crate::error::{QuantError, Result, check_finite, check_len};
use crate::fp8::Fp8Tensor;
use crate::fp8::quantize::scale_for;
use edge_core::cuda::{CudaDevice, DeviceSlice};
use edge_core::cuda::{DeviceElem, LaunchConfig};

/// Grid cap of the grid-stride element-wise kernels.
const MAX_BLOCKS: usize = 4096;

/// An FP8 E4M3 matrix resident on the GPU with its per-tensor dequantization scale.
#[derive(Debug)]
pub struct CudaFp8Tensor {
    rows: usize,
    cols: usize,
    codes: DeviceSlice<u8>,
    scale: f32,
}

impl CudaFp8Tensor {
    /// Copies a host tensor to the GPU.
    pub fn upload(dev: &CudaDevice, t: &Fp8Tensor) -> Result<Self> {
        check_nonempty("FP8 upload", &[("rows", t.rows()), ("cols", t.cols())])?;
        Ok(CudaFp8Tensor {
            rows: t.rows(),
            cols: t.cols(),
            codes: dev.upload(t.codes())?,
            scale: t.scale(),
        })
    }

    /// Quantizes the row-major f32 matrix `x` (`[rows, cols]`) with the given scale:
    /// `q = e4m3(x / scale)`, as [`fp8_quantize`]. The bytes equal
    /// [`Fp8Tensor::quantize_with_scale`]'s; unlike the CPU, non-finite values are
    /// encoded (±448 / NaN) rather than rejected.
    pub fn quantize_with_scale(
        dev: &CudaDevice,
        rows: usize,
        cols: usize,
        x: &DeviceSlice<f32>,
        scale: f32,
    ) -> Result<Self> {
        check_len("FP8 quantize input", checked_elements(rows, cols)?, x.len())?;
        Ok(CudaFp8Tensor {
            rows,
            cols,
            codes: fp8_quantize(dev, x, scale)?,
            scale,
        })
    }

    /// Quantizes like [`Fp8Tensor::quantize`]: the scale is
    /// [`scale_for`]`(amax(x))` (`amax / 448`, 1.0 for an all-zero tensor), with the
    /// abs-max reduced on the GPU. Byte-identical to the CPU, errors included.
    pub fn quantize(
        dev: &CudaDevice,
        rows: usize,
        cols: usize,
        x: &DeviceSlice<f32>,
    ) -> Result<Self> {
        check_len("FP8 quantize input", checked_elements(rows, cols)?, x.len())?;
        let amax = absmax(dev, x)?;
        if !amax.is_finite() {
            // Rare error path: find the first offending element exactly as the CPU does.
            check_finite("FP8 input", &dev.download(x)?)?;
        }
        Self::quantize_with_scale(dev, rows, cols, x, scale_for(amax))
    }

    /// Copies the tensor back to the host (synchronising the stream).
    pub fn download(&self, dev: &CudaDevice) -> Result<Fp8Tensor> {
        Fp8Tensor::from_parts(self.rows, self.cols, dev.download(&self.codes)?, self.scale)
    }

    /// Dequantizes to row-major f32, as [`fp8_dequantize`].
    pub fn dequantize(&self, dev: &CudaDevice) -> Result<DeviceSlice<f32>> {
        fp8_dequantize(dev, &self.codes, self.scale)
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The E4M3 bytes, row-major.
    pub fn codes(&self) -> &DeviceSlice<u8> {
        &self.codes
    }

    /// The per-tensor dequantization scale.
    pub fn scale(&self) -> f32 {
        self.scale
    }
}

/// `rows · cols`, or a shape error on overflow.
fn checked_elements(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .ok_or_else(|| QuantError::ShapeMismatch {
            op: "fp8_quantize",
            detail: format!("{rows} × {cols} overflows usize"),
        })
}

/// Launches one of the `(const In*, Out*, float scale, u64 n)` element-wise kernels.
fn launch_elementwise<In: DeviceElem, Out: DeviceElem>(
    dev: &CudaDevice,
    function: &str,
    input: &DeviceSlice<In>,
    output: &mut DeviceSlice<Out>,
    scale: f32,
) -> Result<()> {
    let n = input.len();
    check_len("element-wise kernel output", n, output.len())?;
    let n_u64 = n as u64;
    let func = dev.function(&sources::FP8_QUANTIZE, function)?;
    let cfg = LaunchConfig {
        grid_dim: (blocks_for(n, ELEMENTWISE_THREADS, MAX_BLOCKS), 1, 1),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch.arg(input).arg(output).arg(&scale).arg(&n_u64);
    // SAFETY: every caller passes a function of signature (const In*, Out*, float, u64)
    // whose element types match In and Out (f32/u16 → u8, u8 → f32); input and output
    // both hold n elements (checked above) and the grid-stride loop touches i < n only.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// Quantizes f32 values to E4M3 bytes, `q = e4m3(x / scale)` with round-to-nearest-even
/// and saturation to ±448 (NaN → 0x7F), byte-identical to
/// [`Fp8Tensor::quantize_with_scale`] and [`crate::fp8::kv::quantize_kv`] (which encode
/// the f32 quotient the same way). Non-finite inputs are encoded, not rejected (the
/// KV-cache semantics: ±Inf saturates, NaN stays NaN). `scale` is the dequantization scale (ModelOpt's `weight_scale`,
/// `k_scale`, `v_scale`) and must be finite and positive.
pub fn fp8_quantize(dev: &CudaDevice, x: &DeviceSlice<f32>, scale: f32) -> Result<DeviceSlice<u8>> {
    check_nonempty("fp8_quantize", &[("input length", x.len())])?;
    check_positive_scale("FP8 scale", scale)?;
    let mut q = dev.zeros::<u8>(x.len())?;
    launch_elementwise(dev, "eq_fp8_quantize_f32", x, &mut q, scale)?;
    Ok(q)
}

/// [`fp8_quantize`] for bf16 input given as raw bits (e.g. a bf16 K/V row for the FP8 KV
/// cache): each value is widened to f32 exactly and divided in f32, so the bytes equal
/// [`crate::fp8::kv::quantize_kv`] of the widened values. (This is not
/// [`Fp8Tensor::quantize_bf16_with_scale`], which rounds the quotient to bf16 first, as
/// PyTorch's bf16 division does for weights.)
pub fn fp8_quantize_bf16(
    dev: &CudaDevice,
    x: &DeviceSlice<u16>,
    scale: f32,
) -> Result<DeviceSlice<u8>> {
    check_nonempty("fp8_quantize_bf16", &[("input length", x.len())])?;
    check_positive_scale("FP8 scale", scale)?;
    let mut q = dev.zeros::<u8>(x.len())?;
    launch_elementwise(dev, "eq_fp8_quantize_bf16", x, &mut q, scale)?;
    Ok(q)
}

/// Dequantizes E4M3 bytes, `x = f32(e4m3(q)) · scale`, bit-identical to
/// [`Fp8Tensor::dequantize`] (one f32 multiplication per element).
pub fn fp8_dequantize(
    dev: &CudaDevice,
    q: &DeviceSlice<u8>,
    scale: f32,
) -> Result<DeviceSlice<f32>> {
    check_nonempty("fp8_dequantize", &[("input length", q.len())])?;
    let mut out = dev.zeros::<f32>(q.len())?;
    launch_elementwise(dev, "eq_fp8_dequantize_f32", q, &mut out, scale)?;
    Ok(out)
}

/// The largest |x| (synchronises the stream to read it back). NaN anywhere gives NaN.
/// Used to derive scales on the GPU: FP8 `amax / 448`, NVFP4 `amax / (6·448)`.
pub fn absmax(dev: &CudaDevice, x: &DeviceSlice<f32>) -> Result<f32> {
    check_nonempty("absmax", &[("input length", x.len())])?;
    let n = x.len();
    let n_u64 = n as u64;
    let mut bits = dev.zeros::<u32>(1)?;
    let func = dev.function(&sources::FP8_QUANTIZE, "eq_absmax_f32")?;
    let cfg = LaunchConfig {
        grid_dim: (blocks_for(n, ELEMENTWISE_THREADS, MAX_BLOCKS), 1, 1),
        block_dim: (ELEMENTWISE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = dev.launch_builder(&func);
    launch.arg(x).arg(&mut bits).arg(&n_u64);
    // SAFETY: matches `eq_absmax_f32(const float*, u32*, u64)`; x holds n floats, bits
    // one u32 (zeroed: the identity of the max), and the kernel reads i < n only. The
    // block size is a multiple of 32, as its full-warp shuffle needs.
    unsafe { launch.launch(cfg) }?;
    Ok(f32::from_bits(dev.download(&bits)?[0]))
}
