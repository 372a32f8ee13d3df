// On-device greedy choice: the index of the largest logit of each row, as
// crates/edge-model/src/logits.rs::argmax defines it (the first index on ties; NaN never
// wins; a row of NaN gives 0), so greedy decoding downloads one u32 per row instead of
// the vocabulary. Prepended by kernels/common/formats.cuh.
//
// Launch shape: one block of EQ_ARGMAX_THREADS per row (grid.x = rows).

#define EQ_ARGMAX_THREADS 256
#define EQ_ARGMAX_NONE 0xffffffffu

// Whether (v, i) beats (best, at): larger, or equal and earlier; NaN never beats.
__device__ __forceinline__ bool eq_argmax_better(float v, eq_u32 i, float best, eq_u32 at) {
    return v == v && (at == EQ_ARGMAX_NONE || v > best || (v == best && i < at));
}

extern "C" __global__ void __launch_bounds__(EQ_ARGMAX_THREADS)
    eq_argmax_f32(const float* __restrict__ logits, eq_u32* __restrict__ out, eq_u32 vocab) {
    __shared__ float best_v[EQ_ARGMAX_THREADS];
    __shared__ eq_u32 best_i[EQ_ARGMAX_THREADS];
    const float* row = logits + (eq_u64)blockIdx.x * vocab;
    float best = 0.0f;
    eq_u32 at = EQ_ARGMAX_NONE;
    for (eq_u32 i = threadIdx.x; i < vocab; i += blockDim.x) {
        const float v = row[i];
        if (eq_argmax_better(v, i, best, at)) {
            best = v;
            at = i;
        }
    }
    best_v[threadIdx.x] = best;
    best_i[threadIdx.x] = at;
    __syncthreads();
    for (eq_u32 half = blockDim.x / 2u; half > 0u; half >>= 1) {
        if (threadIdx.x < half) {
            const float v = best_v[threadIdx.x + half];
            const eq_u32 i = best_i[threadIdx.x + half];
            if (i != EQ_ARGMAX_NONE && eq_argmax_better(v, i, best_v[threadIdx.x], best_i[threadIdx.x])) {
                best_v[threadIdx.x] = v;
                best_i[threadIdx.x] = i;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0u) {
        out[blockIdx.x] = best_i[0] == EQ_ARGMAX_NONE ? 0u : best_i[0];
    }
}
