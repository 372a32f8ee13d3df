//! NVFP4 weight quantization, bit-exact with NVIDIA ModelOpt 0.47
//! (`NVFP4QTensor.get_weights_scaling_factor{,_2}` and `NVFP4QTensor.quantize`, the path
//! `export_hf_checkpoint` takes for `quant_algo: "NVFP4"`).
//!
//! Every step is the same f32 operation, in the same order, as ModelOpt's PyTorch code:
//!
//! 1. `weight_scale_2 = amax(W) / 2688` (2688 = 6 · 448, E2M1 max × E4M3 max);
//! 2. per 16-element block: `s = amax_block / (6 · weight_scale_2)` (the product rounded
//!    to f32 first); `s == 0` becomes 1.0; `s` is clamped to `[2^−9, 448]` and rounded to
//!    E4M3 (round-to-nearest-even), giving the `weight_scale` byte;
//! 3. `q = E2M1_RNE(w / (f32(weight_scale) · weight_scale_2))`: the product is rounded to
//!    f32 and then divides `w`. On the tiny-Llama export, dividing by the two factors in
//!    turn changes 1 byte and multiplying by the reciprocal 7 bytes.
//!
//! BF16 weights give the same bytes as their exact f32 conversion: ModelOpt's amax is
//! exact in BF16 and PyTorch promotes the division to f32. [`Nvfp4Tensor::quantize_bf16`]
//! exists for convenience and to state that fact.
//!
//! **All-zero tensors.** ModelOpt computes `weight_scale_2 = 0`, then `0/0 = NaN` block
//! scales (byte 0xFF on x86) and NaN quotients that `_cast_fp4` turns into code 7 (+6):
//! a checkpoint that dequantizes to NaN. Here an amax of zero (or one whose quotient
//! underflows to zero) is replaced by the E2M1 maximum 6, as ModelOpt's
//! `_sanitize_export_amax` does for the scales it sanitizes, so
//! `weight_scale_2 = `[`ZERO_AMAX_GLOBAL_SCALE`] (= 1/448), every block scale is 1.0
//! (0x38) and every code is 0: the tensor dequantizes to exact zeros.

use super::{BLOCK, Nvfp4Tensor, check_cols};
use crate::error::{QuantError, Result, check_finite, check_len};
use crate::formats::{e2m1, e4m3};
use half::bf16;
use rayon::prelude::*;

/// ModelOpt's global-scale divisor: E2M1 max (6) × E4M3 max (448).
pub const GLOBAL_SCALE_DIVISOR: f32 = e2m1::MAX * e4m3::MAX;

/// The global scale used when a tensor's amax is zero (or so small that `amax / 2688`
/// underflows to zero): the amax is taken to be 6, the E2M1 maximum, giving 6 / 2688.
pub const ZERO_AMAX_GLOBAL_SCALE: f32 = e2m1::MAX / GLOBAL_SCALE_DIVISOR;

/// The 0.47 lower clamp of a block scale before its E4M3 cast: 2^−9, the smallest
/// E4M3 subnormal.
pub const MIN_BLOCK_SCALE: f32 = 1.0 / 512.0;

/// Rows handed to one rayon task: small tensors stay on one thread.
const ROWS_PER_TASK: usize = 64;

/// ModelOpt's `weight_scale_2` for a tensor (or fused group) whose absolute maximum is
/// `amax`: `amax / 2688` in f32.
///
/// An amax of zero, a negative or NaN amax, or one whose quotient underflows to zero
/// gives [`ZERO_AMAX_GLOBAL_SCALE`] instead (see the module docs: ModelOpt itself would
/// write a NaN checkpoint). An infinite amax gives infinity, which the quantizers reject.
pub fn global_scale_for(amax: f32) -> f32 {
    let g = amax / GLOBAL_SCALE_DIVISOR;
    if g > 0.0 { g } else { ZERO_AMAX_GLOBAL_SCALE }
}

/// The one `weight_scale_2` that ModelOpt gives every member of a fused projection group
/// (q/k/v, gate/up, and the same per expert): `preprocess_linear_fusion` sets each
/// member's amax to the group maximum, so the scale is `max_i amax(member_i) / 2688`.
///
/// NaN elements are ignored here (quantizing such data fails anyway); an empty group or
/// all-zero members give [`ZERO_AMAX_GLOBAL_SCALE`].
pub fn fused_global_scale(members: &[&[f32]]) -> f32 {
    let amax = members.iter().map(|m| amax(m)).fold(0.0f32, f32::max);
    global_scale_for(amax)
}

/// Largest absolute value (0 for an empty slice).
fn amax(data: &[f32]) -> f32 {
    data.iter().fold(0.0f32, |m, &x| m.max(x.abs()))
}

/// The E4M3 `weight_scale` byte of one block (step 2 of the module docs).
/// `six_g` is `6 · weight_scale_2` rounded to f32, positive.
fn block_scale_code(block_amax: f32, six_g: f32) -> u8 {
    let mut s = block_amax / six_g;
    if s == 0.0 {
        s = 1.0;
    }
    e4m3::encode(s.clamp(MIN_BLOCK_SCALE, e4m3::MAX))
}

/// Quantizes one row: fills `codes` (`cols/2` bytes) and `scales` (`cols/16` bytes).
fn quantize_row(row: &[f32], global_scale: f32, codes: &mut [u8], scales: &mut [u8]) {
    let six_g = e2m1::MAX * global_scale;
    let blocks = row.chunks_exact(BLOCK);
    let code_blocks = codes.chunks_exact_mut(BLOCK / 2);
    for ((block, out), scale_byte) in blocks.zip(code_blocks).zip(scales.iter_mut()) {
        let code = block_scale_code(amax(block), six_g);
        *scale_byte = code;
        let scale = e4m3::decode(code) * global_scale;
        for (pair, byte) in block.chunks_exact(2).zip(out.iter_mut()) {
            // Even element in the low nibble, as `e2m1::pack` and ModelOpt store it.
            *byte = e2m1::encode(pair[0] / scale) | (e2m1::encode(pair[1] / scale) << 4);
        }
    }
}

/// Checks the shape against the data length and returns the element count.
fn check_shape(rows: usize, cols: usize, len: usize) -> Result<usize> {
    check_cols(cols)?;
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| QuantError::ShapeMismatch {
            op: "NVFP4 quantize",
            detail: format!("{rows} × {cols} elements overflow usize"),
        })?;
    check_len("NVFP4 input", n, len)?;
    Ok(n)
}

impl Nvfp4Tensor {
    /// Quantizes a row-major `[rows, cols]` f32 matrix exactly as ModelOpt 0.47 exports
    /// an NVFP4 weight, with `weight_scale_2` taken from the data
    /// ([`global_scale_for`]`(amax)`).
    ///
    /// For a member of a fused group (q/k/v, gate/up), use
    /// [`Nvfp4Tensor::quantize_with_global_scale`] with [`fused_global_scale`].
    ///
    /// Errors: [`QuantError::NotMultiple`] if `cols % 16 != 0`,
    /// [`QuantError::LengthMismatch`] if `data.len() != rows · cols`,
    /// [`QuantError::NonFinite`] for NaN or ±Inf in `data`.
    pub fn quantize(rows: usize, cols: usize, data: &[f32]) -> Result<Self> {
        let n = check_shape(rows, cols, data.len())?;
        check_finite("NVFP4 input", data)?;
        Ok(quantize_unchecked(
            rows,
            cols,
            n,
            data,
            global_scale_for(amax(data)),
        ))
    }

    /// Quantizes with a given `weight_scale_2` (e.g. a fused group's shared scale).
    ///
    /// A scale smaller than the data's own `amax / 2688` saturates blocks at
    /// `weight_scale = 448` and codes at ±6, as ModelOpt does.
    ///
    /// Errors: as [`Nvfp4Tensor::quantize`], plus [`QuantError::InvalidScale`] if
    /// `global_scale` is not finite and > 0.
    pub fn quantize_with_global_scale(
        rows: usize,
        cols: usize,
        data: &[f32],
        global_scale: f32,
    ) -> Result<Self> {
        let n = check_shape(rows, cols, data.len())?;
        check_finite("NVFP4 input", data)?;
        if !(global_scale.is_finite() && global_scale > 0.0) {
            return Err(QuantError::InvalidScale {
                what: "NVFP4 global scale (weight_scale_2)",
                value: global_scale,
            });
        }
        Ok(quantize_unchecked(rows, cols, n, data, global_scale))
    }

    /// Quantizes a BF16 matrix. ModelOpt's math on BF16 weights is its math on their
    /// exact f32 values (the amax is exact, and the division is promoted to f32), so this
    /// gives the same bytes as converting first; it matches the real export byte for byte.
    ///
    /// Errors: as [`Nvfp4Tensor::quantize`].
    pub fn quantize_bf16(rows: usize, cols: usize, data: &[bf16]) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        Self::quantize(rows, cols, &to_f32(data))
    }

    /// [`Nvfp4Tensor::quantize_with_global_scale`] for BF16 input.
    ///
    /// Errors: as [`Nvfp4Tensor::quantize_with_global_scale`].
    pub fn quantize_bf16_with_global_scale(
        rows: usize,
        cols: usize,
        data: &[bf16],
        global_scale: f32,
    ) -> Result<Self> {
        check_shape(rows, cols, data.len())?;
        Self::quantize_with_global_scale(rows, cols, &to_f32(data), global_scale)
    }
}

/// Quantizes data whose shape, values and global scale (finite, > 0) are checked.
fn quantize_unchecked(
    rows: usize,
    cols: usize,
    n: usize,
    data: &[f32],
    global_scale: f32,
) -> Nvfp4Tensor {
    let mut codes = vec![0u8; n / 2];
    let mut scales = vec![0u8; n / BLOCK];
    if n > 0 {
        data.par_chunks(cols)
            .zip(codes.par_chunks_mut(cols / 2))
            .zip(scales.par_chunks_mut(cols / BLOCK))
            .with_min_len(ROWS_PER_TASK)
            .for_each(|((row, c), s)| quantize_row(row, global_scale, c, s));
    }
    Nvfp4Tensor {
        rows,
        cols,
        codes: codes.into(),
        scales: scales.into(),
        global_scale,
    }
}

/// Exact widening of BF16 to f32.
fn to_f32(data: &[bf16]) -> Vec<f32> {
    data.iter().map(|v| v.to_f32()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_zero_tensor_dequantizes_to_zero() {
        let t = Nvfp4Tensor::quantize(2, 32, &[0.0; 64]).unwrap();
        assert_eq!(t.global_scale(), ZERO_AMAX_GLOBAL_SCALE);
        assert!(t.scales().iter().all(|&s| s == 0x38));
        assert!(t.codes().iter().all(|&c| c == 0));
        assert!(t.dequantize().iter().all(|&v| v == 0.0));
    }

    #[test]
    fn zero_block_gets_unit_scale() {
        let mut data = vec![0.0f32; 32];
        data[20] = 3.0;
        let t = Nvfp4Tensor::quantize(1, 32, &data).unwrap();
        assert_eq!(t.scales(), &[0x38, 0x7e]);
    }

    #[test]
    fn global_scale_rules() {
        assert_eq!(global_scale_for(2688.0), 1.0);
        assert_eq!(global_scale_for(0.0), ZERO_AMAX_GLOBAL_SCALE);
        assert_eq!(global_scale_for(f32::NAN), ZERO_AMAX_GLOBAL_SCALE);
        assert_eq!(global_scale_for(f32::from_bits(1)), ZERO_AMAX_GLOBAL_SCALE);
        let (a, b) = ([1.0f32, -5.0], [2.0f32, 0.5]);
        assert_eq!(fused_global_scale(&[&a, &b]), 5.0 / 2688.0);
        assert_eq!(fused_global_scale(&[]), ZERO_AMAX_GLOBAL_SCALE);
    }

    #[test]
    fn empty_shapes() {
        let t = Nvfp4Tensor::quantize(0, 32, &[]).unwrap();
        assert_eq!((t.rows(), t.codes().len()), (0, 0));
        let t = Nvfp4Tensor::quantize(3, 0, &[]).unwrap();
        assert_eq!((t.rows(), t.scales().len()), (3, 0));
    }
}
