//! Dynamic int8 quantization of activations: the activation side of the W4A8 CPU mode
//! ([`crate::linear::ActivationQuant::Int8`]).
//!
//! Each [`BLOCK`]-element block of an activation row (the last one of a row may be
//! shorter) gets its own f32 scale, chosen at run time from the block itself (no
//! calibration):
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
//! what llama.cpp's Q4_K × Q8_K dot product does too, with the same 256-element blocks.
//! Blocks that span sixteen NVFP4 weight blocks are what let the prompt GEMM apply the
//! weight block scales in integers and the activation scale once per 256 products.

use crate::error::{QuantError, Result, check_finite, check_len};

/// Elements per activation scale.
pub const BLOCK: usize = 256;

/// Row lengths are multiples of this (the NVFP4 weight block size), so every block,
/// a row's shorter last one included, holds whole 16-element groups.
pub const GROUP: usize = 16;

/// Largest quantized magnitude.
const QMAX: f32 = 127.0;

/// 1.5·2²³: f32 values this large have no fractional bits.
const ROUNDER: f32 = 12_582_912.0;

/// Quantizes one activation row (length a multiple of [`GROUP`], all finite) into
/// `q` (same length) and one scale per block ([`scales_len`]).
///
/// Errors: [`QuantError::NotMultiple`] for a bad length, [`QuantError::LengthMismatch`]
/// for wrongly sized outputs, [`QuantError::NonFinite`] for NaN or infinite inputs.
pub fn quantize_row(x: &[f32], q: &mut [i8], scales: &mut [f32]) -> Result<()> {
    if !x.len().is_multiple_of(GROUP) {
        return Err(QuantError::NotMultiple {
            what: "int8 activation row length",
            multiple: GROUP,
            got: x.len(),
        });
    }
    check_len("int8 activation codes", x.len(), q.len())?;
    check_len("int8 activation scales", scales_len(x.len()), scales.len())?;
    check_finite("activation row", x)?;
    #[cfg(target_arch = "x86_64")]
    if edge_core::simd::token().avx2().is_some() {
        // SAFETY: the level's token proves AVX2 (checked just above).
        unsafe { x86::quantize_blocks(x, q, scales) };
        return Ok(());
    }
    quantize_blocks(x, q, scales);
    Ok(())
}

/// Scales of a row of `n` elements: one per [`BLOCK`] elements, the last block possibly
/// shorter.
pub fn scales_len(n: usize) -> usize {
    n.div_ceil(BLOCK)
}

/// The quantizer on checked inputs, one block at a time (the reference for the SIMD
/// version, which must give identical codes and scales).
fn quantize_blocks(x: &[f32], q: &mut [i8], scales: &mut [f32]) {
    let blocks = x.chunks(BLOCK).zip(q.chunks_mut(BLOCK));
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
}

/// AVX2 quantizer: the same operations as [`quantize_blocks`] on 8 lanes (exact max,
/// the same scalar `127/amax`, multiply, add and remove the rounder, clamp), so codes
/// and scales are bit-identical. About 6 cycles per element became well under one.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BLOCK, GROUP, QMAX, ROUNDER};
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx2")]
    pub(super) fn quantize_blocks(x: &[f32], q: &mut [i8], scales: &mut [f32]) {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let (hi, lo) = (_mm256_set1_ps(QMAX), _mm256_set1_ps(-QMAX));
        let rounder = _mm256_set1_ps(ROUNDER);
        let blocks = x.chunks(BLOCK).zip(q.chunks_mut(BLOCK));
        for ((block, codes), scale) in blocks.zip(scales.iter_mut()) {
            let mut m = _mm256_setzero_ps();
            for v in block.chunks_exact(8) {
                // SAFETY: `v` holds 8 floats.
                let v = unsafe { _mm256_loadu_ps(v.as_ptr()) };
                m = _mm256_max_ps(m, _mm256_and_ps(v, abs_mask));
            }
            let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)));
            if amax == 0.0 {
                codes.fill(0);
                *scale = 0.0;
                continue;
            }
            let inv = _mm256_set1_ps(QMAX / amax);
            for (group, out) in block.chunks_exact(GROUP).zip(codes.chunks_exact_mut(GROUP)) {
                // SAFETY: `group` holds 16 floats.
                let v = unsafe {
                    [
                        _mm256_loadu_ps(group.as_ptr()),
                        _mm256_loadu_ps(group.as_ptr().add(8)),
                    ]
                };
                let [a, b] = v.map(|v| {
                    let r = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(v, inv), rounder), rounder);
                    _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(r, hi), lo))
                });
                // i32 → i16 packs per 128-bit lane; the permute restores element order.
                let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(a, b));
                let bytes =
                    _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
                // SAFETY: `out` holds 16 bytes.
                unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), bytes) };
            }
            *scale = amax / QMAX;
        }
    }
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
    fn zero_block_and_a_shorter_last_block() {
        // A zero block, then a 32-element last block with the extremes.
        let mut x = vec![0.0f32; BLOCK + 32];
        x[BLOCK] = -f32::MAX;
        x[BLOCK + 1] = f32::MAX;
        x[BLOCK + 2] = 1e-45;
        let (mut q, mut s) = (vec![0i8; x.len()], vec![0.0f32; scales_len(x.len())]);
        assert_eq!(s.len(), 2);
        quantize_row(&x, &mut q, &mut s).unwrap();
        assert_eq!((s[0], &q[..BLOCK]), (0.0, &[0i8; BLOCK][..]));
        assert_eq!(&q[BLOCK..BLOCK + 3], &[-127, 127, 0]);
        assert!(s[1].is_finite() && s[1] > 0.0);
    }

    /// One scale per 256 elements: the block's largest magnitude sets the step of all
    /// its elements, the next block has its own.
    #[test]
    fn one_scale_per_256_elements() {
        let mut x = vec![1.0f32; 2 * BLOCK];
        x[BLOCK - 1] = 127.0;
        x[BLOCK] = -2.0;
        let (mut q, mut s) = (vec![0i8; x.len()], vec![0.0f32; 2]);
        quantize_row(&x, &mut q, &mut s).unwrap();
        assert_eq!(s, [1.0, 2.0 / 127.0]);
        assert_eq!((q[0], q[BLOCK - 1]), (1, 127));
        assert_eq!((q[BLOCK], q[BLOCK + 1]), (-127, 64));
    }

    /// The AVX2 quantizer gives the portable one's codes and scales bit for bit.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_quantizer_is_identical() {
        if edge_core::simd::Avx2::detect().is_none() {
            return;
        }
        let mut rng = edge_core::rng::SeededRng::from_seed(7);
        // Seven whole blocks and a shorter last one.
        let n = 7 * BLOCK + 48;
        let mut x: Vec<f32> = (0..n)
            .map(|i| {
                let u = rng.uniform(-0.5, 0.5);
                // Magnitudes from 1e-6 to 1e4, with exact ties in some blocks.
                if (i / BLOCK).is_multiple_of(3) {
                    (i % 7) as f32 - 3.0
                } else {
                    u * 10f32.powi((i / BLOCK * 3 % 11) as i32 - 6)
                }
            })
            .collect();
        x[BLOCK..2 * BLOCK].fill(0.0);
        x[5 * BLOCK + 9] = f32::MAX;
        let (mut qa, mut sa) = (vec![0i8; n], vec![0.0f32; scales_len(n)]);
        let (mut qb, mut sb) = (qa.clone(), sa.clone());
        quantize_blocks(&x, &mut qa, &mut sa);
        // SAFETY: AVX2 was detected above.
        unsafe { x86::quantize_blocks(&x, &mut qb, &mut sb) };
        assert_eq!(qa, qb);
        assert_eq!(
            sa.iter().map(|s| s.to_bits()).collect::<Vec<_>>(),
            sb.iter().map(|s| s.to_bits()).collect::<Vec<_>>()
        );
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
        assert!(matches!(
            quantize_row(&[0.0; 16], &mut q, &mut [0.0; 2]),
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
