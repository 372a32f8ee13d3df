//! FP8 E4M3 tensors with a per-tensor f32 scale (ModelOpt `quant_algo: "FP8"`).
//!
//! Dequantization: `w = e4m3(q) · scale`.

pub mod kv;
pub mod quantize;

use crate::error::{QuantError, Result, check_len};
use crate::formats::e4m3;
use edge_core::Bytes;

/// A row-major `[rows, cols]` E4M3 matrix with one f32 dequantization scale
/// (ModelOpt's `weight_scale`, = amax/448).
#[derive(Clone, Debug, PartialEq)]
pub struct Fp8Tensor {
    rows: usize,
    cols: usize,
    codes: Bytes,
    scale: f32,
}

impl Fp8Tensor {
    /// Assembles a tensor from checkpoint parts, checking the length and the scale.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        codes: impl Into<Bytes>,
        scale: f32,
    ) -> Result<Self> {
        let codes = codes.into();
        check_len("FP8 codes", rows * cols, codes.len())?;
        if !scale.is_finite() || scale < 0.0 {
            return Err(QuantError::InvalidScale {
                what: "FP8 weight_scale",
                value: scale,
            });
        }
        Ok(Fp8Tensor {
            rows,
            cols,
            codes,
            scale,
        })
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
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }

    /// The per-tensor dequantization scale.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// Dequantizes to row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        self.codes
            .iter()
            .map(|&b| e4m3::decode(b) * self.scale)
            .collect()
    }
}
