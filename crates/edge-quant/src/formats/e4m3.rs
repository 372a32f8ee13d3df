//! FP8 E4M3 "fn" (`torch.float8_e4m3fn`): bias 7, no infinities, NaN = S.1111.111,
//! max 448 (0x7E), min normal 2^−6, min subnormal 2^−9.

use super::{encode_normal, round_half_even};

/// The largest finite value.
pub const MAX: f32 = 448.0;

/// Decodes one byte.
#[inline]
pub fn decode(b: u8) -> f32 {
    DECODE[b as usize]
}

/// Decode table for all 256 codes.
pub static DECODE: [f32; 256] = build_decode_table();

const fn build_decode_table() -> [f32; 256] {
    let mut t = [0.0f32; 256];
    let mut b = 0;
    while b < 256 {
        let exp = ((b >> 3) & 0xf) as i32;
        let mant = (b & 7) as f32;
        let mag = if exp == 15 && (b & 7) == 7 {
            f32::NAN
        } else if exp == 0 {
            mant * (1.0 / 512.0)
        } else {
            // (1 + m/8) · 2^(e−7), built from an exact power of two.
            (1.0 + mant / 8.0) * pow2(exp - 7)
        };
        t[b] = if b & 0x80 != 0 { -mag } else { mag };
        b += 1;
    }
    t
}

const fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Encodes with round-to-nearest-even and **saturation**: finite overflow and ±Inf give
/// ±448, as torch ≥ 2.x and CUDA `__NV_SATFINITE` do. NaN gives 0x7F.
#[inline]
pub fn encode(x: f32) -> u8 {
    if x.is_nan() {
        return 0x7f;
    }
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let a = x.abs();
    let mag = if a >= MAX {
        0x7e
    } else if a < pow2(-6) {
        // Subnormal: units of 2^−9. A result of 8 is exactly the smallest normal (0x08).
        round_half_even(a * 512.0) as u8
    } else {
        encode_normal(a, 3, 7) as u8
    };
    sign | mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_spot_values() {
        assert_eq!(decode(0x38), 1.0);
        assert_eq!(decode(0x7e), 448.0);
        assert_eq!(decode(0x01), 2f32.powi(-9));
        assert_eq!(decode(0x08), 2f32.powi(-6));
        assert!(decode(0x7f).is_nan() && decode(0xff).is_nan());
        assert_eq!(decode(0xfe), -448.0);
    }

    #[test]
    fn every_finite_code_round_trips() {
        for b in 0u8..=255 {
            let v = decode(b);
            if v.is_nan() {
                continue;
            }
            let expect = if b == 0x80 { 0x80 } else { b };
            assert_eq!(encode(v), expect, "code {b:#04x} value {v}");
        }
    }

    #[test]
    fn rounding_matches_torch() {
        assert_eq!(decode(encode(1.0625)), 1.0);
        assert_eq!(decode(encode(1.1875)), 1.25);
        assert_eq!(encode(2f32.powi(-10)), 0);
        assert_eq!(encode(1.5 * 2f32.powi(-9)), 0x02);
        assert_eq!(encode(420.0), 0x7d); // 420 → 416
        assert_eq!(encode(1e6), 0x7e);
        assert_eq!(encode(f32::NEG_INFINITY), 0xfe);
        assert_eq!(encode(f32::NAN), 0x7f);
    }

    #[test]
    fn midpoints_round_to_even_everywhere() {
        // Between every pair of adjacent positive codes, the midpoint goes to the even one.
        for b in 0u8..0x7e {
            let (lo, hi) = (decode(b), decode(b + 1));
            let mid = (lo + hi) / 2.0;
            let even = if b % 2 == 0 { b } else { b + 1 };
            assert_eq!(encode(mid), even, "midpoint of {b:#x} and {:#x}", b + 1);
            assert_eq!(encode(lo + (hi - lo) * 0.25), b);
            assert_eq!(encode(lo + (hi - lo) * 0.75), b + 1);
        }
    }
}
