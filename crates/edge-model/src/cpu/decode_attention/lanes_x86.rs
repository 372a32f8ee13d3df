//! The x86 vectors the decode-attention kernel is written over: [`F32x16`] (AVX-512)
//! and [`F32x8`] (AVX2 + FMA + F16C), with the three page formats read into f32 lanes.
//!
//! Every method is compiled with its level's features and needs them at run time,
//! hence `unsafe`; the kernel calls them only from functions compiled with the same
//! features, where they inline.

use super::Lanes;
use core::arch::x86_64::*;

/// Prefetches the cache line of `p` into L1 (a hint: it never faults, whatever `p`).
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
    // SAFETY: SSE is baseline on x86-64; a prefetch reads and writes nothing.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
}

/// The FP8 E4M3 → f16 trick, on 16-bit lanes holding the sign-extended codes:
/// sign-extending the byte puts the sign in bit 15 (and a copy in bit 14, cleared by
/// this mask) and, shifted left by 7, the exponent and mantissa in f16 position, so
/// the f16 is the E4M3 value times 2⁻⁸. Code 0x7F (NaN in E4M3) reads as a number: the
/// kernel is not used on pages that ever held a NaN.
const FP8_MASK: i16 = !0x4000;

/// 16 lanes, AVX-512.
#[derive(Clone, Copy)]
pub(super) struct F32x16(__m512);

/// 8 lanes, AVX2 + FMA + F16C.
#[derive(Clone, Copy)]
pub(super) struct F32x8(__m256);

impl Lanes for F32x16 {
    const LANES: usize = 16;
    const REGISTERS: usize = 32;

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn zero() -> Self {
        F32x16(_mm512_setzero_ps())
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn splat(x: f32) -> Self {
        F32x16(_mm512_set1_ps(x))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller gives 16 readable values.
        F32x16(unsafe { _mm512_loadu_ps(p) })
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn load_bf16(p: *const u16) -> Self {
        // SAFETY: 16 readable bf16 values are 32 bytes.
        let h = unsafe { _mm256_loadu_si256(p.cast()) };
        F32x16(_mm512_castsi512_ps(_mm512_slli_epi32::<16>(
            _mm512_cvtepu16_epi32(h),
        )))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn load_fp8(p: *const u8) -> Self {
        // SAFETY: 16 readable codes are 16 bytes.
        let w = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(p.cast()) });
        let h = _mm256_and_si256(_mm256_slli_epi16::<7>(w), _mm256_set1_epi16(FP8_MASK));
        F32x16(_mm512_cvtph_ps(h))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller gives 16 writable values.
        unsafe { _mm512_storeu_ps(p, self.0) }
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        F32x16(_mm512_fmadd_ps(self.0, b.0, c.0))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn add(self, b: Self) -> Self {
        F32x16(_mm512_add_ps(self.0, b.0))
    }

    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn sum(self) -> f32 {
        _mm512_reduce_add_ps(self.0)
    }

    /// 13 instructions.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    unsafe fn sum4(v: [Self; 4]) -> [f32; 4] {
        let [a, b, c, d] = v.map(|x| x.0);
        // Per 128-bit lane: [a₀+a₂, b₀+b₂, a₁+a₃, b₁+b₃], then for c, d.
        let ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
        let cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
        // Per 128-bit lane: [Σa, Σb, Σc, Σd] of that lane's four elements.
        let (ab, cd) = (_mm512_castps_pd(ab), _mm512_castps_pd(cd));
        let lo = _mm512_castpd_ps(_mm512_unpacklo_pd(ab, cd));
        let hi = _mm512_castpd_ps(_mm512_unpackhi_pd(ab, cd));
        let u = _mm512_add_ps(lo, hi);
        let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(u)));
        let u = _mm256_add_ps(_mm512_castps512_ps256(u), high);
        to_array(_mm_add_ps(
            _mm256_castps256_ps128(u),
            _mm256_extractf128_ps::<1>(u),
        ))
    }
}

impl Lanes for F32x8 {
    const LANES: usize = 8;
    const REGISTERS: usize = 16;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn zero() -> Self {
        F32x8(_mm256_setzero_ps())
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn splat(x: f32) -> Self {
        F32x8(_mm256_set1_ps(x))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller gives 8 readable values.
        F32x8(unsafe { _mm256_loadu_ps(p) })
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load_bf16(p: *const u16) -> Self {
        // SAFETY: 8 readable bf16 values are 16 bytes.
        let h = unsafe { _mm_loadu_si128(p.cast()) };
        F32x8(_mm256_castsi256_ps(_mm256_slli_epi32::<16>(
            _mm256_cvtepu16_epi32(h),
        )))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn load_fp8(p: *const u8) -> Self {
        // SAFETY: 8 readable codes are 8 bytes.
        let w = _mm_cvtepi8_epi16(unsafe { _mm_loadl_epi64(p.cast()) });
        let h = _mm_and_si128(_mm_slli_epi16::<7>(w), _mm_set1_epi16(FP8_MASK));
        F32x8(_mm256_cvtph_ps(h))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller gives 8 writable values.
        unsafe { _mm256_storeu_ps(p, self.0) }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        F32x8(_mm256_fmadd_ps(self.0, b.0, c.0))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn add(self, b: Self) -> Self {
        F32x8(_mm256_add_ps(self.0, b.0))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn sum(self) -> f32 {
        let s = _mm_add_ps(
            _mm256_castps256_ps128(self.0),
            _mm256_extractf128_ps::<1>(self.0),
        );
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
    }

    /// 9 instructions.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn sum4(v: [Self; 4]) -> [f32; 4] {
        let [a, b, c, d] = v.map(|x| x.0);
        // Per 128-bit lane: [a₀+a₂, b₀+b₂, a₁+a₃, b₁+b₃], then for c, d.
        let ab = _mm256_add_ps(_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
        let cd = _mm256_add_ps(_mm256_unpacklo_ps(c, d), _mm256_unpackhi_ps(c, d));
        // Per 128-bit lane: [Σa, Σb, Σc, Σd] of that lane's four elements.
        let (ab, cd) = (_mm256_castps_pd(ab), _mm256_castps_pd(cd));
        let lo = _mm256_castpd_ps(_mm256_unpacklo_pd(ab, cd));
        let hi = _mm256_castpd_ps(_mm256_unpackhi_pd(ab, cd));
        let u = _mm256_add_ps(lo, hi);
        to_array(_mm_add_ps(
            _mm256_castps256_ps128(u),
            _mm256_extractf128_ps::<1>(u),
        ))
    }
}

/// The four lanes of `v`.
#[inline(always)]
fn to_array(v: __m128) -> [f32; 4] {
    let mut four = [0.0f32; 4];
    // SAFETY: SSE is baseline on x86-64; `four` holds 4 floats.
    unsafe { _mm_storeu_ps(four.as_mut_ptr(), v) };
    four
}
