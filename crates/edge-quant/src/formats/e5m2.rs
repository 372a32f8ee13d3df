//! FP8 E5M2 (`torch.float8_e5m2`): bias 15, IEEE-like with Inf (0x7C) and NaN
//! (0x7D–0x7F), max 57344 (0x7B), min normal 2^−14, min subnormal 2^−16.
//! An E5M2 byte is the upper byte of an IEEE f16.

use super::{encode_normal, round_half_even};

/// The largest finite value.
pub const MAX: f32 = 57344.0;

/// Decodes one byte (exact: it is the upper byte of an f16).
#[inline]
pub fn decode(b: u8) -> f32 {
    half::f16::from_bits(u16::from(b) << 8).to_f32()
}

/// Encodes with round-to-nearest-even, **not saturating** (PyTorch semantics): values that
/// round past 57344 (|x| ≥ 61440) become ±Inf. NaN gives 0x7F.
#[inline]
pub fn encode(x: f32) -> u8 {
    encode_impl(x, false)
}

/// Encodes with round-to-nearest-even and saturation to ±57344 (CUDA `__NV_SATFINITE`).
/// NaN gives 0x7F.
#[inline]
pub fn encode_satfinite(x: f32) -> u8 {
    encode_impl(x, true)
}

fn encode_impl(x: f32, saturate: bool) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs();
    let overflow = if saturate { 0x7b } else { 0x7c };
    let mag = if a.is_infinite() {
        overflow
    } else if a < 2f32.powi(-14) {
        round_half_even(a * 65536.0) as u8
    } else {
        let code = encode_normal(a, 2, 15);
        if code > 0x7b { overflow } else { code as u8 }
    };
    sign | mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_finite_code_round_trips() {
        for b in 0u8..=255 {
            let v = decode(b);
            if v.is_nan() {
                continue;
            }
            let expect = if b == 0x80 { 0x80 } else { b };
            assert_eq!(encode(v), expect, "code {b:#04x}");
            if v.is_finite() {
                assert_eq!(encode_satfinite(v), expect);
            }
        }
    }

    #[test]
    fn overflow_rules() {
        assert_eq!(encode(57344.0), 0x7b);
        assert_eq!(encode(61439.0), 0x7b);
        assert_eq!(encode(61440.0), 0x7c);
        assert_eq!(encode_satfinite(61440.0), 0x7b);
        assert_eq!(encode_satfinite(f32::NEG_INFINITY), 0xfb);
        assert_eq!(encode(f32::INFINITY), 0x7c);
        assert_eq!(decode(0x7c), f32::INFINITY);
        assert_eq!(encode(2f32.powi(-16)), 0x01);
        assert_eq!(encode(2f32.powi(-17)), 0x00);
    }

    #[test]
    fn matches_half_on_midpoints() {
        for b in 0u8..0x7b {
            let (lo, hi) = (decode(b), decode(b + 1));
            let mid = (lo + hi) / 2.0;
            let even = if b % 2 == 0 { b } else { b + 1 };
            assert_eq!(encode(mid), even, "midpoint after {b:#x}");
        }
    }
}
