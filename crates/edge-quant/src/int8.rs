//! Dynamic int8 quantization of activations: the activation side of the W4A8 CPU mode
//! ([`crate::linear::ActivationQuant::Int8`]).
//!
//! Each [`BLOCK`]-element block of an activation row gets its own f32 scale, chosen at
//! run time from the block itself (no calibration):
//!
//! - `s = amax(|x|) / 127` (`s = 0` for an all-zero block);
//! - `q = clamp(round_ties_even(x · (127 / amax)), −127, 127)`;
//! - dequantization is `x̂ = q · s`.
//!
//! The error per element is at most half a step, `amax/254`, about 0.4% of the block's
//! largest value — an order of magnitude below the NVFP4 weight error the mode is used
//! with. Why it exists: an 8-bit activation lets the CPU multiply NVFP4 weights with
//! integer instructions (`vpmaddubsw`, `vpdpbusd`) that take 32–64 products per
//! instruction, where f32 activations need a widening and an FMA per 8 products; this is
//! what llama.cpp's Q4_K × Q8_K dot product does too.

use crate::error::{QuantError, Result, check_finite, check_len};

/// Elements per activation scale (the NVFP4 weight block size).
pub const BLOCK: usize = 16;

/// Largest quantized magnitude.
const QMAX: f32 = 127.0;

/// 1.5·2²³: f32 values this large have no fractional bits.
const ROUNDER: f32 = 12_582_912.0;

/// Quantizes one activation row (length a multiple of [`BLOCK`], all finite) into
/// `q` (same length) and one scale per block (`x.len() / BLOCK`).
///
/// Errors: [`QuantError::NotMultiple`] for a bad length, [`QuantError::LengthMismatch`]
/// for wrongly sized outputs, [`QuantError::NonFinite`] for NaN or infinite inputs.
pub fn quantize_row(x: &[f32], q: &mut [i8], scales: &mut [f32]) -> Result<()> {
    if !x.len().is_multiple_of(BLOCK) {
        return Err(QuantError::NotMultiple {
            what: "int8 activation row length",
            multiple: BLOCK,
            got: x.len(),
        });
    }
    check_len("int8 activation codes", x.len(), q.len())?;
    check_len("int8 activation scales", x.len() / BLOCK, scales.len())?;
    check_finite("activation row", x)?;
    let blocks = x.chunks_exact(BLOCK).zip(q.chunks_exact_mut(BLOCK));
    for ((block, codes), scale) in blocks.zip(scales.iter_mut()) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        if amax == 0.0 {
            codes.fill(0);
            *scale = 0.0;
            continue;
        }
        let inv = QMAX / amax;
        for (c, &v) in codes.iter_mut().zip(block) {
            // |v·inv| ≤ 127 (plus rounding): adding and removing 1.5·2²³ rounds to the
            // nearest integer, ties to even, in f32 — what `round_ties_even` does, but
            // without a libm call on CPUs lacking SSE4.1 `roundps` at the base target.
            // The clamp only matters if `amax · inv` rounds above 127.
            let rounded = (v * inv + ROUNDER) - ROUNDER;
            *c = rounded.clamp(-QMAX, QMAX) as i8;
        }
        *scale = amax / QMAX;
    }
    Ok(())
}

/// The activations a quantized row stands for: `x̂[k] = q[k] · scales[k / BLOCK]`
/// (`q.len()` values; `scales` as [`quantize_row`] wrote them).
pub fn dequantize_row(q: &[i8], scales: &[f32]) -> Vec<f32> {
    q.iter()
        .enumerate()
        .map(|(k, &c)| f32::from(c) * scales[k / BLOCK])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_block() {
        let mut x = [0.0f32; 16];
        // amax 254: a step of 2, ties go to the even code.
        x[..5].copy_from_slice(&[254.0, -127.0, 125.0, 1.5, 0.8]);
        let (mut q, mut s) = ([0i8; 16], [0.0f32; 1]);
        quantize_row(&x, &mut q, &mut s).unwrap();
        assert_eq!(&q[..6], &[127, -64, 62, 1, 0, 0]);
        assert_eq!(s[0], 2.0);
        // Each dequantized value is within half a step.
        for (a, b) in x.iter().zip(dequantize_row(&q, &s)) {
            assert!((a - b).abs() <= 0.5 * s[0] * 1.0001, "{a} vs {b}");
        }
    }

    #[test]
    fn rounding_matches_round_ties_even() {
        for i in -2600..=2600 {
            let y = i as f32 * 0.049;
            assert_eq!((y + ROUNDER) - ROUNDER, y.round_ties_even(), "{y}");
        }
        for y in [0.5f32, 1.5, 2.5, -0.5, -1.5, 126.5, -126.5, 127.0] {
            assert_eq!((y + ROUNDER) - ROUNDER, y.round_ties_even(), "{y}");
        }
    }

    #[test]
    fn zero_block_and_extremes() {
        let mut x = vec![0.0f32; 32];
        x[16] = -f32::MAX;
        x[17] = f32::MAX;
        x[18] = 1e-45;
        let (mut q, mut s) = (vec![0i8; 32], vec![0.0f32; 2]);
        quantize_row(&x, &mut q, &mut s).unwrap();
        assert_eq!((s[0], &q[..16]), (0.0, &[0i8; 16][..]));
        assert_eq!(&q[16..19], &[-127, 127, 0]);
        assert!(s[1].is_finite() && s[1] > 0.0);
    }

    #[test]
    fn bad_rows_are_errors() {
        let (mut q, mut s) = (vec![0i8; 16], vec![0.0f32; 1]);
        assert!(matches!(
            quantize_row(&[0.0; 8], &mut q[..8], &mut s),
            Err(QuantError::NotMultiple { .. })
        ));
        assert!(matches!(
            quantize_row(&[0.0; 16], &mut q[..15], &mut s),
            Err(QuantError::LengthMismatch { .. })
        ));
        let mut x = [1.0f32; 16];
        x[3] = f32::NAN;
        assert!(matches!(
            quantize_row(&x, &mut q, &mut s),
            Err(QuantError::NonFinite { index: 3, .. })
        ));
    }
}
