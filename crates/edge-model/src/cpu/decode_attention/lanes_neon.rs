//! The aarch64 vector the decode-attention kernel is written over: [`F32x4x2`], two
//! NEON `float32x4_t` used as one 8-lane vector, with the three page formats read into
//! f32 lanes.
//!
//! Why a pair rather than one `float32x4_t`: the tiles are sized from lanes and
//! registers, so 8 lanes in 16 pairs give the same tiles (as many accumulators, as
//! many columns per step) as 4 lanes in 32 registers, but the narrow page formats
//! decode in whole 64- and 128-bit loads: 8 FP8 codes are one 8-byte load, one sign
//! extension, shift and mask and two `fcvtl` for both halves (4 codes per vector would
//! take a lane load and the same four steps for half the values), and 8 bf16 values
//! one 16-byte load and two `ushll`. Counted in the compiled inner loops (1 to 8 heads,
//! against a one-`float32x4_t` build of the same kernel): FP8 steps take 8-40% fewer
//! instructions per FMA, f32 and bf16 steps within a few instructions either way.
//!
//! NEON is baseline on aarch64, and so is the f16 → f32 conversion (`fcvtl`) FP8
//! rows go through (shared with [`crate::cpu::kv_rows`], whose docs say why it is
//! inline assembly).

use super::Lanes;
use crate::cpu::kv_rows::neon::{f16_high_to_f32, f16_low_to_f32};
use core::arch::aarch64::*;
use core::arch::asm;

/// Prefetches the cache line of `p` into L1 (a hint: it never faults, whatever `p`).
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
    // SAFETY: `prfm` is a hint; it reads and writes nothing architecturally and never
    // faults.
    unsafe { asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags)) }
}

/// The FP8 E4M3 → f16 trick, on 16-bit lanes holding the sign-extended codes:
/// sign-extending the byte puts the sign in bit 15 (and a copy in bit 14, cleared by
/// this mask) and, shifted left by 7, the exponent and mantissa in f16 position, so
/// the f16 is the E4M3 value times 2⁻⁸.
const FP8_MASK: i16 = !0x4000;

/// 8 lanes as two NEON vectors (low lanes first).
#[derive(Clone, Copy)]
pub(super) struct F32x4x2(float32x4_t, float32x4_t);

impl Lanes for F32x4x2 {
    const LANES: usize = 8;
    /// 32 NEON registers hold 16 pairs.
    const REGISTERS: usize = 16;

    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: NEON is baseline on aarch64 (so for every method below).
        unsafe { F32x4x2(vdupq_n_f32(0.0), vdupq_n_f32(0.0)) }
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: NEON.
        let v = unsafe { vdupq_n_f32(x) };
        F32x4x2(v, v)
    }

    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: NEON; the caller gives 8 readable values.
        unsafe { F32x4x2(vld1q_f32(p), vld1q_f32(p.add(4))) }
    }

    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> Self {
        // SAFETY: NEON; 8 readable bf16 values are 16 bytes.
        unsafe {
            let h = vld1q_u16(p);
            F32x4x2(
                vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h))),
                vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h)),
            )
        }
    }

    #[inline(always)]
    unsafe fn load_fp8(p: *const u8) -> Self {
        // SAFETY: NEON; 8 readable codes are 8 bytes.
        let h = unsafe {
            let w = vmovl_s8(vld1_s8(p.cast()));
            vandq_s16(vshlq_n_s16::<7>(w), vdupq_n_s16(FP8_MASK))
        };
        F32x4x2(f16_low_to_f32(h), f16_high_to_f32(h))
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: NEON; the caller gives 8 writable values.
        unsafe {
            vst1q_f32(p, self.0);
            vst1q_f32(p.add(4), self.1);
        }
    }

    #[inline(always)]
    unsafe fn fma(self, b: Self, c: Self) -> Self {
        // SAFETY: NEON.
        unsafe { F32x4x2(vfmaq_f32(c.0, self.0, b.0), vfmaq_f32(c.1, self.1, b.1)) }
    }

    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        // SAFETY: NEON.
        unsafe { F32x4x2(vaddq_f32(self.0, b.0), vaddq_f32(self.1, b.1)) }
    }

    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        // SAFETY: NEON.
        unsafe { vaddvq_f32(vaddq_f32(self.0, self.1)) }
    }

    /// 7 instructions: the halves added, then three pairwise adds.
    #[inline(always)]
    unsafe fn sum4(v: [Self; 4]) -> [f32; 4] {
        let mut four = [0.0f32; 4];
        // SAFETY: NEON; `four` holds 4 floats.
        unsafe {
            let [a, b, c, d] = v.map(|x| vaddq_f32(x.0, x.1));
            // [a₀+a₁, a₂+a₃, b₀+b₁, b₂+b₃], then for c, d; then [Σa, Σb, Σc, Σd].
            let s = vpaddq_f32(vpaddq_f32(a, b), vpaddq_f32(c, d));
            vst1q_f32(four.as_mut_ptr(), s);
        }
        four
    }
}
