//! AVX2 bf16 rows for one token (the decode step's bf16 `lm_head` and other bf16
//! projections): the weight bytes are widened in registers, so each row is read once
//! instead of being decoded to an f32 buffer and read again.
//!
//! A 32-bit lane of 16 loaded weights holds elements `2i` (low half) and `2i + 1`
//! (high half): a 16-bit left shift makes the even element an f32, masking the low
//! half makes the odd one. The activations are permuted to match (`EvenOdd(16)`).

use super::super::Perm;
use super::avx2::{SPREAD_ROWS, hsum, spread_rows};
use core::arch::x86_64::*;

/// Bytes ahead in each row's stream (which continues into the next row) that the
/// rows prefetch into L1.
const PREFETCH: usize = 1024;

/// `out[r] = Σ_k w[r][k] · x[k]` for the `out.len()` rows of little-endian bf16 bytes
/// in `w` (`2·n_in` each), rows taken as [`spread_rows`] orders them.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bf16_rows_one_token(w: &[u8], n_in: usize, x: &[f32], out: &mut [f32]) {
    let mut xp = vec![0.0f32; n_in];
    Perm::EvenOdd(16).apply(&x[..n_in], &mut xp);
    let row_bytes = 2 * n_in;
    let row = |r: usize| &w[r * row_bytes..][..row_bytes];
    let (passes, rest) = spread_rows(out.len());
    for pass in passes {
        let dots = rows_dot::<SPREAD_ROWS>(pass.map(row), &xp);
        for (r, d) in pass.into_iter().zip(dots) {
            out[r] = d;
        }
    }
    for r in rest {
        out[r] = rows_dot([row(r)], &xp)[0];
    }
}

/// The dot products of `R` bf16 rows with the permuted activations `xp`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_dot<const R: usize>(rows: [&[u8]; R], xp: &[f32]) -> [f32; R] {
    let n = xp.len();
    let chunks = n / 16;
    let high = _mm256_set1_epi32(0xffff_0000_u32 as i32);
    let mut even = [_mm256_setzero_ps(); R];
    let mut odd = [_mm256_setzero_ps(); R];
    for c in 0..chunks {
        // SAFETY: chunk c < n/16 reads activations [16c, 16c + 16) (of n) and bytes
        // [32c, 32c + 32) of each row (2n); a prefetch is only a hint.
        unsafe {
            let xe = _mm256_loadu_ps(xp.as_ptr().add(16 * c));
            let xo = _mm256_loadu_ps(xp.as_ptr().add(16 * c + 8));
            for r in 0..R {
                let p = rows[r].as_ptr().add(32 * c);
                // One prefetch per 64-byte line.
                if c % 2 == 0 {
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH).cast());
                }
                let v = _mm256_loadu_si256(p.cast());
                let we = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
                let wo = _mm256_castsi256_ps(_mm256_and_si256(v, high));
                even[r] = _mm256_fmadd_ps(we, xe, even[r]);
                odd[r] = _mm256_fmadd_ps(wo, xo, odd[r]);
            }
        }
    }
    let done = 16 * chunks;
    let mut out = [0.0f32; R];
    for (r, o) in out.iter_mut().enumerate() {
        *o = hsum(_mm256_add_ps(even[r], odd[r]));
        for (b, &x) in rows[r][2 * done..].chunks_exact(2).zip(&xp[done..]) {
            *o += f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16) * x;
        }
    }
    out
}
