//! NVFP4 tensors: E2M1 codes packed two per byte, one E4M3 scale per 16 consecutive
//! elements of a row, and one f32 global scale (ModelOpt's `weight_scale_2`).
//!
//! Dequantization: `w = E2M1[q] · f32(e4m3(scale)) · global_scale`.

pub mod activation;
pub mod quantize;
pub mod swizzle;

use crate::error::{QuantError, Result, check_len};
use crate::formats::{e2m1, e4m3};
use edge_core::Bytes;

/// Elements per block scale.
pub const BLOCK: usize = 16;

/// A row-major `[rows, cols]` NVFP4 matrix (weights are `[out, in]`).
///
/// Storage matches a ModelOpt checkpoint exactly: `codes` is `weight` (`U8`,
/// `[rows, cols/2]`, even element in the low nibble), `scales` is `weight_scale`
/// (`F8_E4M3`, `[rows, cols/16]`, row-major, not swizzled), `global_scale` is
/// `weight_scale_2`. The byte storage may be borrowed from a memory-mapped file.
#[derive(Clone, Debug, PartialEq)]
pub struct Nvfp4Tensor {
    rows: usize,
    cols: usize,
    codes: Bytes,
    scales: Bytes,
    global_scale: f32,
}

impl Nvfp4Tensor {
    /// Assembles a tensor from checkpoint parts, checking every length.
    pub fn from_parts(
        rows: usize,
        cols: usize,
        codes: impl Into<Bytes>,
        scales: impl Into<Bytes>,
        global_scale: f32,
    ) -> Result<Self> {
        check_cols(cols)?;
        let (codes, scales) = (codes.into(), scales.into());
        check_len("NVFP4 codes (bytes)", rows * cols / 2, codes.len())?;
        check_len("NVFP4 block scales", rows * cols / BLOCK, scales.len())?;
        if !global_scale.is_finite() || global_scale < 0.0 {
            return Err(QuantError::InvalidScale {
                what: "NVFP4 global scale (weight_scale_2)",
                value: global_scale,
            });
        }
        Ok(Nvfp4Tensor {
            rows,
            cols,
            codes,
            scales,
            global_scale,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns (elements per row).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Packed codes, `[rows, cols/2]`.
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }

    /// E4M3 block-scale bytes, `[rows, cols/16]`.
    pub fn scales(&self) -> &[u8] {
        &self.scales
    }

    /// The f32 global scale (`weight_scale_2`).
    pub fn global_scale(&self) -> f32 {
        self.global_scale
    }

    /// Bytes of storage read by one pass over the tensor (codes + scales).
    pub fn storage_bytes(&self) -> usize {
        self.codes.len() + self.scales.len()
    }

    /// Dequantizes row `r` into `out` (`cols` values).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let codes = &self.codes[r * self.cols / 2..(r + 1) * self.cols / 2];
        let scales = &self.scales[r * self.cols / BLOCK..(r + 1) * self.cols / BLOCK];
        for (b, (&s, out)) in scales.iter().zip(out.chunks_exact_mut(BLOCK)).enumerate() {
            let scale = e4m3::decode(s) * self.global_scale;
            for (i, o) in out.iter_mut().enumerate() {
                let byte = codes[(b * BLOCK + i) / 2];
                *o = e2m1::decode(byte >> ((i % 2) * 4)) * scale;
            }
        }
    }

    /// Dequantizes the whole tensor to row-major f32.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.rows * self.cols];
        for (r, row) in out.chunks_exact_mut(self.cols.max(1)).enumerate() {
            self.dequantize_row(r, row);
        }
        out
    }
}

/// NVFP4 needs whole 16-element blocks along a row.
pub(crate) fn check_cols(cols: usize) -> Result<()> {
    if cols.is_multiple_of(BLOCK) {
        Ok(())
    } else {
        Err(QuantError::NotMultiple {
            what: "NVFP4 column count",
            multiple: BLOCK,
            got: cols,
        })
    }
}
