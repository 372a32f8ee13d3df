//! The AVX-512 BF16 GEMM micro-kernel: `vdpbf16ps` multiplies 16 lanes of bf16 pairs
//! and adds both products into f32 accumulators, 32 multiply-adds per instruction (twice
//! an f32 FMA). The tile is [`MR`] tokens × [`NR`] outputs: 24 accumulator registers,
//! three weight loads and eight broadcast activation pairs per input pair.

use super::super::gemm::{Bf16Kernel, MR, NR};
use super::Avx512Bf16;
use core::arch::x86_64::*;

impl Bf16Kernel for Avx512Bf16 {
    fn tile(self, a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
        // SAFETY: the token exists only if detection found AVX-512 (F among them) and BF16.
        unsafe { tile(a, b, c, accumulate) }
    }
}

/// Reinterprets 32 packed bf16 values.
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
fn bh(v: __m512i) -> __m512bh {
    // SAFETY: both are 64-byte plain vector types; every bit pattern is valid for both.
    unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn tile(a: &[u32], b: &[u32], c: &mut [f32], accumulate: bool) {
    assert!(c.len() >= MR * NR && a.len() / MR == b.len() / NR);
    let mut acc = [[_mm512_setzero_ps(); 3]; MR];
    for (ap, bp) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        // SAFETY: `bp` holds NR = 48 u32s, so the three 64-byte loads stay inside it.
        let bv = [0, 16, 32].map(|j| bh(unsafe { _mm512_loadu_si512(bp[j..].as_ptr().cast()) }));
        for (acc_i, &av) in acc.iter_mut().zip(ap) {
            let av = bh(_mm512_set1_epi32(av as i32));
            for (acc_ij, &bj) in acc_i.iter_mut().zip(&bv) {
                *acc_ij = _mm512_dpbf16_ps(*acc_ij, av, bj);
            }
        }
    }
    for (acc_i, ci) in acc.iter().zip(c.chunks_exact_mut(NR)) {
        for (j, &v) in acc_i.iter().enumerate() {
            let p = ci[16 * j..16 * j + 16].as_mut_ptr();
            // SAFETY: `p` points at 16 floats of `ci` (bounds checked by the slice).
            unsafe {
                let v = if accumulate {
                    _mm512_add_ps(_mm512_loadu_ps(p), v)
                } else {
                    v
                };
                _mm512_storeu_ps(p, v);
            }
        }
    }
}
