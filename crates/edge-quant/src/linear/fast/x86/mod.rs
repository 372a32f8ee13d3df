//! x86-64 kernel families: AVX2 (+FMA, F16C) and AVX-512 (F/BW/VL/VNNI), selected at
//! run time by the level of [`edge_core::simd`].
//!
//! Every kernel is a `#[target_feature]` function; the [`Avx2`], [`Avx512`] and
//! [`Avx512Bf16`] tokens of [`edge_core::simd`] can only be built after detection found
//! their features, which is what makes the calls below sound.

mod avx2;
mod avx2_bf16;
mod avx2_int;
mod avx2_int_gemm;
mod avx512;
mod avx512_int;
mod bf16_gemm;
mod bf16_gemv;
mod f32_gemm;
mod w4a8_gemm;

pub(crate) use bf16_gemv::{Bf16Gemv, MAX_TOKENS as GEMV_MAX_TOKENS};
pub(crate) use edge_core::simd::{Avx2, Avx512, Avx512Bf16};

use super::{A4Act, A4Kind, ColumnBand, Isa, Nvfp4Rows, Perm, a4_rows_into_by_tile};

/// The W4A8 prompt-GEMM methods of [`Isa`] for a token with a
/// [`w4a8_gemm::ChunkKernel`].
macro_rules! w4a8_gemm_methods {
    () => {
        fn a4_writes_columns(self, act: &A4Act, n_in: usize, tokens: usize) -> bool {
            w4a8_gemm_runs(act, n_in, tokens)
        }

        fn a4_rows_into(
            self,
            w: Nvfp4Rows<'_>,
            act: &A4Act,
            scale: f32,
            band: &mut ColumnBand<'_>,
        ) {
            w4a8_rows_into(self, w, act, scale, band);
        }
    };
}

/// Implements [`Isa`] for a token type by forwarding to a kernel module whose functions
/// carry the matching `#[target_feature]`s.
macro_rules! forward_isa {
    ($token:ty, $module:ident, $nvfp4_perm:expr, $a4_perm:expr, $a4_rows:path
        $(, { $($extra:item)* })?) => {
        impl Isa for $token {
            const NVFP4_PERM: Perm = $nvfp4_perm;
            const A4_PERM: Perm = $a4_perm;

            fn dot(self, w: &[f32], xs: &[f32], stride: usize, acc: &mut [f32]) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::dot(w, xs, stride, acc) }
            }

            fn dot2(self, w0: &[f32], w1: &[f32], x: &[f32]) -> [f32; 2] {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::dot2(w0, w1, x) }
            }

            fn decode_bf16(self, src: &[u8], dst: &mut [f32]) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::decode_bf16(src, dst) }
            }

            fn decode_fp8(self, src: &[u8], dst: &mut [f32]) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::decode_fp8(src, dst) }
            }

            fn decode_nvfp4(self, codes: &[u8], scales: &[u8], dst: &mut [f32]) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::decode_nvfp4(codes, scales, dst) }
            }

            fn nvfp4_rows(
                self,
                codes: &[u8],
                scales: &[u8],
                n_in: usize,
                xs: &[f32],
                tokens: usize,
                out: &mut [f32],
                buf: &mut [f32],
            ) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::nvfp4_rows(codes, scales, n_in, xs, tokens, out, buf) }
            }

            fn decode_w4(self, codes: &[u8], scales: &[u8], wq: &mut [u8], wsc: &mut [f32]) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::decode_w4(codes, scales, wq, wsc) }
            }

            fn a4_rows(
                self,
                codes: &[u8],
                scales: &[u8],
                n_in: usize,
                act: &A4Act,
                tokens: usize,
                out: &mut [f32],
            ) {
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $a4_rows(self, codes, scales, n_in, act, tokens, out) }
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
                // SAFETY: the token exists only if detection found the kernel's features.
                unsafe { $module::dot_a4(wq, wsc, qa, sfa, negcorr, stride, gstride, acc) }
            }

            $($($extra)*)?
        }
    };
}

forward_isa!(
    Avx2,
    avx2,
    Perm::EvenOdd(64),
    Perm::EvenOdd(64),
    avx2_int::a4_rows,
    {
        fn pack_a4(self, act: &mut A4Act, n_in: usize, tokens: usize) {
            // SAFETY (both calls): the token exists only if detection found the kernel's
            // features.
            if tokens < avx2_int::GEMM_MIN_TOKENS {
                act.packed = unsafe { avx2_int::pack_tokens(act, n_in, tokens) };
            } else if tokens >= avx2_int::GEMM_MIN_TOKENS && act.kind == A4Kind::Int8 {
                act.packed = w4a8_gemm::pack(self, act, n_in, tokens);
            } else if tokens >= avx2_int::GEMM_MIN_TOKENS {
                act.packed = unsafe { avx2_int_gemm::pack(act, n_in, tokens) };
            }
        }

        w4a8_gemm_methods!();

        fn bf16_rows_one_token(self, w: &[u8], n_in: usize, x: &[f32], out: &mut [f32]) -> bool {
            // SAFETY: the token exists only if detection found the kernel's features.
            unsafe { avx2_bf16::bf16_rows_one_token(w, n_in, x, out) };
            true
        }

        fn layout_a4_codes(self, nat: &[i8], qa: &mut [i8], negcorr: &mut [i32]) {
            // SAFETY: the token exists only if detection found the kernel's features.
            unsafe { avx2_int::layout_codes(nat, qa, negcorr) }
        }

        fn transpose8x8(self, src: &[f32], src_stride: usize, dst: &mut [f32], dst_stride: usize) {
            // SAFETY: the token exists only if detection found the kernel's features.
            unsafe { avx2::transpose8x8(src, src_stride, dst, dst_stride) }
        }
    }
);
forward_isa!(
    Avx512,
    avx512,
    Perm::Nibble16x8,
    Perm::EvenOdd(128),
    avx512_int::a4_rows,
    {
        // Decode steps (up to 4 tokens) take the register kernels, which read the
        // activations in their own packed order; W4A8 prompts take the VNNI kernel of
        // the integer-scale GEMM (it reads the natural-order codes, so the ISA's own
        // code order does not matter).
        fn pack_a4(self, act: &mut A4Act, n_in: usize, tokens: usize) {
            if tokens <= avx512_int::MAX_TOKENS {
                act.packed = avx512_int::pack_tokens(act, n_in, tokens);
            } else if tokens >= avx2_int::GEMM_MIN_TOKENS && act.kind == A4Kind::Int8 {
                act.packed = w4a8_gemm::pack(self, act, n_in, tokens);
            }
        }

        w4a8_gemm_methods!();
    }
);

/// Whether the W4A8 prompt GEMM runs on `act` (see [`Isa::a4_writes_columns`]).
fn w4a8_gemm_runs(act: &A4Act, n_in: usize, tokens: usize) -> bool {
    tokens >= avx2_int::GEMM_MIN_TOKENS && w4a8_gemm::can_run(act, n_in, tokens)
}

/// [`Isa::a4_rows_into`] of the ISAs with a W4A8 GEMM kernel: the GEMM where it runs,
/// else the tile default.
fn w4a8_rows_into<I: Isa + w4a8_gemm::ChunkKernel>(
    isa: I,
    w: Nvfp4Rows<'_>,
    act: &A4Act,
    scale: f32,
    band: &mut ColumnBand<'_>,
) {
    if !w4a8_gemm_runs(act, w.n_in, band.rows()) {
        return a4_rows_into_by_tile(isa, w, act, scale, band);
    }
    w4a8_gemm::gemm(isa, isa, w, act, scale, band)
}
