// NVFP4 weight × f32/bf16 activation products: y[t, n] = Σ_k W[n, k] · x[t, k].
//
// Prepended by kernels/common/formats.cuh. W is an NVFP4 matrix [N, K] (packed codes
// [N, K/2], E4M3 block scales [N, K/16], f32 global scale g); x is [T, K] row-major in
// f32 or bf16 (raw u16 bits); y is [T, N] f32. K must be a multiple of 16.
//
// Everything dequantizes in registers, so these run on any sm_80+ GPU, Hopper included
// (no FP4 tensor cores needed). Two shapes:
//
//  * GEMV (T ≤ 4 per launch tile, the decode path): one warp per output row, lanes split
//    K into 32-element units (one 16-byte code load + two scale bytes per unit, the next
//    unit's load issued before the current one is consumed). Per 16-element block the
//    E2M1 values are dotted with x, and the block sum is multiplied by the E4M3 scale
//    once; the global scale multiplies the warp total. Activations come through the
//    read-only cache; weights are streamed with L1::no_allocate.
//
//  * Small-batch GEMM (T tiles of 8 or 16): a 256-thread CTA owns 32 rows (4 per warp)
//    and one token tile. K is walked in 512-element chunks: the CTA stages x[tile, chunk]
//    in shared memory as f32 (16-float groups padded to 20 so the 16-byte reads of 8
//    lanes hit distinct banks), then lane l takes NVFP4 block l of the chunk for its 4
//    rows, decodes 4 elements × 4 rows at a time with the block scale folded into the
//    decoded weight (exact: an E2M1 value times an E4M3 value fits in 6 significant
//    bits), and reuses each shared-memory read for 4 rows × 4 elements of FMAs. The next
//    chunk's codes are loaded before the current chunk is computed.
//
// Rounding: per lane f32 FMA accumulation, then a 32-lane butterfly sum; see
// crates/edge-quant/tests/cuda_parity.rs for the tolerance this gives vs the f64 oracle.

#define EQ_GEMV_WARPS 4
#define EQ_GEMM_WARPS 8
#define EQ_GEMM_ROWS_PER_WARP 4
#define EQ_GEMM_ROWS (EQ_GEMM_WARPS * EQ_GEMM_ROWS_PER_WARP)
#define EQ_GEMM_CHUNK 512
#define EQ_GEMM_GROUPS (EQ_GEMM_CHUNK / EQ_NVFP4_BLOCK)
#define EQ_GEMM_PAD 20

// Loads 16 consecutive activations starting at p (16-byte aligned for f32, 16-byte
// aligned for bf16) as f32.
__device__ __forceinline__ void eq_load_x16(const float* p, float* v) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float4 f = __ldg(p4 + i);
        v[4 * i + 0] = f.x;
        v[4 * i + 1] = f.y;
        v[4 * i + 2] = f.z;
        v[4 * i + 3] = f.w;
    }
}

__device__ __forceinline__ void eq_load_x16(const eq_u16* p, float* v) {
    const uint4* p4 = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        uint4 q = __ldg(p4 + i);
        eq_u32 w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            v[8 * i + 2 * j + 0] = __uint_as_float(w[j] << 16);
            v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
        }
    }
}

// Loads 4 consecutive activations (16-byte aligned for f32, 8-byte for bf16) as f32.
__device__ __forceinline__ float4 eq_load_x4(const float* p) {
    return __ldg(reinterpret_cast<const float4*>(p));
}

__device__ __forceinline__ float4 eq_load_x4(const eq_u16* p) {
    uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    return make_float4(__uint_as_float(q.x << 16), __uint_as_float(q.x & 0xffff0000u),
                       __uint_as_float(q.y << 16), __uint_as_float(q.y & 0xffff0000u));
}

// One 16-element NVFP4 block (codes in lo/hi, scale byte sf) against TT activation rows
// starting at column k: acc[t] += sf · Σ_i e2m1(q_i) · x[t][k + i].
template <typename Act, int TT>
__device__ __forceinline__ void eq_gemv_block(eq_u32 lo, eq_u32 hi, eq_u32 sf,
                                              const Act* const* xr, eq_u64 k, float* acc) {
    float w[16];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        w[i] = eq_e2m1_decode(lo >> (4 * i));
        w[8 + i] = eq_e2m1_decode(hi >> (4 * i));
    }
    float scale = eq_e4m3_decode(sf);
#pragma unroll
    for (int t = 0; t < TT; ++t) {
        float xv[16];
        eq_load_x16(xr[t] + k, xv);
        float b = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            b = fmaf(w[i], xv[i], b);
        }
        acc[t] = fmaf(b, scale, acc[t]);
    }
}

template <typename Act, int TT>
__device__ __forceinline__ void eq_nvfp4_gemv(const eq_u8* __restrict__ codes,
                                              const eq_u8* __restrict__ scales,
                                              const Act* __restrict__ x,
                                              float* __restrict__ y, float global_scale,
                                              eq_u32 rows, eq_u32 cols, eq_u32 tokens) {
    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 row = blockIdx.x * EQ_GEMV_WARPS + (threadIdx.x >> 5);
    if (row >= rows) {
        return;  // warp-uniform: the whole warp leaves together
    }
    const eq_u32 t0 = blockIdx.y * TT;
    const Act* xr[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) {
        // A partial tile recomputes the last token instead of reading past the end.
        eq_u32 tok = min(t0 + (eq_u32)t, tokens - 1u);
        xr[t] = x + (eq_u64)tok * cols;
    }
    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) {
        acc[t] = 0.0f;
    }

    const eq_u8* crow = codes + (eq_u64)row * (cols / 2u);
    const eq_u8* srow = scales + (eq_u64)row * (cols / 16u);
    if (cols % 32u == 0u) {
        // 32-element units: 16 code bytes (aligned: row offset cols/2 is a multiple of
        // 16) and 2 scale bytes (aligned: cols/16 is even).
        const eq_u32 units = cols / 32u;
        const eq_u16* s16 = reinterpret_cast<const eq_u16*>(srow);
        eq_u32 u = lane;
        uint4 q = make_uint4(0u, 0u, 0u, 0u);
        eq_u32 s = 0u;
        if (u < units) {
            q = eq_ld_stream_v4(crow + 16u * u);
            s = __ldg(s16 + u);
        }
        while (u < units) {
            const uint4 qc = q;
            const eq_u32 sc = s;
            const eq_u32 un = u + 32u;
            if (un < units) {
                q = eq_ld_stream_v4(crow + 16u * un);
                s = __ldg(s16 + un);
            }
            eq_gemv_block<Act, TT>(qc.x, qc.y, sc & 0xffu, xr, 32ull * u, acc);
            eq_gemv_block<Act, TT>(qc.z, qc.w, sc >> 8, xr, 32ull * u + 16ull, acc);
            u = un;
        }
    } else {
        // 16-element units: 8 code bytes and one scale byte.
        const eq_u32 units = cols / 16u;
        eq_u32 u = lane;
        uint2 q = make_uint2(0u, 0u);
        eq_u32 s = 0u;
        if (u < units) {
            q = eq_ld_stream_v2(crow + 8u * u);
            s = __ldg(srow + u);
        }
        while (u < units) {
            const uint2 qc = q;
            const eq_u32 sc = s;
            const eq_u32 un = u + 32u;
            if (un < units) {
                q = eq_ld_stream_v2(crow + 8u * un);
                s = __ldg(srow + un);
            }
            eq_gemv_block<Act, TT>(qc.x, qc.y, sc, xr, 16ull * u, acc);
            u = un;
        }
    }

#pragma unroll
    for (int t = 0; t < TT; ++t) {
        float total = eq_warp_sum(acc[t]);
        if (lane == 0u && t0 + (eq_u32)t < tokens) {
            y[(eq_u64)(t0 + t) * rows + row] = total * global_scale;
        }
    }
}

// Stages x[t0 .. t0+TT, k0 .. k0+kc] into shared memory as f32, padded groups of 16.
// Tokens past the end are zero-filled.
template <typename Act, int TT>
__device__ __forceinline__ void eq_gemm_stage_x(float (*xs)[EQ_GEMM_GROUPS][EQ_GEMM_PAD],
                                                const Act* __restrict__ x, eq_u32 cols,
                                                eq_u32 tokens, eq_u32 t0, eq_u32 k0,
                                                eq_u32 kc) {
    const eq_u32 quads = kc / 4u;  // kc is a multiple of 16
    for (eq_u32 j = threadIdx.x; j < TT * quads; j += blockDim.x) {
        const eq_u32 t = j / quads;
        const eq_u32 k = (j % quads) * 4u;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (t0 + t < tokens) {
            v = eq_load_x4(x + (eq_u64)(t0 + t) * cols + k0 + k);
        }
        *reinterpret_cast<float4*>(&xs[t][k / 16u][k % 16u]) = v;
    }
}

template <typename Act, int TT>
__device__ __forceinline__ void eq_nvfp4_gemm(const eq_u8* __restrict__ codes,
                                              const eq_u8* __restrict__ scales,
                                              const Act* __restrict__ x,
                                              float* __restrict__ y, float global_scale,
                                              eq_u32 rows, eq_u32 cols, eq_u32 tokens) {
    constexpr int R = EQ_GEMM_ROWS_PER_WARP;
    __shared__ __align__(16) float xs[TT][EQ_GEMM_GROUPS][EQ_GEMM_PAD];

    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 row0 = blockIdx.x * EQ_GEMM_ROWS + (threadIdx.x >> 5) * R;
    const eq_u32 t0 = blockIdx.y * TT;

    // Rows past the end load (valid) row rows-1 and are never stored: no divergence.
    // Row indices, not pointers, are kept live across the K loop (fewer registers).
    eq_u32 rr[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        rr[r] = min(row0 + (eq_u32)r, rows - 1u);
    }
    const eq_u32 code_stride = cols / 2u;
    const eq_u32 scale_stride = cols / 16u;
    float acc[R][TT];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            acc[r][t] = 0.0f;
        }
    }

    // Codes of this lane's block in the current chunk (prefetched one chunk ahead).
    uint2 q[R];
    eq_u32 s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        q[r] = make_uint2(0u, 0u);
        s[r] = 0x38u;
        if (16u * lane < cols) {
            q[r] = eq_ld_stream_v2(codes + (eq_u64)rr[r] * code_stride + 8u * lane);
            s[r] = __ldg(scales + (eq_u64)rr[r] * scale_stride + lane);
        }
    }

    for (eq_u32 k0 = 0; k0 < cols; k0 += EQ_GEMM_CHUNK) {
        const eq_u32 kc = min((eq_u32)EQ_GEMM_CHUNK, cols - k0);
        __syncthreads();  // the previous chunk's reads of xs are done
        eq_gemm_stage_x<Act, TT>(xs, x, cols, tokens, t0, k0, kc);
        __syncthreads();

        uint2 qn[R];
        eq_u32 sn[R];
        const eq_u32 kn = k0 + EQ_GEMM_CHUNK + 16u * lane;  // next chunk, this lane
#pragma unroll
        for (int r = 0; r < R; ++r) {
            qn[r] = make_uint2(0u, 0u);
            sn[r] = 0x38u;
            if (kn < cols) {
                qn[r] = eq_ld_stream_v2(codes + (eq_u64)rr[r] * code_stride + kn / 2u);
                sn[r] = __ldg(scales + (eq_u64)rr[r] * scale_stride + kn / 16u);
            }
        }

        if (16u * lane < kc) {
            float sf[R];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                sf[r] = eq_e4m3_decode(s[r]);
            }
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                // Elements 4g .. 4g+3 of the block, scaled weights for R rows.
                float w[R][4];
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const eq_u32 word = (g < 2 ? q[r].x : q[r].y) >> (16 * (g & 1));
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        w[r][e] = eq_e2m1_decode(word >> (4 * e)) * sf[r];
                    }
                }
#pragma unroll
                for (int t = 0; t < TT; ++t) {
                    const float4 xv = *reinterpret_cast<const float4*>(&xs[t][lane][4 * g]);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        float a = acc[r][t];
                        a = fmaf(w[r][0], xv.x, a);
                        a = fmaf(w[r][1], xv.y, a);
                        a = fmaf(w[r][2], xv.z, a);
                        a = fmaf(w[r][3], xv.w, a);
                        acc[r][t] = a;
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
            q[r] = qn[r];
            s[r] = sn[r];
        }
    }

#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            const float total = eq_warp_sum(acc[r][t]);
            if (lane == 0u && row0 + r < rows && t0 + t < tokens) {
                y[(eq_u64)(t0 + t) * rows + row0 + r] = total * global_scale;
            }
        }
    }
}

// Entry points. Launch shapes (checked by the Rust wrappers):
//   gemv_*_tN: block (32·EQ_GEMV_WARPS), grid (ceil(N / EQ_GEMV_WARPS), ceil(T / N))
//   gemm_*_tN: block (32·EQ_GEMM_WARPS), grid (ceil(N / EQ_GEMM_ROWS),  ceil(T / N))
#define EQ_GEMV_ENTRY(NAME, ACT, TT)                                                      \
    extern "C" __global__ void __launch_bounds__(32 * EQ_GEMV_WARPS)                      \
        NAME(const eq_u8* __restrict__ codes, const eq_u8* __restrict__ scales,           \
             const ACT* __restrict__ x, float* __restrict__ y, float global_scale,        \
             eq_u32 rows, eq_u32 cols, eq_u32 tokens) {                                   \
        eq_nvfp4_gemv<ACT, TT>(codes, scales, x, y, global_scale, rows, cols, tokens);    \
    }

#define EQ_GEMM_ENTRY(NAME, ACT, TT)                                                      \
    extern "C" __global__ void __launch_bounds__(32 * EQ_GEMM_WARPS)                      \
        NAME(const eq_u8* __restrict__ codes, const eq_u8* __restrict__ scales,           \
             const ACT* __restrict__ x, float* __restrict__ y, float global_scale,        \
             eq_u32 rows, eq_u32 cols, eq_u32 tokens) {                                   \
        eq_nvfp4_gemm<ACT, TT>(codes, scales, x, y, global_scale, rows, cols, tokens);    \
    }

EQ_GEMV_ENTRY(eq_nvfp4_gemv_f32_t1, float, 1)
EQ_GEMV_ENTRY(eq_nvfp4_gemv_f32_t2, float, 2)
EQ_GEMV_ENTRY(eq_nvfp4_gemv_f32_t4, float, 4)
EQ_GEMM_ENTRY(eq_nvfp4_gemm_f32_t8, float, 8)
EQ_GEMM_ENTRY(eq_nvfp4_gemm_f32_t16, float, 16)
EQ_GEMV_ENTRY(eq_nvfp4_gemv_bf16_t1, eq_u16, 1)
EQ_GEMV_ENTRY(eq_nvfp4_gemv_bf16_t2, eq_u16, 2)
EQ_GEMV_ENTRY(eq_nvfp4_gemv_bf16_t4, eq_u16, 4)
EQ_GEMM_ENTRY(eq_nvfp4_gemm_bf16_t8, eq_u16, 8)
EQ_GEMM_ENTRY(eq_nvfp4_gemm_bf16_t16, eq_u16, 16)
