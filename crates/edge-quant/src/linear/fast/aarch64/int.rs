//! What the aarch64 integer kernels (W4A4 / W4A8 at `NeonDotprod` and `NeonI8mm`)
//! share: the `sdot` and `smmla` instructions, the element order of their activations
//! and decoded weights, NVFP4 nibble decoding, and the row tails.
//!
//! The order is [`A4_PERM`] = `EvenOdd(32)`: per 32 inputs (16 packed code bytes) the
//! 16 even inputs, then the 16 odd ones. A `vqtbl1q_s8` of the low nibbles of 16 code
//! bytes gives the even weights in that order and one of the high nibbles the odd ones,
//! with no zip; and `sdot` lane `i` of `evens · x_even + odds · x_odd` is then exactly
//! the sum over natural 8-input group `i` of the chunk, the unit the scales apply to.
//!
//! The weights are decoded as signed doubled values (`2·E2M1`, −12..=12): `sdot` and
//! `smmla` multiply signed bytes, so the `+12` offset of [`crate::linear::fast::Isa::decode_w4`]
//! and its correction are only needed where that contract is kept (`dot_a4`).

use super::super::Perm;
use super::super::portable::{self, e4m3_unit};
use core::arch::aarch64::*;
use core::arch::asm;

/// Inputs per chunk of the integer kernels: 16 code bytes, two NVFP4 blocks.
pub(super) const CHUNK: usize = 32;

/// Element order of the integer kernels' activations and decoded weights.
pub(super) const A4_PERM: Perm = Perm::EvenOdd(CHUNK);

/// `acc + Σ` of each 32-bit lane's four byte products (`sdot`).
#[inline]
#[target_feature(enable = "neon,dotprod")]
pub(super) fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `sdot` only reads and writes these registers; the target feature of this
    // function (proved by the caller's token) guarantees the instruction exists.
    unsafe {
        asm!(
            "sdot {0:v}.4s, {1:v}.16b, {2:v}.16b",
            inout(vreg) acc,
            in(vreg) a,
            in(vreg) b,
            options(pure, nomem, nostack),
        );
    }
    acc
}

/// `acc + A·Bᵀ` for the 2 × 8 signed byte matrices `A` (`a`: row 0 in bytes 0–7, row
/// 1 in bytes 8–15) and `B` (`b`, the same): lanes `[a0·b0, a0·b1, a1·b0, a1·b1]`
/// (`smmla`).
#[inline]
#[target_feature(enable = "neon,i8mm")]
pub(super) fn smmla(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: `smmla` only reads and writes these registers; the target feature of this
    // function (proved by the caller's token) guarantees the instruction exists.
    unsafe {
        asm!(
            "smmla {0:v}.4s, {1:v}.16b, {2:v}.16b",
            inout(vreg) acc,
            in(vreg) a,
            in(vreg) b,
            options(pure, nomem, nostack),
        );
    }
    acc
}

/// The table of signed doubled E2M1 values (`2·E2M1[q]`) for [`nibbles`].
#[inline(always)]
pub(super) fn doubled_table() -> int8x16_t {
    // SAFETY: the table holds 16 bytes.
    unsafe { vld1q_s8(crate::formats::e2m1::DOUBLED.as_ptr()) }
}

/// 16 code bytes as the doubled weights of their low nibbles and of their high ones
/// (`table` from [`doubled_table`], or any other 16-entry byte table).
#[inline(always)]
pub(super) fn nibbles(table: int8x16_t, v: uint8x16_t) -> (int8x16_t, int8x16_t) {
    // SAFETY: register-only NEON operations (NEON is the aarch64 baseline).
    unsafe {
        (
            vqtbl1q_s8(table, vandq_u8(v, vdupq_n_u8(0x0f))),
            vqtbl1q_s8(table, vshrq_n_u8::<4>(v)),
        )
    }
}

/// The four group scales `e4m3(SF) · 2⁻⁸` of chunk `c` of a row whose block scales are
/// `scales`: block `2c` for groups 0 and 1, block `2c + 1` for groups 2 and 3.
#[inline(always)]
pub(super) fn chunk_scales(scales: &[u8], c: usize) -> float32x4_t {
    let (a, b) = (e4m3_unit(scales[2 * c]), e4m3_unit(scales[2 * c + 1]));
    // SAFETY: register-only NEON operations (NEON is the aarch64 baseline).
    unsafe { vcombine_f32(vdup_n_f32(a), vdup_n_f32(b)) }
}

/// A row's last `codes.len()·2 < 32` inputs, which [`A4_PERM`] leaves in natural order,
/// against one token's codes and group scales there: `Σ_g wsc[g]·sfa[g]·Σ_{k∈g}
/// 2·E2M1[q_k]·qa[k]`, as the portable kernel computes it.
pub(super) fn tail_dot(codes: &[u8], scales: &[u8], qa: &[i8], sfa: &[f32]) -> f32 {
    let n = 2 * codes.len();
    debug_assert!(n < CHUNK && n.is_multiple_of(16));
    let (mut wq, mut wsc) = ([0u8; CHUNK], [0.0f32; CHUNK / 8]);
    let (wq, wsc) = (&mut wq[..n], &mut wsc[..n / 8]);
    portable::decode_w4(codes, &scales[..n / 16], wq, wsc);
    portable::dot_a4_groups(wq, wsc, &qa[..n], &sfa[..n / 8])
}

/// [`crate::linear::fast::Isa::decode_w4`] in [`A4_PERM`] order: per chunk the
/// `2·E2M1 + 12` bytes of the low nibbles, then of the high ones; the tail in natural
/// order.
pub(super) fn decode_w4(codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
    let n = wq.len();
    let chunks = n / CHUNK;
    assert!(codes.len() >= n / 2);
    // SAFETY: the table holds 16 bytes.
    let table = unsafe { vld1q_s8(portable::OFFSET_DOUBLED.as_ptr().cast()) };
    for c in 0..chunks {
        // SAFETY: chunk c < n/32 reads code bytes [16c, 16c + 16) (asserted n/2) and
        // writes bytes [32c, 32c + 32) of `wq` (n).
        unsafe {
            let (lo, hi) = nibbles(table, vld1q_u8(codes.as_ptr().add(16 * c)));
            let d = wq.as_mut_ptr().add(CHUNK * c).cast::<i8>();
            vst1q_s8(d, lo);
            vst1q_s8(d.add(16), hi);
        }
    }
    let done = CHUNK * chunks;
    portable::decode_w4_codes(&codes[done / 2..n / 2], &mut wq[done..]);
    portable::decode_w4_scales(scales, wsc);
}

/// [`crate::linear::fast::Isa::layout_a4_codes`] for [`A4_PERM`]: one de-interleaving
/// load (`ld2`) per chunk, the tail copied, the corrections in natural group order.
pub(super) fn layout_codes(nat: &[i8], qa: &mut [i8], negcorr: &mut [i32]) {
    let n = nat.len();
    let chunks = n / CHUNK;
    assert!(qa.len() >= n);
    for c in 0..chunks {
        // SAFETY: chunk c < n/32 reads bytes [32c, 32c + 32) of `nat` (n) and writes
        // the same range of `qa` (asserted at least n).
        unsafe {
            let v = vld2q_s8(nat.as_ptr().add(CHUNK * c));
            let d = qa.as_mut_ptr().add(CHUNK * c);
            vst1q_s8(d, v.0);
            vst1q_s8(d.add(16), v.1);
        }
    }
    let done = CHUNK * chunks;
    qa[done..n].copy_from_slice(&nat[done..]);
    super::super::a4_corrections(nat, negcorr);
}
