// Shared pieces of the tensor-core products (kernels/nvfp4/mma.cu, kernels/bf16/mma.cu):
// the bf16 mma.sync tile, the activation (B) fragment loads and the CTA's deterministic
// reduction and store. Included after formats.cuh by the sources that use it.
//
// Tiling common to both: a CTA of W warps owns EQ_MMA_ROWS (32) weight rows (two m16
// tiles) and TN = 8·NT tokens (NT n8 tiles); its warps split K into EQ_MMA_CHUNK-element
// chunks. In a chunk, lane (g = lane/4, q = lane%4) works on elements 32q..32q+31, and
// k-step s (0..7) gives the mma slot pair (2q, 2q+1) to elements 32q+4s+{0,1} and
// (2q+8, 2q+9) to 32q+4s+{2,3} (a sum over k does not depend on which k a slot holds as
// long as A and B agree): a lane's activations are 4 consecutive values of token g.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, .bf16): lane (g, q) holds A rows g (a0, a2)
// and g+8 (a1, a3), slots 2q..2q+1 (a0, a1) and 2q+8..2q+9 (a2, a3); B column (token) g,
// slots 2q..2q+1 (b0) and 2q+8..2q+9 (b1); C rows g (c0, c1) and g+8 (c2, c3), columns
// 2q and 2q+1. The lower-indexed element sits in the low half of a register.

#define EQ_MMA_ROWS 32
#define EQ_MMA_CHUNK 128
// Row stride of the reduction tile: 36 puts lane (g, q)'s stores in bank 8q + g.
#define EQ_MMA_RED_STRIDE 36

#ifndef EQ_HOST_EMULATION
// d += A · B for one m16n8k16 tile (bf16 inputs, f32 accumulators).
__device__ __forceinline__ void eq_mma_bf16_16816(float* d, const eq_u32* a, const eq_u32* b) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// The B fragment of k-step s: x[row][k .. k+4) as two bf16 pairs.
__device__ __forceinline__ void eq_mma_load_b(const eq_u16* p, eq_u32* b) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    b[0] = v.x;
    b[1] = v.y;
}

__device__ __forceinline__ void eq_mma_load_b(const float* p, eq_u32* b) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    b[0] = eq_f32_to_bf16_rne(v.x) | (eq_f32_to_bf16_rne(v.y) << 16);
    b[1] = eq_f32_to_bf16_rne(v.z) | (eq_f32_to_bf16_rne(v.w) << 16);
}

// The lane's weight rows (rr[m tile][row g, row g + 8]) and token rows (xr[n tile]) of
// the CTA's tile, and zeroed accumulators. Rows and tokens past the end read the last
// valid one and are never stored.
template <typename Act, int NT>
__device__ __forceinline__ void eq_mma_setup(eq_u32 (&rr)[2][2], const Act* (&xr)[NT],
                                             float (&acc)[2][NT][4], const Act* x, eq_u32 row0,
                                             eq_u32 t0, eq_u32 g, eq_u32 rows, eq_u32 cols,
                                             eq_u32 tokens) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            rr[i][h] = min(row0 + 16u * i + 8u * h + g, rows - 1u);
        }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
        xr[j] = x + (eq_u64)min(t0 + 8u * j + g, tokens - 1u) * cols;
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                acc[i][j][r] = 0.0f;
            }
        }
    }
}

// Sums the warps' partial tiles in warp order (deterministic) through `red` (shared,
// [W][8·NT][EQ_MMA_RED_STRIDE], token-major) and stores y[t, n] = sum · scale for the
// CTA's valid rows and tokens (row-contiguous per token).
template <int NT, int W>
__device__ __forceinline__ void eq_mma_store(float (*red)[8 * NT][EQ_MMA_RED_STRIDE],
                                             const float (&acc)[2][NT][4], float* __restrict__ y,
                                             float scale, eq_u32 row0, eq_u32 t0, eq_u32 rows,
                                             eq_u32 tokens) {
    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 warp = threadIdx.x >> 5;
    const eq_u32 g = lane >> 2;
    const eq_u32 q = lane & 3u;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const eq_u32 row = 16u * i + g + 8u * (r >> 1);
                const eq_u32 tok = 8u * j + 2u * q + (r & 1);
                red[warp][tok][row] = acc[i][j][r];
            }
        }
    }
    __syncthreads();
    for (eq_u32 idx = threadIdx.x; idx < 8u * NT * EQ_MMA_ROWS; idx += blockDim.x) {
        const eq_u32 tok = idx / EQ_MMA_ROWS;
        const eq_u32 row = idx % EQ_MMA_ROWS;
        float sum = red[0][tok][row];
#pragma unroll
        for (int w = 1; w < W; ++w) {
            sum += red[w][tok][row];
        }
        if (row0 + row < rows && t0 + tok < tokens) {
            y[(eq_u64)(t0 + tok) * rows + row0 + row] = sum * scale;
        }
    }
}
