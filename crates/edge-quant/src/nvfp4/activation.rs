//! Run-time NVFP4 quantization of activations, as W4A4 kernels on Blackwell do it.
//!
//! ModelOpt calibrates one per-tensor `input_scale = amax(x)/(6·448)` (a dequantization
//! multiplier). A kernel receives its reciprocal `gs = 1/input_scale` and, for each
//! 16-element block of an activation row:
//!
//! - `SF = e4m3_satfinite(gs · amax16(x) / 6)` (the block scale, one E4M3 byte);
//! - `q = E2M1_RNE(x · gs / SF)`, with every code 0 when `SF == 0`;
//! - dequantization is `x̂ = E2M1[q] · SF · input_scale`.
//!
//! Real kernels compute the reciprocals with `rcp.approx`, so at exact ties a code can
//! differ by one step from this exact-division emulation; the layout (even element in
//! the low nibble, row-major scales) is a ModelOpt checkpoint's.

use super::{BLOCK, Nvfp4Tensor, check_cols};
use crate::error::{QuantError, Result, check_finite, check_len};
use crate::formats::e4m3;

/// Checks that `input_scale` is usable: finite, positive, with a finite reciprocal.
pub(crate) fn check_input_scale(input_scale: f32) -> Result<()> {
    if input_scale.is_finite() && input_scale > 0.0 && (1.0 / input_scale).is_finite() {
        Ok(())
    } else {
        Err(QuantError::InvalidScale {
            what: "NVFP4 activation input_scale",
            value: input_scale,
        })
    }
}

/// Quantizes one activation row `x` (length a multiple of 16, all finite) to NVFP4 with
/// the layer's `input_scale`, writing packed codes (`x.len()/2` bytes, even element in
/// the low nibble) and E4M3 block-scale bytes (`x.len()/16`).
///
/// Errors: [`QuantError::NotMultiple`] for a bad length, [`QuantError::LengthMismatch`]
/// for wrongly sized outputs, [`QuantError::InvalidScale`] for a bad `input_scale`,
/// [`QuantError::NonFinite`] for NaN or infinite inputs.
pub fn quantize_activation_row(
    x: &[f32],
    input_scale: f32,
    codes: &mut [u8],
    scales: &mut [u8],
) -> Result<()> {
    check_cols(x.len())?;
    check_len("NVFP4 activation codes (bytes)", x.len() / 2, codes.len())?;
    check_len(
        "NVFP4 activation block scales",
        x.len() / BLOCK,
        scales.len(),
    )?;
    check_input_scale(input_scale)?;
    check_finite("activation row", x)?;
    let gs = 1.0 / input_scale;
    let blocks = x.chunks_exact(BLOCK).zip(codes.chunks_exact_mut(BLOCK / 2));
    for ((block, packed), scale) in blocks.zip(scales.iter_mut()) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        *scale = e4m3::encode(gs * amax / 6.0);
        let sf = e4m3::decode(*scale);
        if sf == 0.0 {
            packed.fill(0);
            continue;
        }
        for (byte, pair) in packed.iter_mut().zip(block.chunks_exact(2)) {
            let lo = encode_e2m1(pair[0] * gs / sf);
            let hi = encode_e2m1(pair[1] * gs / sf);
            *byte = lo | (hi << 4);
        }
    }
    Ok(())
}

/// Quantizes a `[rows, cols]` activation matrix row by row with
/// [`quantize_activation_row`]. The result's global scale is `input_scale`, so
/// [`Nvfp4Tensor::dequantize`] gives the activations a W4A4 GEMM effectively sees.
pub fn quantize_activations(
    rows: usize,
    cols: usize,
    x: &[f32],
    input_scale: f32,
) -> Result<Nvfp4Tensor> {
    check_cols(cols)?;
    let n = rows.checked_mul(cols).ok_or(QuantError::LengthMismatch {
        what: "activation matrix",
        expected: usize::MAX,
        got: x.len(),
    })?;
    check_len("activation matrix", n, x.len())?;
    let mut codes = vec![0u8; n / 2];
    let mut scales = vec![0u8; n / BLOCK];
    if cols > 0 {
        let row_codes = codes.chunks_exact_mut(cols / 2);
        let row_scales = scales.chunks_exact_mut(cols / BLOCK);
        for ((xr, c), s) in x.chunks_exact(cols).zip(row_codes).zip(row_scales) {
            quantize_activation_row(xr, input_scale, c, s)?;
        }
    } else {
        check_input_scale(input_scale)?;
    }
    Nvfp4Tensor::from_parts(rows, cols, codes, scales, input_scale)
}

/// E2M1 round-to-nearest-even with saturation, branch-free so the per-element loop
/// vectorizes. Same results as [`crate::formats::e2m1::encode`] for every non-NaN input:
/// the magnitude code counts the RNE thresholds `a` has passed (ties at 0.25, 1.25, 2.5
/// and 5 round down, ties at 0.75, 1.75 and 3.5 round up).
#[inline]
pub(crate) fn encode_e2m1(x: f32) -> u8 {
    let a = x.abs();
    let mag = u8::from(a > 0.25)
        + u8::from(a >= 0.75)
        + u8::from(a > 1.25)
        + u8::from(a >= 1.75)
        + u8::from(a > 2.5)
        + u8::from(a >= 3.5)
        + u8::from(a > 5.0);
    (u8::from(x < 0.0) << 3) | mag
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::e2m1;

    #[test]
    fn branch_free_encode_matches_e2m1() {
        let mut cases = vec![0.0f32, -0.0, 1e-30, 7.0, 1e30, f32::INFINITY];
        for t in [0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] {
            cases.extend([t, t.next_up(), t.next_down()]);
        }
        cases.extend((0..2000).map(|i| i as f32 * 0.00371));
        for x in cases {
            assert_eq!(encode_e2m1(x), e2m1::encode(x), "{x}");
            assert_eq!(encode_e2m1(-x), e2m1::encode(-x), "-{x}");
        }
    }

    #[test]
    fn zero_block_and_saturation() {
        let mut x = vec![0.0f32; 32];
        x[16] = 1.0;
        x[17] = -1e-9;
        let (mut c, mut s) = (vec![0xffu8; 16], vec![0u8; 2]);
        // input_scale = 1/(6·448): amax 1 maps to SF = 448.
        quantize_activation_row(&x, 1.0 / 2688.0, &mut c, &mut s).unwrap();
        assert_eq!(s, vec![0x00, 0x7e]);
        assert!(c[..8].iter().all(|&b| b == 0));
        assert_eq!(c[8], 0x87); // +6 in the low nibble, −0 in the high one
    }

    #[test]
    fn bad_inputs_are_errors() {
        let x = vec![1.0f32; 16];
        let (mut c, mut s) = (vec![0u8; 8], vec![0u8; 1]);
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY, 1e-45] {
            let e = quantize_activation_row(&x, bad, &mut c, &mut s);
            assert!(matches!(e, Err(QuantError::InvalidScale { .. })), "{bad}");
        }
        let e = quantize_activation_row(&x[..15], 1.0, &mut c[..7], &mut s);
        assert!(matches!(e, Err(QuantError::NotMultiple { .. })));
        let e = quantize_activation_row(&x, 1.0, &mut c[..7], &mut s);
        assert!(matches!(e, Err(QuantError::LengthMismatch { .. })));
        let mut y = x.clone();
        y[3] = f32::NAN;
        let e = quantize_activation_row(&y, 1.0, &mut c, &mut s);
        assert!(matches!(e, Err(QuantError::NonFinite { index: 3, .. })));
        assert!(matches!(
            quantize_activations(2, 16, &x, 1.0),
            Err(crate::QuantError::LengthMismatch { .. })
        ));
        let t = quantize_activations(1, 16, &x, 0.5).unwrap();
        assert_eq!(t.global_scale(), 0.5);
    }
}
