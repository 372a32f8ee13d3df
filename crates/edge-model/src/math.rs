//! Vectorisable scalar math shared by the CPU kernels and the logit reductions: written
//! without libm calls so that loops over it vectorise (inside
//! [`edge_core::simd::dispatch!`] with the level's features).

/// `eˣ` without a libm call, so loops over it vectorise (silu, sigmoid and the decay
/// and softmax exponentials run tens of millions of times per prompt): `x = n·ln2 + r`,
/// `|r| ≤ ln2/2`, a degree-7 Taylor polynomial for `eʳ`, `2ⁿ` built in the exponent
/// bits. Relative error below 3e-7; inputs under −87.3 give 0 (never a subnormal, see
/// `NEGLIGIBLE` in the CPU kernels), inputs over 88.7 give +∞, NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let underflows = x < -87.3;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Round to nearest with the 1.5·2²³ trick, not `round`/`mul_add`: without SSE4.1
    // and FMA enabled (code outside `dispatch!`) those become libm calls.
    const ROUND: f32 = 12_582_912.0;
    // Comparisons, not `f32::clamp`, and the exponent taken from the rounding sum's
    // bits, not an `as i32` cast: both keep every step a vector operation (the
    // saturating cast and clamp compiled to a scalar compare-and-move per lane, which
    // made the SiLU of the GDN conv cost more than its multiply-adds). A NaN fails both
    // comparisons and stays NaN.
    let x = if x < -87.3 { -87.3 } else { x };
    let x = if x > 88.8 { 88.8 } else { x };
    let rounded = x * std::f32::consts::LOG2_E + ROUND;
    let n = rounded - ROUND;
    // The low mantissa bits of `rounded` hold n (|n| ≤ 128) in two's complement.
    let n_bits = rounded.to_bits().wrapping_sub(ROUND.to_bits());
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p: f32 = 1.0 / 5040.0;
    for c in [
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    let y = p * f32::from_bits(n_bits.wrapping_add(127) << 23);
    if underflows { 0.0 } else { y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_and_handles_the_edges() {
        let mut worst = 0.0f64;
        for i in -87_000..88_000 {
            let x = i as f32 * 1e-3 + 0.000_37;
            let want = f64::from(x).exp();
            worst = worst.max(((f64::from(exp(x)) - want) / want).abs());
        }
        assert!(worst < 3e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
        assert!(exp(-87.2) >= f32::MIN_POSITIVE);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(f32::NEG_INFINITY) == 0.0);
    }
}
