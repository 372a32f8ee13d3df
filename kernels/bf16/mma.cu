// bf16 weight × f32/bf16 activation products on tensor cores:
// y[t, n] = Σ_k W[n, k] · x[t, k], for any number of tokens (tiles of 8 to 64), sm_80+.
//
// Prepended by kernels/common/formats.cuh and kernels/common/mma.cuh (the mma tile, the
// activation loads, the reduction and the shared tiling). W is [N, K] bf16 (raw u16
// bits), x is [T, K] row-major in f32 or bf16, y is [T, N] f32. K % 16 == 0.
//
// Numerics: mma.sync m16n8k16 with bf16 inputs and f32 accumulation; f32 activations are
// rounded to bf16 (nearest even). That is the CPU path's bf16-activation numerics up to
// the order of the f32 sums.
//
// Tiling (common/mma.cuh): warp w takes the 128-element chunks w, w+W, w+2W, ... At
// k-step s of a chunk, lane (g, q) loads 4 consecutive weights (8 bytes) at elements
// 32q+4s..32q+4s+3 of rows g and g+8 of each m tile, one step ahead of the step it
// computes: with the shared slot assignment they are its A fragment as they stand.

// One k-step's weights of this lane: [m tile][row g, row g + 8] as two bf16 pairs.
struct EqBf16Step {
    uint2 w[2][2];
};

// Loads k-step s of chunk c (kc elements; steps past kc read zeros).
__device__ __forceinline__ void eq_bf16_load_step(EqBf16Step& out, const eq_u16* __restrict__ w,
                                                  const eq_u32 (&rr)[2][2], eq_u32 cols,
                                                  eq_u32 c, eq_u32 kc, eq_u32 q, eq_u32 s) {
    const eq_u32 e = 32u * q + 4u * s;
    const eq_u64 k = (eq_u64)c * EQ_MMA_CHUNK + e;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            out.w[i][h] = e < kc ? eq_ld_stream_v2(w + (eq_u64)rr[i][h] * cols + k)
                                 : make_uint2(0u, 0u);
        }
    }
}

template <typename Act, int TN, int W>
__device__ __forceinline__ void eq_bf16_mma(const eq_u16* __restrict__ w,
                                            const Act* __restrict__ x, float* __restrict__ y,
                                            eq_u32 rows, eq_u32 cols, eq_u32 tokens) {
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
    for (eq_u32 c = warp; c < chunks; c += W) {
        const eq_u32 kc = min((eq_u32)EQ_MMA_CHUNK, cols - c * EQ_MMA_CHUNK);
        const eq_u64 k0 = (eq_u64)c * EQ_MMA_CHUNK + 32u * q;
        EqBf16Step cur;
        eq_bf16_load_step(cur, w, rr, cols, c, kc, q, 0u);
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            EqBf16Step next{};
            if (s + 1 < 8) {
                eq_bf16_load_step(next, w, rr, cols, c, kc, q, (eq_u32)s + 1u);
            }
            const eq_u32 e = 32u * q + 4u * (eq_u32)s;
            eq_u32 b[NT][2];
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                b[j][0] = 0u;
                b[j][1] = 0u;
                if (e < kc) {
                    eq_mma_load_b(xr[j] + k0 + 4u * (eq_u32)s, b[j]);
                }
            }
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const eq_u32 a[4] = {cur.w[i][0].x, cur.w[i][1].x, cur.w[i][0].y,
                                     cur.w[i][1].y};
#pragma unroll
                for (int j = 0; j < NT; ++j) {
                    eq_mma_bf16_16816(acc[i][j], a, b[j]);
                }
            }
            cur = next;
        }
    }
    eq_mma_store<NT, W>(red, acc, y, 1.0f, row0, t0, rows, tokens);
}

// Entry points. Launch shape (checked by the Rust wrapper): block (32·W), grid
// (ceil(N / EQ_MMA_ROWS), ceil(T / TN)).
#define EQ_BF16_MMA_ENTRY(NAME, ACT, TN, W)                                                \
    extern "C" __global__ void __launch_bounds__(32 * W)                                   \
        NAME(const eq_u16* __restrict__ w, const ACT* __restrict__ x, float* __restrict__ y, \
             eq_u32 rows, eq_u32 cols, eq_u32 tokens) {                                    \
        eq_bf16_mma<ACT, TN, W>(w, x, y, rows, cols, tokens);                              \
    }

EQ_BF16_MMA_ENTRY(eq_bf16_mma_f32_t8, float, 8, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_f32_t16, float, 16, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_f32_t32, float, 32, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_f32_t64, float, 64, 4)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_bf16_t8, eq_u16, 8, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_bf16_t16, eq_u16, 16, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_bf16_t32, eq_u16, 32, 8)
EQ_BF16_MMA_ENTRY(eq_bf16_mma_bf16_t64, eq_u16, 64, 4)
