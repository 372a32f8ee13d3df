//! Decoding cached KV rows (f32, bf16 or FP8 E4M3 pages) to f32 for attention.
//!
//! FP8 decoding goes through half precision: an E4M3 byte `s eeee mmm` shifted into
//! an f16 as `s 0eeee mmm0000000` is the same value times 2⁻⁸ (the exponent biases
//! differ by 8, and E4M3 subnormals land on f16 subnormals), so one `vcvtph2ps` and
//! one multiply by `2⁸ · scale` decode 16 bytes. That product rounds once, exactly as
//! the table decode times the scale does, so the result is bit-identical to
//! [`edge_kvcache::memory::decode_run`]. The only code that is not a number, 0x7F
//! (and 0xFF), is patched to NaN.

use edge_kvcache::memory::{KvRun, decode_run};

/// `run` as f32 values: borrowed for f32 pages, decoded into `buf` otherwise.
#[inline]
pub fn rows_f32<'a>(run: KvRun<'a>, scale: f32, buf: &'a mut Vec<f32>) -> &'a [f32] {
    match run {
        KvRun::F32(x) => x,
        KvRun::Bf16(x) => {
            buf.resize(x.len(), 0.0);
            bf16_to_f32(x, buf);
            buf
        }
        KvRun::Fp8(x) => {
            buf.resize(x.len(), 0.0);
            fp8_to_f32(x, scale, buf);
            buf
        }
    }
}

/// `run` as f32 values written to `out` (as long as `run`).
#[inline]
pub fn rows_into(run: KvRun<'_>, scale: f32, out: &mut [f32]) {
    match run {
        KvRun::F32(x) => out.copy_from_slice(x),
        KvRun::Bf16(x) => bf16_to_f32(x, out),
        KvRun::Fp8(x) => fp8_to_f32(x, scale, out),
    }
}

/// bf16 bit patterns to f32 (exact).
pub fn bf16_to_f32(src: &[u16], out: &mut [f32]) {
    // On aarch64 the one (NEON) variant of this loop compiles to `shll`/`shll2`
    // already: no hand-written kernel.
    super::simd::dispatch!(bf16_portable, (src: &[u16], out: &mut [f32]) {
        for (o, &b) in out.iter_mut().zip(src) {
            *o = f32::from_bits(u32::from(b) << 16);
        }
    })
}

/// FP8 E4M3 codes times `scale` to f32, bit-identical to the table decode.
pub fn fp8_to_f32(src: &[u8], scale: f32, out: &mut [f32]) {
    let n = src.len().min(out.len());
    #[cfg(target_arch = "x86_64")]
    match edge_core::simd::token() {
        edge_core::simd::Token::Avx512(_) => {
            // SAFETY: the token proves the features the function enables (AVX-512
            // F/BW/VL and AVX2).
            unsafe { x86::fp8_avx512(&src[..n], scale, &mut out[..n]) };
            return;
        }
        edge_core::simd::Token::Avx2(_) => {
            // SAFETY: the token proves AVX2 and F16C.
            unsafe { x86::fp8_avx2(&src[..n], scale, &mut out[..n]) };
            return;
        }
        edge_core::simd::Token::Portable => {}
    }
    // One NEON kernel at every Arm level (dotprod and i8mm do nothing for it).
    #[cfg(target_arch = "aarch64")]
    if !matches!(edge_core::simd::token(), edge_core::simd::Token::Portable) {
        neon::fp8(&src[..n], scale, &mut out[..n]);
        return;
    }
    decode_run(KvRun::Fp8(&src[..n]), scale, &mut out[..n]);
}

/// The NEON FP8 conversion, and the f16 → f32 widening the decode-attention kernel shares.
///
/// NEON is baseline on aarch64, and so is `fcvtl` (half to single), but its intrinsics
/// (`vcvt_f32_f16`, `vcvt_high_f32_f16`) take `float16x4_t`/`float16x8_t`, which need
/// the unstable `f16` type in Rust 1.95: the two widenings are one instruction of
/// inline assembly each, on the f16 bits in an `int16x8_t`.
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon {
    use core::arch::aarch64::*;
    use core::arch::asm;
    use edge_kvcache::memory::{KvRun, decode_run};

    /// The low four f16 lanes of `h` (bit patterns) as f32 (`fcvtl`).
    #[inline(always)]
    pub(crate) fn f16_low_to_f32(h: int16x8_t) -> float32x4_t {
        let x: float32x4_t;
        // SAFETY: `fcvtl` is baseline aarch64 Advanced SIMD and touches only the two
        // registers.
        unsafe {
            asm!("fcvtl {0:v}.4s, {1:v}.4h", out(vreg) x, in(vreg) h,
                 options(pure, nomem, nostack, preserves_flags));
        }
        x
    }

    /// The high four f16 lanes of `h` (bit patterns) as f32 (`fcvtl2`).
    #[inline(always)]
    pub(crate) fn f16_high_to_f32(h: int16x8_t) -> float32x4_t {
        let x: float32x4_t;
        // SAFETY: as for `f16_low_to_f32`.
        unsafe {
            asm!("fcvtl2 {0:v}.4s, {1:v}.8h", out(vreg) x, in(vreg) h,
                 options(pure, nomem, nostack, preserves_flags));
        }
        x
    }

    /// [`super::fp8_to_f32`], 8 codes a step; `out` as long as `src`.
    pub fn fp8(src: &[u8], scale: f32, out: &mut [f32]) {
        let full = src.len() / 8 * 8;
        // SAFETY: NEON is baseline on aarch64.
        let (mul, nan) = unsafe { (vdupq_n_f32(256.0 * scale), vdupq_n_f32(f32::NAN)) };
        for i in (0..full).step_by(8) {
            // SAFETY: NEON; `i + 8 <= full <= src.len()` and `out` is as long as `src`.
            unsafe {
                // Sign-extended and shifted left by 7: the sign in bit 15 (its copy in
                // bit 14 masked off), exponent and mantissa in f16 position.
                let w = vmovl_s8(vld1_s8(src.as_ptr().add(i).cast()));
                let h = vandq_s16(vshlq_n_s16::<7>(w), vdupq_n_s16(!0x4000));
                // Codes 0x7F and 0xFF (NaN): magnitude `0x7F << 7`.
                let mag = vandq_s16(h, vdupq_n_s16(0x7fff));
                let is_nan = vreinterpretq_s16_u16(vceqq_s16(mag, vdupq_n_s16(0x3f80)));
                let lo_nan = vreinterpretq_u32_s32(vmovl_s16(vget_low_s16(is_nan)));
                let hi_nan = vreinterpretq_u32_s32(vmovl_high_s16(is_nan));
                let lo = vmulq_f32(f16_low_to_f32(h), mul);
                let hi = vmulq_f32(f16_high_to_f32(h), mul);
                let o = out.as_mut_ptr().add(i);
                vst1q_f32(o, vbslq_f32(lo_nan, nan, lo));
                vst1q_f32(o.add(4), vbslq_f32(hi_nan, nan, hi));
            }
        }
        decode_run(KvRun::Fp8(&src[full..]), scale, &mut out[full..]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use edge_kvcache::memory::{KvRun, decode_run};
    use std::arch::x86_64::*;

    /// The f16 pattern of E4M3 code 0x7F (NaN): `0x7F << 7`.
    const NAN_MAG: i16 = 0x3f80;

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2")]
    pub unsafe fn fp8_avx512(src: &[u8], scale: f32, out: &mut [f32]) {
        let full = src.len() / 16 * 16;
        let mul = _mm512_set1_ps(256.0 * scale);
        let nan = _mm512_set1_ps(f32::NAN);
        let (low, high) = (_mm256_set1_epi16(0x7f), _mm256_set1_epi16(0x80));
        for i in (0..full).step_by(16) {
            // SAFETY: `i + 16 <= full <= src.len()` and `out` is as long as `src`.
            unsafe {
                let b = _mm_loadu_si128(src.as_ptr().add(i).cast());
                let w = _mm256_cvtepu8_epi16(b);
                let mag = _mm256_slli_epi16::<7>(_mm256_and_si256(w, low));
                let sign = _mm256_slli_epi16::<8>(_mm256_and_si256(w, high));
                let x = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(mag, sign)), mul);
                let is_nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(NAN_MAG));
                _mm512_storeu_ps(out.as_mut_ptr().add(i), _mm512_mask_mov_ps(x, is_nan, nan));
            }
        }
        decode_run(KvRun::Fp8(&src[full..]), scale, &mut out[full..]);
    }

    #[target_feature(enable = "avx2,f16c")]
    pub unsafe fn fp8_avx2(src: &[u8], scale: f32, out: &mut [f32]) {
        let full = src.len() / 8 * 8;
        let mul = _mm256_set1_ps(256.0 * scale);
        let nan = _mm256_set1_ps(f32::NAN);
        let (low, high) = (_mm_set1_epi16(0x7f), _mm_set1_epi16(0x80));
        for i in (0..full).step_by(8) {
            // SAFETY: `i + 8 <= full <= src.len()` and `out` is as long as `src`.
            unsafe {
                let b = _mm_loadl_epi64(src.as_ptr().add(i).cast());
                let w = _mm_cvtepu8_epi16(b);
                let mag = _mm_slli_epi16::<7>(_mm_and_si128(w, low));
                let sign = _mm_slli_epi16::<8>(_mm_and_si128(w, high));
                let x = _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(mag, sign)), mul);
                let is_nan = _mm_cmpeq_epi16(mag, _mm_set1_epi16(NAN_MAG));
                let mask = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(is_nan));
                _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_blendv_ps(x, nan, mask));
            }
        }
        decode_run(KvRun::Fp8(&src[full..]), scale, &mut out[full..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edge_core::simd::{SimdLevel, with_level};

    /// Every level this CPU runs, the portable one included.
    fn levels() -> impl Iterator<Item = SimdLevel> {
        SimdLevel::ALL.into_iter().filter(|l| l.is_available())
    }

    #[test]
    fn every_fp8_code_decodes_as_the_table_does() {
        let codes: Vec<u8> = (0..=255u8).chain(0..=255u8).chain(7..30).collect();
        for level in levels() {
            with_level(level, || {
                for scale in [1.0f32, 0.0123, 3.7e-3, 17.0, 1e-30] {
                    // Every length to 40 (the tails of 8- and 16-code steps) and all.
                    for n in (0..40).chain([codes.len()]) {
                        let codes = &codes[codes.len() - n..];
                        let mut fast = vec![0.0; n];
                        fp8_to_f32(codes, scale, &mut fast);
                        let mut table = vec![0.0; n];
                        decode_run(KvRun::Fp8(codes), scale, &mut table);
                        for (i, (a, b)) in fast.iter().zip(&table).enumerate() {
                            assert!(
                                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                                "{level}: code {:#x}, scale {scale}: {a} vs {b}",
                                codes[i]
                            );
                        }
                    }
                }
            })
            .unwrap();
        }
    }

    #[test]
    fn bf16_rows_widen_exactly() {
        let mut src: Vec<u16> = (0..37)
            .map(|i| half::bf16::from_f32(i as f32 * -1.7).to_bits())
            .collect();
        // NaNs (quiet, signalling, negative), infinities, zeros, subnormals, the
        // largest and the smallest normal, each sign.
        src.extend([
            0x7fc0u16, 0x7f81, 0xffc1, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x807f, 0x7f7f,
            0xff7f, 0x0080, 0x8080,
        ]);
        for level in levels() {
            with_level(level, || {
                for n in (0..20).chain([src.len()]) {
                    let src = &src[src.len() - n..];
                    let mut out = vec![0.0; n];
                    bf16_to_f32(src, &mut out);
                    let mut table = vec![0.0; n];
                    decode_run(KvRun::Bf16(src), 1.0, &mut table);
                    for ((o, t), &b) in out.iter().zip(&table).zip(src) {
                        assert_eq!(o.to_bits(), u32::from(b) << 16, "{level}: {b:#x}");
                        assert!(
                            o.to_bits() == t.to_bits() || (o.is_nan() && t.is_nan()),
                            "{level}: {b:#x}: {o} vs table {t}"
                        );
                    }
                }
            })
            .unwrap();
        }
    }
}
