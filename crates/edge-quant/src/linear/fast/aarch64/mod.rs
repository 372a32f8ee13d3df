//! aarch64 kernels, for Jetson-class and server Arm CPUs: one [`Isa`] per level of
//! [`edge_core::simd`].
//!
//! - [`Neon`] (`SimdLevel::Neon`, the aarch64 baseline, so no run-time detection):
//!   - f32 dots: `vfmaq_f32` with four accumulators per token.
//!   - bf16: widen each 16-bit lane and shift it into the high half of an f32.
//!   - NVFP4 (W4A16) in natural order: `vqtbl1q_s8` maps low and high nibbles to twice
//!     the E2M1 value, `vzip1q/vzip2q` restore element order, then widen to f32 and
//!     multiply by half the block scale.
//!   - FP8 and W4A4/W4A8 use the portable kernels, which the compiler vectorizes.
//! - `Dotprod` (`SimdLevel::NeonDotprod`): the NEON kernels, and W4A4/W4A8 rows with
//!   `sdot` ([`dotprod`]).
//! - `I8mm` (`SimdLevel::NeonI8mm`): the same, W4A4/W4A8 rows of two or more tokens
//!   with `smmla` ([`i8mm`]), and where the CPU also has FEAT_BF16 the bf16 prompt
//!   GEMM with `bfmmla` ([`bf16_gemm`]).
//!
//! Stable Rust does not expose the `sdot`, `smmla` and `bfmmla` intrinsics, so those
//! instructions are inline assembly inside `#[target_feature]` functions ([`int`],
//! [`bf16_gemm`]); the level's proof token is what makes calling them sound.
//!
//! Every intrinsic use in the [`Neon`] kernels sits in an `unsafe` block that also
//! performs a raw load or store, so the code compiles whether or not a given intrinsic
//! is declared `unsafe`.

mod bf16_gemm;
mod dotprod;
mod i8mm;
mod int;
#[cfg(test)]
mod tests;

use super::{Isa, Perm, portable};
use crate::formats::e2m1;
use core::arch::aarch64::*;

/// The NEON kernel family.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon;

/// `Σ_i w[i]·x[i]` (`x.len() >= w.len()`).
fn dot1(w: &[f32], x: &[f32]) -> f32 {
    let n = w.len();
    let x = &x[..n];
    let mut i = 0;
    let mut sum = 0.0f32;
    if n >= 16 {
        // SAFETY: every load reads floats [i, i + 16) with i + 16 <= n of `w` and `x`.
        unsafe {
            let mut a = [vdupq_n_f32(0.0); 4];
            while i + 16 <= n {
                for (j, acc) in a.iter_mut().enumerate() {
                    let o = i + 4 * j;
                    *acc = vfmaq_f32(
                        *acc,
                        vld1q_f32(w.as_ptr().add(o)),
                        vld1q_f32(x.as_ptr().add(o)),
                    );
                }
                i += 16;
            }
            sum = vaddvq_f32(vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3])));
        }
    }
    sum + w[i..].iter().zip(&x[i..]).map(|(a, b)| a * b).sum::<f32>()
}

/// Writes 16 signed bytes times `s` as f32 to `d[..16]`.
///
/// # Safety
/// `d` must be valid for writing 16 floats.
unsafe fn store16(d: *mut f32, z: int8x16_t, s: f32) {
    // SAFETY: the caller guarantees 16 writable floats at `d`.
    unsafe {
        let s = vdupq_n_f32(s);
        let (a, b) = (vmovl_s8(vget_low_s8(z)), vmovl_high_s8(z));
        let parts = [
            vmovl_s16(vget_low_s16(a)),
            vmovl_high_s16(a),
            vmovl_s16(vget_low_s16(b)),
            vmovl_high_s16(b),
        ];
        for (j, p) in parts.into_iter().enumerate() {
            vst1q_f32(d.add(4 * j), vmulq_f32(vcvtq_f32_s32(p), s));
        }
    }
}

impl Isa for Neon {
    const NVFP4_PERM: Perm = Perm::Natural;
    const A4_PERM: Perm = Perm::Natural;

    fn dot(self, w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
        for (t, a) in acc.iter_mut().enumerate() {
            *a += dot1(w, &xs[t * stride..]);
        }
    }

    fn decode_bf16(self, src: &[u8], dst: &mut [f32]) {
        let n = dst.len();
        let mut i = 0;
        while i + 8 <= n {
            // SAFETY: `src` holds 2n bytes and `dst` n floats; this reads bytes
            // [2i, 2i + 16) and writes floats [i, i + 8), with i + 8 <= n.
            unsafe {
                let v = vreinterpretq_u16_u8(vld1q_u8(src.as_ptr().add(2 * i)));
                let lo = vshlq_n_u32::<16>(vmovl_u16(vget_low_u16(v)));
                let hi = vshlq_n_u32::<16>(vmovl_high_u16(v));
                vst1q_f32(dst.as_mut_ptr().add(i), vreinterpretq_f32_u32(lo));
                vst1q_f32(dst.as_mut_ptr().add(i + 4), vreinterpretq_f32_u32(hi));
            }
            i += 8;
        }
        portable::decode_bf16(&src[2 * i..], &mut dst[i..]);
    }

    fn decode_fp8(self, src: &[u8], dst: &mut [f32]) {
        portable::decode_fp8(src, dst);
    }

    fn decode_nvfp4(self, codes: &[u8], scales: &[u8], dst: &mut [f32]) {
        let pairs = dst.len() / 32;
        let mut sc = [0.0f32; 2];
        for c in 0..pairs {
            portable::decode_fp8(&scales[2 * c..2 * c + 2], &mut sc);
            // SAFETY: pair c reads codes [16c, 16c + 16) (16·pairs <= codes.len()),
            // the 16-byte table, and writes dst [32c, 32c + 32) (32·pairs <= dst.len()).
            unsafe {
                let table = vld1q_s8(e2m1::DOUBLED.as_ptr());
                let v = vld1q_u8(codes.as_ptr().add(16 * c));
                let lo = vqtbl1q_s8(table, vandq_u8(v, vdupq_n_u8(0x0f)));
                let hi = vqtbl1q_s8(table, vshrq_n_u8::<4>(v));
                let d = dst.as_mut_ptr().add(32 * c);
                // The table holds doubled values: multiply by half the scale.
                store16(d, vzip1q_s8(lo, hi), 0.5 * sc[0]);
                store16(d.add(16), vzip2q_s8(lo, hi), 0.5 * sc[1]);
            }
        }
        let (c0, s0, d0) = (16 * pairs, 2 * pairs, 32 * pairs);
        portable::decode_nvfp4(&codes[c0..], &scales[s0..], &mut dst[d0..]);
    }

    fn decode_w4(self, codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
        portable::decode_w4(codes, scales, wq, wsc);
    }

    fn dot_a4(
        self,
        wq: &[u8],
        wsc: &[f32],
        qa: &[i8],
        sfa: &[f32],
        negcorr: &[i32],
        stride: usize,
        gstride: usize,
        acc: &mut [f32],
    ) {
        portable::Portable.dot_a4(wq, wsc, qa, sfa, negcorr, stride, gstride, acc);
    }
}

/// The [`Isa`] methods the dotprod and i8mm levels share with [`Neon`] (f32 dots and
/// the weight decoders): forwarded to it.
macro_rules! neon_methods {
    () => {
        fn dot(self, w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
            super::Neon.dot(w, xs, stride, acc);
        }

        fn decode_bf16(self, src: &[u8], dst: &mut [f32]) {
            super::Neon.decode_bf16(src, dst);
        }

        fn decode_fp8(self, src: &[u8], dst: &mut [f32]) {
            super::Neon.decode_fp8(src, dst);
        }

        fn decode_nvfp4(self, codes: &[u8], scales: &[u8], dst: &mut [f32]) {
            super::Neon.decode_nvfp4(codes, scales, dst);
        }
    };
}
use neon_methods;
