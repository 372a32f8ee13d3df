//! The 128×4 swizzled block-scale layout that Blackwell NVFP4 GEMMs read (CUTLASS
//! sm_100/sm_120, vLLM, SGLang, FlashInfer-cutlass, TensorRT-LLM).
//!
//! Checkpoints store scales row-major `[rows, cols/16]`. Kernels want them padded to
//! 128 rows and 4 scale columns (zero padding), viewed as `(M/128, 4, 32, Kp/4, 4)` and
//! permuted to `(0, 3, 2, 1, 4)`: each 128×4 tile becomes one 512-byte atom in which
//! scale `(m, k)` sits at
//!
//! `(m/128)·(Kp/4)·512 + (k/4)·512 + (m%32)·16 + ((m%128)/32)·4 + (k%4)`.
//!
//! The same layout serves activation scales (rows = tokens).

use super::Nvfp4Tensor;
use crate::error::{QuantError, Result, check_len};

/// Rows per swizzle tile (scale rows are padded to a multiple of this).
pub const ROW_TILE: usize = 128;

/// Scale columns per swizzle tile (scale columns are padded to a multiple of this).
pub const COL_TILE: usize = 4;

/// Bytes in one 128×4 tile.
pub const ATOM_BYTES: usize = ROW_TILE * COL_TILE;

/// Byte offset of scale `(m, k)` in the swizzled buffer whose scale columns are padded to
/// `padded_scale_cols` (a multiple of 4). Requires `k < padded_scale_cols`.
#[inline]
pub fn swizzled_offset(m: usize, k: usize, padded_scale_cols: usize) -> usize {
    (m / ROW_TILE) * (padded_scale_cols / COL_TILE) * ATOM_BYTES
        + (k / COL_TILE) * ATOM_BYTES
        + (m % 32) * 16
        + ((m % ROW_TILE) / 32) * 4
        + (k % COL_TILE)
}

/// `(rows, scale_cols)` rounded up to whole tiles: the swizzled buffer is
/// `padded_rows · padded_cols` bytes. Fails if that size overflows `usize`.
pub fn padded_dims(rows: usize, scale_cols: usize) -> Result<(usize, usize)> {
    let overflow = || QuantError::ShapeMismatch {
        op: "NVFP4 scale swizzle",
        detail: format!("padding {rows} × {scale_cols} scales overflows usize"),
    };
    let pr = rows
        .checked_next_multiple_of(ROW_TILE)
        .ok_or_else(overflow)?;
    let pc = scale_cols
        .checked_next_multiple_of(COL_TILE)
        .ok_or_else(overflow)?;
    pr.checked_mul(pc).ok_or_else(overflow)?;
    Ok((pr, pc))
}

/// Converts row-major `[rows, scale_cols]` scale bytes to the swizzled layout, padding
/// with zero bytes. The result has `padded_rows · padded_cols` bytes ([`padded_dims`]).
///
/// Errors: [`QuantError::LengthMismatch`] if `scales.len() != rows · scale_cols`,
/// [`QuantError::ShapeMismatch`] if the padded size overflows.
pub fn swizzle_scales(rows: usize, scale_cols: usize, scales: &[u8]) -> Result<Vec<u8>> {
    let (pr, pc) = padded_dims(rows, scale_cols)?;
    check_len("NVFP4 row-major scales", rows * scale_cols, scales.len())?;
    let mut out = vec![0u8; pr * pc];
    if scale_cols == 0 {
        return Ok(out);
    }
    for (m, row) in scales.chunks_exact(scale_cols).enumerate() {
        for (k, &s) in row.iter().enumerate() {
            out[swizzled_offset(m, k, pc)] = s;
        }
    }
    Ok(out)
}

/// Inverse of [`swizzle_scales`]: extracts the row-major `[rows, scale_cols]` scales
/// from a swizzled buffer of `padded_rows · padded_cols` bytes (padding is ignored).
///
/// Errors: [`QuantError::LengthMismatch`] if `swizzled` has the wrong length,
/// [`QuantError::ShapeMismatch`] if the padded size overflows.
pub fn unswizzle_scales(rows: usize, scale_cols: usize, swizzled: &[u8]) -> Result<Vec<u8>> {
    let (pr, pc) = padded_dims(rows, scale_cols)?;
    check_len("NVFP4 swizzled scales", pr * pc, swizzled.len())?;
    let mut out = Vec::with_capacity(rows * scale_cols);
    for m in 0..rows {
        out.extend((0..scale_cols).map(|k| swizzled[swizzled_offset(m, k, pc)]));
    }
    Ok(out)
}

impl Nvfp4Tensor {
    /// This tensor's block scales in the swizzled kernel layout ([`swizzle_scales`]).
    pub fn swizzled_scales(&self) -> Result<Vec<u8>> {
        swizzle_scales(self.rows(), self.cols() / super::BLOCK, self.scales())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doc_examples() {
        assert_eq!(swizzled_offset(32, 0, 4), 4);
        assert_eq!(swizzled_offset(1, 0, 4), 16);
        assert_eq!(swizzled_offset(127, 3, 4), 511);
    }

    #[test]
    fn offsets_are_a_permutation() {
        let (pr, pc) = padded_dims(130, 5).unwrap();
        assert_eq!((pr, pc), (256, 8));
        let mut seen = vec![false; pr * pc];
        for m in 0..pr {
            for k in 0..pc {
                let o = swizzled_offset(m, k, pc);
                assert!(!seen[o], "offset {o} twice");
                seen[o] = true;
            }
        }
    }

    #[test]
    fn padding_is_zero_and_round_trips() {
        let scales: Vec<u8> = (1..=3 * 5).map(|v| v as u8).collect();
        let sw = swizzle_scales(3, 5, &scales).unwrap();
        assert_eq!(sw.len(), 128 * 8);
        assert_eq!(sw.iter().filter(|&&b| b != 0).count(), 15);
        assert_eq!(unswizzle_scales(3, 5, &sw).unwrap(), scales);
        assert!(matches!(
            swizzle_scales(3, 5, &scales[1..]),
            Err(crate::QuantError::LengthMismatch { .. })
        ));
        assert!(matches!(
            unswizzle_scales(3, 5, &sw[1..]),
            Err(crate::QuantError::LengthMismatch { .. })
        ));
    }
}
