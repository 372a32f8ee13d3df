//! The AVX2 GEMM micro-kernel for CPUs without a bf16 dot-product instruction: each
//! packed bf16 pair is widened to two f32 vectors (a shift and a mask, both exact) and
//! multiplied in with FMAs. Sixteen registers cannot hold the whole [`MR`] × [`NR`]
//! tile, so it runs as six 4-token × 16-output blocks of eight accumulators; every
//! block re-reads its slice of the L2-resident weight panel.

use super::super::gemm::{Bf16Kernel, MR, NR};
use super::Avx2;
use core::arch::x86_64::*;

/// Tokens per register block.
const TOKENS: usize = 4;
/// Outputs per register block (two 8-lane vectors).
const OUTPUTS: usize = 16;

impl Bf16Kernel for Avx2 {
    fn tile(self, a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
        // SAFETY: the token exists only if `detect` found AVX2, FMA and F16C.
        unsafe { tile(a, b, c, accumulate) }
    }
}

/// The first (low-half) bf16 of each 32-bit lane as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn low(v: __m256i) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v))
}

/// The second (high-half) bf16 of each 32-bit lane as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn high(v: __m256i) -> __m256 {
    _mm256_castsi256_ps(_mm256_and_si256(
        v,
        _mm256_set1_epi32(0xffff_0000u32 as i32),
    ))
}

#[target_feature(enable = "avx2,fma,f16c")]
fn tile(a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
    let pairs = a.len() / MR;
    assert!(c.len() >= MR * NR && a.len() == pairs * MR && b.len() >= pairs * NR);
    for i0 in (0..MR).step_by(TOKENS) {
        for j0 in (0..NR).step_by(OUTPUTS) {
            let mut acc = [[_mm256_setzero_ps(); 2]; TOKENS];
            for p in 0..pairs {
                // SAFETY: p < pairs, so `b` holds u32s [p·NR + j0, p·NR + j0 + 16)
                // (j0 + 16 <= NR) and `a` holds [p·MR + i0, p·MR + i0 + 4) (i0 + 4 <= MR).
                unsafe {
                    let bp = b.as_ptr().add(p * NR + j0);
                    let (b0, b1) = (
                        _mm256_loadu_si256(bp.cast()),
                        _mm256_loadu_si256(bp.add(8).cast()),
                    );
                    let w = [low(b0), high(b0), low(b1), high(b1)];
                    let ap = a.as_ptr().add(p * MR + i0);
                    for (t, acc_t) in acc.iter_mut().enumerate() {
                        let av = _mm256_set1_epi32(*ap.add(t) as i32);
                        let (al, ah) = (low(av), high(av));
                        acc_t[0] = _mm256_fmadd_ps(ah, w[1], _mm256_fmadd_ps(al, w[0], acc_t[0]));
                        acc_t[1] = _mm256_fmadd_ps(ah, w[3], _mm256_fmadd_ps(al, w[2], acc_t[1]));
                    }
                }
            }
            for (t, acc_t) in acc.iter().enumerate() {
                let row = &mut c[(i0 + t) * NR + j0..][..OUTPUTS];
                for (h, &v) in acc_t.iter().enumerate() {
                    let p = row[8 * h..8 * h + 8].as_mut_ptr();
                    // SAFETY: `p` points at 8 floats of `row` (bounds checked by the slice).
                    unsafe {
                        let v = if accumulate {
                            _mm256_add_ps(_mm256_loadu_ps(p), v)
                        } else {
                            v
                        };
                        _mm256_storeu_ps(p, v);
                    }
                }
            }
        }
    }
}
