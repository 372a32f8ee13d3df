// NVFP4 weight × f32/bf16 activation products on tensor cores:
// y[t, n] = Σ_k W[n, k] · x[t, k], for any number of tokens (tiles of 8 to 64), sm_80+.
//
// Prepended by kernels/common/formats.cuh and kernels/common/mma.cuh (the mma tile, the
// activation loads, the reduction and the shared tiling). Operands as in gemv.cu: W is an
// NVFP4 matrix [N, K] (packed codes [N, K/2], E4M3 block scales [N, K/16], f32 global
// scale g); x is [T, K] row-major in f32 or bf16 (raw u16 bits); y is [T, N] f32.
// K % 16 == 0.
//
// Numerics. mma.sync m16n8k16 with bf16 inputs and f32 accumulation. The weights are
// dequantized in registers to bf16 with the block scale folded in, which is exact (an
// E2M1 value times an E4M3 scale has at most 6 significant bits); f32 activations are
// rounded to bf16 (nearest even); the global scale multiplies the f32 result. That is the
// CPU path's bf16-activation numerics, up to the order of the f32 sums.
//
// Tiling (common/mma.cuh): warp w takes the 128-element chunks w, w+W, w+2W, ... In a
// chunk, lane (g, q) loads 16 code bytes (elements 32q..32q+31, two NVFP4 blocks) of rows
// g and g+8 of each m tile, the next chunk's before it computes this one: with the
// shared slot assignment a lane's weights come from its own 16 bytes (no shuffle).

#ifndef EQ_HOST_EMULATION
// Element-wise product of two bf16 pairs (a fused multiply-add with −0, so the product
// keeps its sign; exact for the products made here).
__device__ __forceinline__ eq_u32 eq_bf16x2_mul(eq_u32 a, eq_u32 b) {
    eq_u32 d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
    return d;
}
#endif

// Four E2M1 codes (bits 4i..4i+3 of h hold element i) as two bf16 pairs, elements (0, 1)
// in p0 and (2, 3) in p1, each multiplied by the bf16 pair s2. Two byte permutes look the
// magnitudes' high and low bytes up in 8-entry tables held in the permute's operands;
// the sign bits are moved into place.
__device__ __forceinline__ void eq_e2m1x4_bf16(eq_u32 h, eq_u32 s2, eq_u32& p0, eq_u32& p1) {
    const eq_u32 sel = h & 0x7777u;
    // bf16 of 0, 0.5, 1, 1.5, 2, 3, 4, 6: high bytes 00 3F 3F 3F 40 40 40 40,
    // low bytes 00 00 80 C0 00 40 80 C0.
    const eq_u32 hi = __byte_perm(0x3f3f3f00u, 0x40404040u, sel);
    const eq_u32 lo = __byte_perm(0xc0800000u, 0xc0804000u, sel);
    const eq_u32 v0 =
        __byte_perm(lo, hi, 0x5140u) | ((h << 12) & 0x8000u) | ((h << 24) & 0x80000000u);
    const eq_u32 v1 =
        __byte_perm(lo, hi, 0x7362u) | ((h << 4) & 0x8000u) | ((h << 16) & 0x80000000u);
    p0 = eq_bf16x2_mul(v0, s2);
    p1 = eq_bf16x2_mul(v1, s2);
}

// An E4M3 scale byte as a bf16 pair (exact: E4M3 has 4 significant bits).
__device__ __forceinline__ eq_u32 eq_e4m3_bf16x2(eq_u32 byte) {
    const eq_u32 b = __float_as_uint(eq_e4m3_decode(byte)) >> 16;
    return b | (b << 16);
}

// One lane's weights of one chunk: 32 codes (two blocks) and their two scales per row.
struct EqMmaCodes {
    uint4 q[2][2];   // [m tile][row g, row g + 8]
    eq_u32 s[2][2];  // scale bytes: block 0 in bits 0..7, block 1 in bits 8..15
};

// Loads this lane's codes of chunk c (kc = elements of the chunk, 16..128). Blocks past
// kc read as code 0 (value 0) with scale 0x38 (1.0).
__device__ __forceinline__ void eq_mma_load_a(EqMmaCodes& out, const eq_u8* __restrict__ codes,
                                              const eq_u8* __restrict__ scales,
                                              const eq_u32 (&rr)[2][2], eq_u32 cols, eq_u32 c,
                                              eq_u32 kc, eq_u32 q) {
    const eq_u32 e0 = 32u * q;  // this lane's first element in the chunk
    const eq_u64 k = (eq_u64)c * EQ_MMA_CHUNK + e0;
    const bool wide = (cols % 32u == 0u) && e0 + 32u <= kc;  // 16-byte aligned full pair
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const eq_u8* crow = codes + (eq_u64)rr[i][h] * (cols / 2u);
            const eq_u8* srow = scales + (eq_u64)rr[i][h] * (cols / 16u);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            eq_u32 s = 0x3838u;
            if (wide) {
                v = eq_ld_stream_v4(crow + k / 2u);
                s = __ldg(reinterpret_cast<const eq_u16*>(srow + k / 16u));
            } else {
                if (e0 + 16u <= kc) {
                    const uint2 a = eq_ld_stream_v2(crow + k / 2u);
                    v.x = a.x;
                    v.y = a.y;
                    s = (s & 0xff00u) | __ldg(srow + k / 16u);
                }
                if (e0 + 32u <= kc) {
                    const uint2 b = eq_ld_stream_v2(crow + k / 2u + 8u);
                    v.z = b.x;
                    v.w = b.y;
                    s = (s & 0x00ffu) | ((eq_u32)__ldg(srow + k / 16u + 1u) << 8);
                }
            }
            out.q[i][h] = v;
            out.s[i][h] = s;
        }
    }
}

// acc += this lane's share of W[chunk] · x[chunk]ᵀ for the CTA's 32 rows and TN tokens.
template <typename Act, int NT>
__device__ __forceinline__ void eq_mma_chunk(const EqMmaCodes& w, const Act* const* xr,
                                             eq_u32 c, eq_u32 kc, eq_u32 q,
                                             float (&acc)[2][NT][4]) {
    const eq_u32 e0 = 32u * q;
    const eq_u64 k0 = (eq_u64)c * EQ_MMA_CHUNK + e0;
    eq_u32 s2[2][2][2];  // [m tile][row][block]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            s2[i][h][0] = eq_e4m3_bf16x2(w.s[i][h] & 0xffu);
            s2[i][h][1] = eq_e4m3_bf16x2(w.s[i][h] >> 8);
        }
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const eq_u32 e = e0 + 4u * (eq_u32)s;  // this step's first element in the chunk
        eq_u32 b[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            b[j][0] = 0u;
            b[j][1] = 0u;
            if (e < kc) {  // a tail chunk's missing blocks (their weights are 0 too)
                eq_mma_load_b(xr[j] + k0 + 4u * (eq_u32)s, b[j]);
            }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            eq_u32 a[4];
            const int word = s / 2;
            const int shift = 16 * (s & 1);
            const eq_u32 lo_row[4] = {w.q[i][0].x, w.q[i][0].y, w.q[i][0].z, w.q[i][0].w};
            const eq_u32 hi_row[4] = {w.q[i][1].x, w.q[i][1].y, w.q[i][1].z, w.q[i][1].w};
            eq_e2m1x4_bf16(lo_row[word] >> shift, s2[i][0][s / 4], a[0], a[2]);
            eq_e2m1x4_bf16(hi_row[word] >> shift, s2[i][1][s / 4], a[1], a[3]);
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                eq_mma_bf16_16816(acc[i][j], a, b[j]);
            }
        }
    }
}

template <typename Act, int TN, int W>
__device__ __forceinline__ void eq_nvfp4_mma(const eq_u8* __restrict__ codes,
                                             const eq_u8* __restrict__ scales,
                                             const Act* __restrict__ x, float* __restrict__ y,
                                             float global_scale, eq_u32 rows, eq_u32 cols,
                                             eq_u32 tokens) {
    constexpr int NT = TN / 8;
    __shared__ __align__(16) float red[W][TN][EQ_MMA_RED_STRIDE];

    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 warp = threadIdx.x >> 5;
    const eq_u32 g = lane >> 2;
    const eq_u32 q = lane & 3u;
    const eq_u32 row0 = blockIdx.x * EQ_MMA_ROWS;
    const eq_u32 t0 = blockIdx.y * TN;

    eq_u32 rr[2][2];
    const Act* xr[NT];
    float acc[2][NT][4];
    eq_mma_setup<Act, NT>(rr, xr, acc, x, row0, t0, g, rows, cols, tokens);

    const eq_u32 chunks = (cols + EQ_MMA_CHUNK - 1u) / EQ_MMA_CHUNK;
    // Elements of chunk i (the last one may be shorter).
    const auto chunk_len = [cols](eq_u32 i) {
        return min((eq_u32)EQ_MMA_CHUNK, cols - i * EQ_MMA_CHUNK);
    };
    eq_u32 c = warp;
    EqMmaCodes cur;
    if (c < chunks) {
        eq_mma_load_a(cur, codes, scales, rr, cols, c, chunk_len(c), q);
    }
    while (c < chunks) {
        const eq_u32 cn = c + W;
        const bool more = cn < chunks;
        EqMmaCodes next;
        if (more) {
            eq_mma_load_a(next, codes, scales, rr, cols, cn, chunk_len(cn), q);
        }
        eq_mma_chunk<Act, NT>(cur, xr, c, chunk_len(c), q, acc);
        if (more) {  // else `next` was never loaded: copying it would read undefined values
            cur = next;
        }
        c = cn;
    }

    eq_mma_store<NT, W>(red, acc, y, global_scale, row0, t0, rows, tokens);
}

// Entry points. Launch shape (checked by the Rust wrapper): block (32·W), grid
// (ceil(N / EQ_MMA_ROWS), ceil(T / TN)).
#define EQ_MMA_ENTRY(NAME, ACT, TN, W)                                                    \
    extern "C" __global__ void __launch_bounds__(32 * W)                                  \
        NAME(const eq_u8* __restrict__ codes, const eq_u8* __restrict__ scales,           \
             const ACT* __restrict__ x, float* __restrict__ y, float global_scale,        \
             eq_u32 rows, eq_u32 cols, eq_u32 tokens) {                                   \
        eq_nvfp4_mma<ACT, TN, W>(codes, scales, x, y, global_scale, rows, cols, tokens);  \
    }

EQ_MMA_ENTRY(eq_nvfp4_mma_f32_t8, float, 8, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_f32_t16, float, 16, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_f32_t32, float, 32, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_f32_t64, float, 64, 4)
EQ_MMA_ENTRY(eq_nvfp4_mma_bf16_t8, eq_u16, 8, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_bf16_t16, eq_u16, 16, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_bf16_t32, eq_u16, 32, 8)
EQ_MMA_ENTRY(eq_nvfp4_mma_bf16_t64, eq_u16, 64, 4)
