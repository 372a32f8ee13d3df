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
    decode_run(KvRun::Fp8(&src[..n]), scale, &mut out[..n]);
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

    #[test]
    fn every_fp8_code_decodes_as_the_table_does() {
        let codes: Vec<u8> = (0..=255u8).chain(0..=255u8).chain(7..30).collect();
        for scale in [1.0f32, 0.0123, 3.7e-3, 17.0] {
            let mut fast = vec![0.0; codes.len()];
            fp8_to_f32(&codes, scale, &mut fast);
            let mut table = vec![0.0; codes.len()];
            decode_run(KvRun::Fp8(&codes), scale, &mut table);
            for (i, (a, b)) in fast.iter().zip(&table).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "code {:#x}, scale {scale}: {a} vs {b}",
                    codes[i]
                );
            }
        }
    }

    #[test]
    fn bf16_rows_widen_exactly() {
        let src: Vec<u16> = (0..37)
            .map(|i| half::bf16::from_f32(i as f32 * -1.7).to_bits())
            .collect();
        let mut out = vec![0.0; src.len()];
        bf16_to_f32(&src, &mut out);
        for (o, &b) in out.iter().zip(&src) {
            assert_eq!(*o, half::bf16::from_bits(b).to_f32());
        }
    }
}
