// Shared device code for edge-quant's CUDA kernels: integer types and software
// encoders/decoders for the E2M1 (FP4) and E4M3 (FP8 "fn") element formats.
//
// NVRTC compiles these kernels with no include paths, so every kernel source is this
// header concatenated with one .cu file (see crates/edge-quant/src/cuda/sources.rs).
// Nothing here includes a system header.
//
// Every encoder is software and mirrors the CPU code in
// crates/edge-quant/src/formats/{e2m1,e4m3,mod}.rs operation for operation, so GPU and CPU
// produce identical bytes. Pre-Blackwell GPUs (sm_80, sm_89, sm_90) have no
// cvt.*.e2m1x2 instruction, and the e4m3 cvt would only cover sm_89+, so none is used.
// Kernels are compiled with IEEE f32 semantics (--ftz=false --prec-div=true, see
// edge-core KernelCache): correctly rounded division, denormals kept.
// (No `#pragma once`: the header is concatenated, never #included.)

typedef unsigned char eq_u8;
typedef unsigned short eq_u16;
typedef unsigned int eq_u32;
typedef unsigned long long eq_u64;

// Elements per NVFP4 block scale.
#define EQ_NVFP4_BLOCK 16

// ---------------------------------------------------------------------------------------
// E2M1: 1 sign, 2 exponent (bias 1), 1 mantissa bit. Values ±{0, .5, 1, 1.5, 2, 3, 4, 6}.
// ---------------------------------------------------------------------------------------

// Encodes with round-to-nearest-even on the magnitude code and saturation at ±6, exactly
// as formats::e2m1::encode: sign from x < 0 (so a tiny negative gives 0x8, −0), NaN → 7.
__device__ __forceinline__ eq_u32 eq_e2m1_encode(float x) {
    eq_u32 sign = x < 0.0f ? 0x8u : 0u;
    float a = fabsf(x);
    eq_u32 mag;
    if (a != a) {
        mag = 7u;
    } else if (a <= 0.25f) {
        mag = 0u;
    } else if (a < 0.75f) {
        mag = 1u;
    } else if (a <= 1.25f) {
        mag = 2u;
    } else if (a < 1.75f) {
        mag = 3u;
    } else if (a <= 2.5f) {
        mag = 4u;
    } else if (a < 3.5f) {
        mag = 5u;
    } else if (a <= 5.0f) {
        mag = 6u;
    } else {
        mag = 7u;
    }
    return sign | mag;
}

// Decodes the low nibble of `code` exactly (code 8 gives −0.0).
//
// Bit placement: the 3 magnitude bits go to f32 bits 24..22, i.e. the low two exponent
// bits and the top mantissa bit. As an f32 that is 2^(e−127)·(1+m/2) for e > 0 and the
// denormal m·2^−127 for e = 0, so multiplying by 2^126 (exact: a power of two, result
// normal) gives 2^(e−1)·(1+m/2) and m·0.5 — the E2M1 value. No table, no branch.
__device__ __forceinline__ float eq_e2m1_decode(eq_u32 code) {
    eq_u32 bits = ((code & 0x8u) << 28) | ((code & 0x7u) << 22);
    return __uint_as_float(bits) * 0x1p126f;
}

// ---------------------------------------------------------------------------------------
// E4M3 ("fn"): bias 7, no infinities, NaN = S.1111.111, max 448, min subnormal 2^−9.
// ---------------------------------------------------------------------------------------

// Round half to even of a non-negative finite value, as formats::round_half_even.
__device__ __forceinline__ float eq_round_half_even(float x) {
    float fl = floorf(x);
    float frac = x - fl;
    if (frac > 0.5f || (frac == 0.5f && fmodf(fl, 2.0f) != 0.0f)) {
        return fl + 1.0f;
    }
    return fl;
}

// Encodes a normal-range positive magnitude, rounding the f32 mantissa to nearest-even,
// as formats::encode_normal(a, 3, 7). Returns the code without sign.
__device__ __forceinline__ eq_u32 eq_e4m3_encode_normal(float a) {
    eq_u32 bits = __float_as_uint(a);
    const eq_u32 drop = 20u;
    const eq_u32 half = (1u << (drop - 1u)) - 1u;
    eq_u32 rounded = bits + half + ((bits >> drop) & 1u);
    int exp = (int)((rounded >> 23) & 0xffu) - 127 + 7;
    eq_u32 mant = (rounded >> drop) & 0x7u;
    return ((eq_u32)exp << 3) | mant;
}

// Encodes with round-to-nearest-even and saturation (±448 for finite overflow and ±Inf),
// NaN → 0x7F, exactly as formats::e4m3::encode.
__device__ __forceinline__ eq_u32 eq_e4m3_encode(float x) {
    if (x != x) {
        return 0x7fu;
    }
    eq_u32 sign = (__float_as_uint(x) >> 31) ? 0x80u : 0u;
    float a = fabsf(x);
    eq_u32 mag;
    if (a >= 448.0f) {
        mag = 0x7eu;
    } else if (a < 0x1p-6f) {
        // Subnormal: units of 2^−9. A result of 8 is exactly the smallest normal (0x08).
        mag = (eq_u32)eq_round_half_even(a * 512.0f);
    } else {
        mag = eq_e4m3_encode_normal(a);
    }
    return sign | mag;
}

// Decodes one E4M3 byte exactly (0x7F/0xFF give NaN, 0x80 gives −0.0).
//
// Bit placement as for E2M1: the 7 magnitude bits go to f32 bits 26..20, which reads as
// 2^(e−127)·(1+m/8) (or the denormal m·2^−129 for e = 0); × 2^120 gives the E4M3 value.
__device__ __forceinline__ float eq_e4m3_decode(eq_u32 b) {
    b &= 0xffu;
    if ((b & 0x7fu) == 0x7fu) {
        return __uint_as_float(0x7fc00000u | ((b & 0x80u) << 24));
    }
    eq_u32 bits = ((b & 0x80u) << 24) | ((b & 0x7fu) << 20);
    return __uint_as_float(bits) * 0x1p120f;
}

// ---------------------------------------------------------------------------------------
// bf16 and small helpers.
// ---------------------------------------------------------------------------------------

// bf16 bits to f32 (exact).
__device__ __forceinline__ float eq_bf16_to_f32(eq_u16 b) {
    return __uint_as_float(((eq_u32)b) << 16);
}

// f32 to bf16 bits, round to nearest even (NaN stays NaN, quieted, as half::bf16 does).
__device__ __forceinline__ eq_u32 eq_f32_to_bf16_rne(float f) {
    const eq_u32 u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// Sum over the 32 lanes of a warp; every lane gets the total.
__device__ __forceinline__ float eq_warp_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, off);
    }
    return v;
}

// Sum of v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the same value (the warps' sums added in warp order). `part` is shared scratch of one
// float per warp; the block must reach every call.
__device__ __forceinline__ float eq_block_sum(float v, float* part) {
    v = eq_warp_sum(v);
    __syncthreads();  // part is free (a previous call's readers are done)
    if ((threadIdx.x & 31u) == 0u) {
        part[threadIdx.x >> 5] = v;
    }
    __syncthreads();
    float total = 0.0f;
    for (eq_u32 w = 0; w < blockDim.x / 32u; ++w) {
        total += part[w];
    }
    return total;
}

// Maximum over the 32 lanes of a warp; every lane gets it.
__device__ __forceinline__ float eq_warp_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    }
    return v;
}

// 16-byte streaming load that does not allocate in L1 (weights are read once; this keeps
// L1 for the activations, which every row re-reads). The host emulator
// (kernels/host_emulation) defines EQ_HOST_EMULATION and supplies plain loads instead.
#ifndef EQ_HOST_EMULATION
__device__ __forceinline__ uint4 eq_ld_stream_v4(const void* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

// 8-byte variant of eq_ld_stream_v4.
__device__ __forceinline__ uint2 eq_ld_stream_v2(const void* p) {
    uint2 r;
    asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
        : "=r"(r.x), "=r"(r.y)
        : "l"(p));
    return r;
}
#endif
