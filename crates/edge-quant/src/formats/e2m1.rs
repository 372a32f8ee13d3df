//! E2M1 (FP4): 1 sign, 2 exponent (bias 1), 1 mantissa bit; no Inf, no NaN.

/// The value of each of the 16 codes. Code 8 is −0.
pub const VALUES: [f32; 16] = [
    0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
];

/// Twice each code's value: small integers, so E2M1 products can be summed exactly in
/// integer arithmetic (used by the W4A4 dot products).
pub const DOUBLED: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// The largest finite magnitude.
pub const MAX: f32 = 6.0;

/// Decodes a 4-bit code (the upper nibble of `code` is ignored).
#[inline]
pub fn decode(code: u8) -> f32 {
    VALUES[(code & 0xf) as usize]
}

/// Encodes with round-to-nearest-even on the magnitude code and saturation at ±6, as
/// ModelOpt's `_cast_fp4` and PTX `cvt.rn.satfinite.e2m1x2.f32` do. The sign comes from
/// `x < 0`, so a small negative value that rounds to zero gives code 0x8 (−0).
/// NaN encodes as +6 (saturated); tensor-level quantizers reject NaN before this.
#[inline]
pub fn encode(x: f32) -> u8 {
    let sign = if x < 0.0 { 0x8 } else { 0 };
    let a = x.abs();
    // Interval ends of the RNE table: ties at 0.25, 1.25, 2.5 and 5.0 go down (to the
    // even code), ties at 0.75, 1.75 and 3.5 go up.
    let mag = if a.is_nan() {
        7
    } else if a <= 0.25 {
        0
    } else if a < 0.75 {
        1
    } else if a <= 1.25 {
        2
    } else if a < 1.75 {
        3
    } else if a <= 2.5 {
        4
    } else if a < 3.5 {
        5
    } else if a <= 5.0 {
        6
    } else {
        7
    };
    sign | mag
}

/// Packs codes two per byte, the even element in the low nibble. An odd tail is padded
/// with code 0.
pub fn pack(codes: &[u8]) -> Vec<u8> {
    codes
        .chunks(2)
        .map(|p| (p[0] & 0xf) | (p.get(1).copied().unwrap_or(0) << 4))
        .collect()
}

/// Unpacks `n` codes from bytes packed by [`pack`].
pub fn unpack(packed: &[u8], n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (packed[i / 2] >> ((i % 2) * 4)) & 0xf)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for code in 0u8..16 {
            let back = encode(decode(code));
            // −0 encodes as +0: `x < 0` is false for −0.
            let expect = if code == 8 { 0 } else { code };
            assert_eq!(back, expect, "code {code:#x}");
            assert_eq!(f32::from(DOUBLED[code as usize]), 2.0 * decode(code));
        }
    }

    #[test]
    fn ties_and_saturation() {
        let cases = [
            (0.25, 0.0),
            (0.75, 1.0),
            (1.25, 1.0),
            (1.75, 2.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (5.0, 4.0),
            (5.0001, 6.0),
            (1e9, 6.0),
            (f32::INFINITY, 6.0),
        ];
        for (x, want) in cases {
            assert_eq!(decode(encode(x)), want, "{x}");
            assert_eq!(decode(encode(-x)), -want, "-{x}");
        }
        assert_eq!(encode(-0.1), 0x8);
    }

    #[test]
    fn pack_unpack() {
        let codes = [1u8, 2, 3, 4, 15];
        let p = pack(&codes);
        assert_eq!(p, vec![0x21, 0x43, 0x0f]);
        assert_eq!(unpack(&p, 5), codes);
    }
}
