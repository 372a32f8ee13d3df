//! Element formats: E2M1 (the NVFP4 element), E4M3 ("fn") and E5M2.
//!
//! Encoders round to nearest, ties to even, exactly as ModelOpt's `_cast_fp4` and
//! PyTorch's float8 casts do; see each module for its overflow and NaN rules.

pub mod e2m1;
pub mod e4m3;
pub mod e5m2;

/// Rounds a non-negative finite `x` (already scaled so that one unit is one code step)
/// to the nearest integer, ties to even. Exact for the small magnitudes used here.
#[inline]
pub(crate) fn round_half_even(x: f32) -> f32 {
    let floor = x.floor();
    let frac = x - floor;
    if frac > 0.5 || (frac == 0.5 && floor % 2.0 != 0.0) {
        floor + 1.0
    } else {
        floor
    }
}

/// Encodes a normal-range magnitude `a` (bits of a positive f32) to a float with
/// `mant_bits` mantissa bits and exponent bias `bias`, rounding the f32 mantissa to
/// nearest-even. Returns the code without sign; the caller handles range limits.
#[inline]
pub(crate) fn encode_normal(a: f32, mant_bits: u32, bias: i32) -> u32 {
    let bits = a.to_bits();
    let drop = 23 - mant_bits;
    let half = (1u32 << (drop - 1)) - 1;
    let rounded = bits + half + ((bits >> drop) & 1);
    let exp = ((rounded >> 23) & 0xff) as i32 - 127 + bias;
    let mant = (rounded >> drop) & ((1 << mant_bits) - 1);
    ((exp as u32) << mant_bits) | mant
}
