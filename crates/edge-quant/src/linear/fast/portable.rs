//! Portable kernels: plain Rust in natural element order, written with fixed-width
//! independent accumulators so the compiler can vectorize them without reassociating.
//! They are the fallback level and handle the SIMD kernels' row tails.

use super::{Isa, Perm};
use crate::formats::{e2m1, e4m3};

/// The portable kernel family (always available).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable;

/// Lanes of the accumulator arrays (a multiple of every SIMD width used here).
const LANES: usize = 16;

/// `2·E2M1[q] + 12` for every code: the unsigned weight operand of the W4A4 products.
pub(crate) const OFFSET_DOUBLED: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (e2m1::DOUBLED[i] + 12) as u8;
        i += 1;
    }
    t
};

/// `e4m3(b) · 2⁻⁸`, exactly (a power-of-two scaling of an exact table value).
#[inline]
pub(crate) fn e4m3_unit(b: u8) -> f32 {
    e4m3::decode(b) * (1.0 / 256.0)
}

/// `Σ_i w[i]·x[i]` with [`LANES`] independent partial sums. (Plain `+=`, not
/// `mul_add`: without hardware FMA that would be a libm call per element.)
pub(crate) fn dot1(w: &[f32], x: &[f32]) -> f32 {
    let x = &x[..w.len()];
    let mut lanes = [0.0f32; LANES];
    let (wc, xc) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
    let tail: f32 = wc
        .remainder()
        .iter()
        .zip(xc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (wv, xv) in wc.zip(xc) {
        for l in 0..LANES {
            lanes[l] += wv[l] * xv[l];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// [`Isa::dot`] in portable code.
pub(crate) fn dot(w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
    for (t, a) in acc.iter_mut().enumerate() {
        *a += dot1(w, &xs[t * stride..]);
    }
}

/// [`Isa::decode_bf16`] in portable code.
pub(crate) fn decode_bf16(src: &[u8], dst: &mut [f32]) {
    for (d, p) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = f32::from_bits(u32::from(u16::from_le_bytes([p[0], p[1]])) << 16);
    }
}

/// [`Isa::decode_fp8`] in portable code.
pub(crate) fn decode_fp8(src: &[u8], dst: &mut [f32]) {
    for (d, &b) in dst.iter_mut().zip(src) {
        *d = e4m3_unit(b);
    }
}

/// [`Isa::decode_nvfp4`] in natural order.
pub(crate) fn decode_nvfp4(codes: &[u8], scales: &[u8], dst: &mut [f32]) {
    let blocks = dst.chunks_exact_mut(16).zip(codes.chunks_exact(8));
    for ((d, c), &s) in blocks.zip(scales) {
        let s = e4m3_unit(s);
        for (pair, &byte) in d.chunks_exact_mut(2).zip(c) {
            pair[0] = e2m1::VALUES[usize::from(byte & 0xf)] * s;
            pair[1] = e2m1::VALUES[usize::from(byte >> 4)] * s;
        }
    }
}

/// [`Isa::decode_w4`] in natural order.
pub(crate) fn decode_w4(codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
    decode_w4_codes(codes, wq);
    decode_w4_scales(scales, wsc);
}

/// The code half of [`decode_w4`]: `wq[k] = 2·E2M1[q_k] + 12`, natural order.
pub(crate) fn decode_w4_codes(codes: &[u8], wq: &mut [u8]) {
    for (pair, &byte) in wq.chunks_exact_mut(2).zip(codes) {
        pair[0] = OFFSET_DOUBLED[usize::from(byte & 0xf)];
        pair[1] = OFFSET_DOUBLED[usize::from(byte >> 4)];
    }
}

/// The scale half of [`decode_w4`]: `wsc[g] = e4m3(scales[g/2]) · 2⁻⁸`.
pub(crate) fn decode_w4_scales(scales: &[u8], wsc: &mut [f32]) {
    for (g, s) in wsc.iter_mut().enumerate() {
        *s = e4m3_unit(scales[g / 2]);
    }
}

/// One token's W4A4 sum over natural-order 8-element groups:
/// `Σ_g wsc[g]·sfa[g]·Σ_{k∈g} (wq[k] − 12)·qa[k]`.
pub(crate) fn dot_a4_groups(wq: &[u8], wsc: &[f32], qa: &[i8], sfa: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (((w, a), &sw), &sa) in wq.chunks_exact(8).zip(qa.chunks_exact(8)).zip(wsc).zip(sfa) {
        let dot: i32 = w
            .iter()
            .zip(a)
            .map(|(&w, &a)| (i32::from(w) - 12) * i32::from(a))
            .sum();
        sum += dot as f32 * (sw * sa);
    }
    sum
}

impl Isa for Portable {
    const NVFP4_PERM: Perm = Perm::Natural;
    const A4_PERM: Perm = Perm::Natural;

    fn dot(self, w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
        dot(w, xs, stride, acc);
    }

    fn decode_bf16(self, src: &[u8], dst: &mut [f32]) {
        decode_bf16(src, dst);
    }

    fn decode_fp8(self, src: &[u8], dst: &mut [f32]) {
        decode_fp8(src, dst);
    }

    fn decode_nvfp4(self, codes: &[u8], scales: &[u8], dst: &mut [f32]) {
        decode_nvfp4(codes, scales, dst);
    }

    fn decode_w4(self, codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
        decode_w4(codes, scales, wq, wsc);
    }

    fn dot_a4(
        self,
        wq: &[u8],
        wsc: &[f32],
        qa: &[i8],
        sfa: &[f32],
        _negcorr: &[i32],
        stride: usize,
        gstride: usize,
        acc: &mut [f32],
    ) {
        for (t, a) in acc.iter_mut().enumerate() {
            *a += dot_a4_groups(wq, wsc, &qa[t * stride..], &sfa[t * gstride..]);
        }
    }
}
