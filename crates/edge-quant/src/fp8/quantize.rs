//! Per-tensor FP8 weight quantization, bit-exact with NVIDIA ModelOpt 0.47
//! (`quant_algo: "FP8"`, `to_quantized_weight`):
//!
//! - `weight_scale = amax(W) / 448` in f32;
//! - `q = e4m3(w / weight_scale)`, round-to-nearest-even, saturating at ±448.
//!
//! **BF16 weights round twice.** PyTorch divides a BF16 tensor by a 0-dim f32 tensor in
//! BF16 (the 0-dim operand does not promote), so ModelOpt's export computes
//! `e4m3(bf16(w / weight_scale))`, not `e4m3(w / weight_scale)`. On the tiny-Llama
//! export 1–7 % of the codes of each linear differ between the two.
//! [`Fp8Tensor::quantize_bf16`] follows the export; [`Fp8Tensor::quantize`] is the path
//! for f32 weights.
//!
//! **All-zero tensors.** ModelOpt writes `weight_scale = 0` and `0/0 = NaN` codes (0xFF),
//! a tensor that dequantizes to NaN. Here an amax of zero (or one whose quotient
//! underflows to zero) gives [`ZERO_AMAX_SCALE`] = 1.0 (ModelOpt's
//! `_sanitize_export_amax` substitutes the format maximum 448 for a zero amax, and
//! 448/448 = 1) and all-zero codes: the tensor dequantizes to exact zeros.

use super::Fp8Tensor;
use crate::error::{QuantError, Result, check_finite, check_len};
use crate::formats::e4m3;
use half::bf16;

/// The scale used for a tensor whose amax is zero: 1.0.
pub const ZERO_AMAX_SCALE: f32 = 1.0;

/// ModelOpt's per-tensor FP8 scale for absolute maximum `amax`: `amax / 448` in f32.
///
/// Zero, negative or NaN amax, or a quotient that underflows to zero, gives
/// [`ZERO_AMAX_SCALE`]; an infinite amax gives infinity, which the quantizers reject.
pub fn scale_for(amax: f32) -> f32 {
    let s = amax / e4m3::MAX;
    if s > 0.0 { s } else { ZERO_AMAX_SCALE }
}

/// Checks the shape against the data length.
fn check_shape(rows: usize, cols: usize, len: usize) -> Result<usize> {
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| QuantError::ShapeMismatch {
            op: "FP8 quantize",
            detail: format!("{rows} × {cols} elements overflow usize"),
        })?;
    check_len("FP8 input", n, len)?;
    Ok(n)
}

/// Rejects a scale that is not finite and positive.
fn check_scale(scale: f32) -> Result<()> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(QuantError::InvalidScale {
            what: "FP8 weight_scale",
            value: scale,
        })
    }
}

impl Fp8Tensor {
    /// Quantizes a row-major `[rows, cols]` f32 matrix with ModelOpt's per-tensor scale
    /// ([`scale_for`]`(amax)`).
    ///
    /// Errors: [`QuantError::LengthMismatch`] if `data.len() != rows · cols`,
    /// [`QuantError::NonFinite`] for NaN or ±Inf in `data`.
    pub fn quantize(rows: usize, cols: usize, data: &[f32]) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        check_finite("FP8 input", data)?;
        let amax = data.iter().fold(0.0f32, |m, &x| m.max(x.abs()));
        Self::quantize_with_scale(rows, cols, data, scale_for(amax))
    }

    /// Quantizes with a given scale, `q = e4m3(w / scale)`: e.g. the maximum over a fused
    /// group, which vLLM requantizes q/k/v to (ModelOpt keeps FP8 weight scales per
    /// tensor). Values beyond `448 · scale` saturate.
    ///
    /// Errors: as [`Fp8Tensor::quantize`], plus [`QuantError::InvalidScale`] if `scale`
    /// is not finite and > 0.
    pub fn quantize_with_scale(rows: usize, cols: usize, data: &[f32], scale: f32) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        check_finite("FP8 input", data)?;
        check_scale(scale)?;
        let codes: Vec<u8> = data.iter().map(|&w| e4m3::encode(w / scale)).collect();
        Fp8Tensor::from_parts(rows, cols, codes, scale)
    }

    /// Quantizes a BF16 matrix exactly as ModelOpt exports it from BF16 weights: the
    /// quotient is rounded to BF16 before the E4M3 cast (see the module docs).
    ///
    /// Errors: as [`Fp8Tensor::quantize`].
    pub fn quantize_bf16(rows: usize, cols: usize, data: &[bf16]) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        let wide: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
        check_finite("FP8 input", &wide)?;
        let amax = wide.iter().fold(0.0f32, |m, &x| m.max(x.abs()));
        Self::quantize_bf16_with_scale_f32(rows, cols, &wide, scale_for(amax))
    }

    /// [`Fp8Tensor::quantize_with_scale`] for BF16 weights, with ModelOpt's BF16
    /// rounding of the quotient.
    ///
    /// Errors: as [`Fp8Tensor::quantize_with_scale`].
    pub fn quantize_bf16_with_scale(
        rows: usize,
        cols: usize,
        data: &[bf16],
        scale: f32,
    ) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        let wide: Vec<f32> = data.iter().map(|v| v.to_f32()).collect();
        check_finite("FP8 input", &wide)?;
        Self::quantize_bf16_with_scale_f32(rows, cols, &wide, scale)
    }

    /// The BF16 path on already widened, checked values.
    fn quantize_bf16_with_scale_f32(
        rows: usize,
        cols: usize,
        wide: &[f32],
        scale: f32,
    ) -> Result<Self> {
        check_scale(scale)?;
        let codes: Vec<u8> = wide
            .iter()
            .map(|&w| e4m3::encode(bf16::from_f32(w / scale).to_f32()))
            .collect();
        Fp8Tensor::from_parts(rows, cols, codes, scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_zero_is_exact_zero() {
        let t = Fp8Tensor::quantize(2, 3, &[0.0; 6]).unwrap();
        assert_eq!(t.scale(), ZERO_AMAX_SCALE);
        assert!(t.codes().iter().all(|&c| c == 0));
        let t = Fp8Tensor::quantize_bf16(1, 2, &[bf16::ZERO, bf16::NEG_ZERO]).unwrap();
        assert_eq!(t.codes(), &[0x00, 0x80]);
    }

    #[test]
    fn amax_maps_to_448() {
        let t = Fp8Tensor::quantize(1, 3, &[-2.0, 1.0, 0.5]).unwrap();
        assert_eq!(t.scale(), 2.0 / 448.0);
        assert_eq!(t.codes()[0], 0xfe);
        assert_eq!(t.dequantize()[0], -2.0);
    }

    #[test]
    fn bf16_rounds_the_quotient() {
        // 1 / scale ≈ 1.0626 lies just above the E4M3 tie 1.0625 (between 1.0 and
        // 1.125), so the f32 path rounds up; BF16 first rounds the quotient to exactly
        // 1.0625, which E4M3 then ties to even (1.0).
        let scale = 1.0 / 1.0626f32;
        let f = Fp8Tensor::quantize_with_scale(1, 1, &[1.0], scale).unwrap();
        let b = Fp8Tensor::quantize_bf16_with_scale(1, 1, &[bf16::ONE], scale).unwrap();
        assert_eq!(f.codes(), &[0x39]);
        assert_eq!(b.codes(), &[0x38]);
    }
}
