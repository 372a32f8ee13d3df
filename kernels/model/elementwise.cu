// The model's element-wise and per-row operations on f32 activations (row-major
// [rows, width]), as the CPU backend defines them (crates/edge-model/src/cpu/norm.rs and
// cpu/mod.rs). Prepended by kernels/common/formats.cuh.
//
// Launch shapes (the Rust wrappers in crates/edge-model/src/cuda/ops.rs):
//   element-wise (add, gates, concat, gather, embed): block EQ_EW_THREADS, grid-stride,
//     any grid;
//   per-row norms: one block of EQ_ROW_THREADS per row (grid.x = rows).

#define EQ_EW_THREADS 256
#define EQ_ROW_THREADS 256

__device__ __forceinline__ float eq_sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

__device__ __forceinline__ float eq_silu(float x) {
    return x * eq_sigmoid(x);
}

// Grid-stride loop over n items.
#define EQ_GRID_STRIDE(i, n)                                                             \
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n);              \
         i += (eq_u64)gridDim.x * blockDim.x)

// x += y.
extern "C" __global__ void eq_add_f32(float* __restrict__ x, const float* __restrict__ y,
                                      eq_u64 n) {
    EQ_GRID_STRIDE(i, n) {
        x[i] += y[i];
    }
}

// x ← silu(g) · x (SwiGLU).
extern "C" __global__ void eq_gate_silu_f32(const float* __restrict__ g, float* __restrict__ x,
                                            eq_u64 n) {
    EQ_GRID_STRIDE(i, n) {
        x[i] *= eq_silu(g[i]);
    }
}

// x ← sigmoid(g) · x (the attention output gate).
extern "C" __global__ void eq_gate_sigmoid_f32(const float* __restrict__ g,
                                               float* __restrict__ x, eq_u64 n) {
    EQ_GRID_STRIDE(i, n) {
        x[i] *= eq_sigmoid(g[i]);
    }
}

// out[r] = a[r] ++ b[r] for rows of width `width` each.
extern "C" __global__ void eq_concat_rows_f32(const float* __restrict__ a,
                                              const float* __restrict__ b,
                                              float* __restrict__ out, eq_u32 width, eq_u64 rows) {
    EQ_GRID_STRIDE(i, rows * 2u * width) {
        const eq_u64 r = i / (2u * width);
        const eq_u32 c = (eq_u32)(i % (2u * width));
        out[i] = c < width ? a[r * width + c] : b[r * width + c - width];
    }
}

// out[i] = x[idx[i]] for rows of width `width`.
extern "C" __global__ void eq_gather_rows_f32(const float* __restrict__ x,
                                              const eq_u32* __restrict__ idx,
                                              float* __restrict__ out, eq_u32 width, eq_u64 n) {
    EQ_GRID_STRIDE(i, n * width) {
        const eq_u64 r = i / width;
        out[i] = x[(eq_u64)idx[r] * width + i % width];
    }
}

// out[t] = table[ids[t]] from a bf16 table (raw bits) of rows of width `width`. The ids
// are checked against the vocabulary on the host.
extern "C" __global__ void eq_embed_bf16(const eq_u16* __restrict__ table,
                                         const eq_u32* __restrict__ ids,
                                         float* __restrict__ out, eq_u32 width, eq_u64 tokens) {
    EQ_GRID_STRIDE(i, tokens * width) {
        const eq_u64 t = i / width;
        out[i] = eq_bf16_to_f32(table[(eq_u64)ids[t] * width + i % width]);
    }
}

// Zero-centred RMSNorm of row blockIdx.x: out = x · rsqrt(mean(x²) + eps) · (1 + w).
extern "C" __global__ void __launch_bounds__(EQ_ROW_THREADS)
    eq_rms_norm_f32(const float* __restrict__ x, const float* __restrict__ w,
                    float* __restrict__ out, eq_u32 width, float eps) {
    __shared__ float part[EQ_ROW_THREADS / 32];
    const float* xr = x + (eq_u64)blockIdx.x * width;
    float* orow = out + (eq_u64)blockIdx.x * width;
    float ss = 0.0f;
    for (eq_u32 i = threadIdx.x; i < width; i += blockDim.x) {
        ss = fmaf(xr[i], xr[i], ss);
    }
    const float inv = 1.0f / sqrtf(eq_block_sum(ss, part) / (float)width + eps);
    for (eq_u32 i = threadIdx.x; i < width; i += blockDim.x) {
        orow[i] = xr[i] * (inv * (1.0f + w[i]));
    }
}

// The Gated DeltaNet output norm of head row blockIdx.x (width = the head's value dim),
// in place: o = o · rsqrt(mean(o²) + eps) · w · silu(z), with the plain weight.
extern "C" __global__ void __launch_bounds__(EQ_ROW_THREADS)
    eq_gated_rms_norm_f32(float* __restrict__ o, const float* __restrict__ z,
                          const float* __restrict__ w, eq_u32 width, float eps) {
    __shared__ float part[EQ_ROW_THREADS / 32];
    float* orow = o + (eq_u64)blockIdx.x * width;
    const float* zrow = z + (eq_u64)blockIdx.x * width;
    float ss = 0.0f;
    for (eq_u32 i = threadIdx.x; i < width; i += blockDim.x) {
        ss = fmaf(orow[i], orow[i], ss);
    }
    const float inv = 1.0f / sqrtf(eq_block_sum(ss, part) / (float)width + eps);
    for (eq_u32 i = threadIdx.x; i < width; i += blockDim.x) {
        orow[i] = orow[i] * inv * w[i] * eq_silu(zrow[i]);
    }
}
