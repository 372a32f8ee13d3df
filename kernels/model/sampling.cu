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

// ---------------------------------------------------------------------------------------
// Top-k candidates of each row, so that sampling downloads k values instead of the
// vocabulary: the k largest logits (NaN never chosen) in descending order, ties by the
// lower index, with their ids; the row's maximum and Σ exp((l − max) · inv_temp) over its
// non-NaN logits (l == max counts 1, as the CPU sampler keeps a +inf maximum finite), from
// which the host gets each candidate's probability under the full softmax and decides
// whether a top-p nucleus closes inside the candidates.
//
// Launch shape: one block of EQ_TOPK_THREADS per row; k ≤ EQ_TOPK_MAX. Outputs per row:
// vals, ids [rows, k] (entries past the row's count: id EQ_TOPK_NONE, value −inf),
// count [rows] (min(k, non-NaN logits)), max and sum [rows].
//
// Selection: an exact radix select of the k-th largest key (an order-preserving u32 of
// the float) in four 8-bit passes with a shared histogram; keys above it are gathered,
// the ties at it are taken in index order by one thread (rare for real logits), and a
// bitonic sort orders the k candidates.

#define EQ_TOPK_THREADS 256
#define EQ_TOPK_MAX 256
#define EQ_TOPK_NONE 0xffffffffu

// Order-preserving key of a float (larger value, larger key); NaN is 0, below every number.
__device__ __forceinline__ eq_u32 eq_topk_key(float v) {
    const eq_u32 b = __float_as_uint(v);
    if (v != v) {
        return 0u;
    }
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Whether candidate a comes before b: larger key, or equal and lower index.
__device__ __forceinline__ bool eq_topk_before(eq_u32 ka, eq_u32 ia, eq_u32 kb, eq_u32 ib) {
    return ka > kb || (ka == kb && ia < ib);
}

extern "C" __global__ void __launch_bounds__(EQ_TOPK_THREADS)
    eq_topk_f32(const float* __restrict__ logits, eq_u32 vocab, eq_u32 k, float inv_temp,
                float* __restrict__ vals, eq_u32* __restrict__ ids, eq_u32* __restrict__ count,
                float* __restrict__ row_max, float* __restrict__ row_sum) {
    __shared__ eq_u32 hist[256];
    __shared__ eq_u32 cand_key[EQ_TOPK_MAX];
    __shared__ eq_u32 cand_idx[EQ_TOPK_MAX];
    __shared__ float part[EQ_TOPK_THREADS];
    __shared__ eq_u32 shared_u[4];  // valid count, digit, remaining, gathered

    const float* row = logits + (eq_u64)blockIdx.x * vocab;
    const eq_u32 tid = threadIdx.x;
    if (tid == 0u) {
        shared_u[0] = 0u;
        shared_u[3] = 0u;
    }
    __syncthreads();
    eq_u32 mine = 0u;
    for (eq_u32 i = tid; i < vocab; i += blockDim.x) {
        mine += row[i] == row[i] ? 1u : 0u;
    }
    atomicAdd(&shared_u[0], mine);
    __syncthreads();
    const eq_u32 kk = min(k, shared_u[0]);

    // Radix select: the key of the kk-th largest, and how many of its ties to keep.
    eq_u32 prefix = 0u;
    eq_u32 mask = 0u;
    eq_u32 remaining = kk;
    for (int shift = 24; shift >= 0 && kk > 0u; shift -= 8) {
        hist[tid] = 0u;  // EQ_TOPK_THREADS == 256 bins
        __syncthreads();
        for (eq_u32 i = tid; i < vocab; i += blockDim.x) {
            const eq_u32 key = eq_topk_key(row[i]);
            if (key != 0u && (key & mask) == prefix) {
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
        }
        __syncthreads();
        if (tid == 0u) {
            eq_u32 above = 0u;
            eq_u32 b = 255u;
            while (above + hist[b] < remaining) {
                above += hist[b];
                --b;
            }
            shared_u[1] = b;
            shared_u[2] = remaining - above;
        }
        __syncthreads();
        prefix |= shared_u[1] << shift;
        mask |= 255u << shift;
        remaining = shared_u[2];
        __syncthreads();  // shared_u is rewritten next pass
    }
    const eq_u32 threshold = prefix;

    // Gather the keys above the threshold (kk − remaining of them), then its ties in
    // index order.
    for (eq_u32 i = tid; i < vocab && kk > 0u; i += blockDim.x) {
        const eq_u32 key = eq_topk_key(row[i]);
        if (key > threshold) {
            const eq_u32 at = atomicAdd(&shared_u[3], 1u);
            cand_key[at] = key;
            cand_idx[at] = i;
        }
    }
    __syncthreads();
    if (tid == 0u && kk > 0u) {
        eq_u32 at = shared_u[3];
        for (eq_u32 i = 0; i < vocab && at < kk; ++i) {
            if (eq_topk_key(row[i]) == threshold) {
                cand_key[at] = threshold;
                cand_idx[at] = i;
                ++at;
            }
        }
    }
    __syncthreads();

    // Bitonic sort of the candidates, padded to a power of two with entries that sort last.
    eq_u32 size = 1u;
    while (size < kk) {
        size <<= 1;
    }
    for (eq_u32 i = tid; i < size; i += blockDim.x) {
        if (i >= kk) {
            cand_key[i] = 0u;
            cand_idx[i] = EQ_TOPK_NONE;
        }
    }
    __syncthreads();
    for (eq_u32 len = 2u; len <= size; len <<= 1) {
        for (eq_u32 stride = len >> 1; stride > 0u; stride >>= 1) {
            for (eq_u32 i = tid; i < size; i += blockDim.x) {
                const eq_u32 j = i ^ stride;
                if (j > i) {
                    const bool first = (i & len) == 0u;  // this run sorts in output order
                    const bool ordered =
                        eq_topk_before(cand_key[i], cand_idx[i], cand_key[j], cand_idx[j]);
                    if (ordered != first) {
                        const eq_u32 tk = cand_key[i];
                        const eq_u32 ti = cand_idx[i];
                        cand_key[i] = cand_key[j];
                        cand_idx[i] = cand_idx[j];
                        cand_key[j] = tk;
                        cand_idx[j] = ti;
                    }
                }
            }
            __syncthreads();
        }
    }

    float* vout = vals + (eq_u64)blockIdx.x * k;
    eq_u32* iout = ids + (eq_u64)blockIdx.x * k;
    for (eq_u32 j = tid; j < k; j += blockDim.x) {
        vout[j] = j < kk ? row[cand_idx[j]] : __uint_as_float(0xff800000u);
        iout[j] = j < kk ? cand_idx[j] : EQ_TOPK_NONE;
    }

    // Softmax statistics over the whole row at the temperature (a fixed-order reduction).
    const float mx = kk > 0u ? row[cand_idx[0]] : 0.0f;
    float s = 0.0f;
    for (eq_u32 i = tid; i < vocab; i += blockDim.x) {
        const float v = row[i];
        if (v == v) {
            s += v == mx ? 1.0f : expf((v - mx) * inv_temp);
        }
    }
    part[tid] = s;
    __syncthreads();
    for (eq_u32 half = blockDim.x / 2u; half > 0u; half >>= 1) {
        if (tid < half) {
            part[tid] += part[tid + half];
        }
        __syncthreads();
    }
    if (tid == 0u) {
        count[blockIdx.x] = kk;
        row_max[blockIdx.x] = mx;
        row_sum[blockIdx.x] = part[0];
    }
}
