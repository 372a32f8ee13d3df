// Attention of query rows over the paged KV cache, split along the sequence ("flash
// decoding"), as the CPU backend's attend computes it: softmax(q·kᵀ · scale) · v over the
// cached rows each query row sees, with the cache in FP8 E4M3 (codes × the layer's k/v
// scale), bf16 or f32. One query row is a decode step, a prompt row or a token-tree node:
// query row s sees cache rows 0 .. lens[s] − 1 of its sequence (page-table row
// span_of[s]), and also row lens[s] + o for every bit o set in masks[s] (a tree node's
// visible tree rows past the committed end; 0 for a causal row, which has
// lens = position + 1).
// Prepended by kernels/common/formats.cuh.
//
// Cache layout (edge_kvcache::memory::HostKv, one layer): keys and values each
// [pages, kv_heads, block, head_dim]; a sequence's cache row r lives in page
// table[span_of[s] · max_pages + r / block], row r % block.
//
// Pass 1, eq_attn_rows_<kv>: grid (kv_heads, query rows, splits), block EQ_ATTN_THREADS. A
// CTA takes rows [split · split_rows, (split + 1) · split_rows) ∩ [0, end) (end = lens[s]
// plus the extent of the mask) for the `group` query heads of its KV head (GQA: query
// head kv·group + g reads KV head kv), skipping the rows the mask hides. Each warp
// takes every EQ_ATTN_WARPS-th row: lane l holds elements [l·E, (l+1)·E) of the row
// (E = head_dim / 32), dots them with each query head (warp sum), and keeps an online
// softmax (max m, sum l, weighted values) per query head. The warps' states are merged in
// shared memory and the CTA writes its partial (m, l, acc[head_dim]) per query head.
// Pass 2, eq_attn_combine: grid (heads, query rows), block head_dim threads: merges the
// splits (a split that saw no row has m = −inf and adds nothing).
//
// Entry points per cache type and head_dim (32, 64, 128, 256); group at most
// EQ_ATTN_MAX_GROUP (checked by the wrapper).

#define EQ_ATTN_THREADS 128
#define EQ_ATTN_WARPS (EQ_ATTN_THREADS / 32)
#define EQ_ATTN_MAX_DIM 256
#define EQ_ATTN_MAX_GROUP 8
#define EQ_ATTN_NEG_INF __uint_as_float(0xff800000u)

// E consecutive cached values as f32 (FP8 codes times the layer's scale, exactly as the
// CPU decodes them).
template <int E>
__device__ __forceinline__ void eq_attn_load(const eq_u8* p, float scale, float* out) {
#pragma unroll
    for (int i = 0; i < E; ++i) {
        out[i] = eq_e4m3_decode(p[i]) * scale;
    }
}

template <int E>
__device__ __forceinline__ void eq_attn_load(const eq_u16* p, float, float* out) {
#pragma unroll
    for (int i = 0; i < E; ++i) {
        out[i] = eq_bf16_to_f32(p[i]);
    }
}

template <int E>
__device__ __forceinline__ void eq_attn_load(const float* p, float, float* out) {
#pragma unroll
    for (int i = 0; i < E; ++i) {
        out[i] = p[i];
    }
}

// E = head_dim / 32: the elements of a row each lane holds.
template <typename Kv, int E>
__device__ __forceinline__ void eq_attn_rows(
    const float* __restrict__ q, const eq_u32* __restrict__ table,
    const eq_u32* __restrict__ span_of, const eq_u32* __restrict__ lens,
    const eq_u64* __restrict__ masks, const Kv* __restrict__ keys, const Kv* __restrict__ values, float k_scale, float v_scale,
    float softmax_scale, float* __restrict__ part_m, float* __restrict__ part_l,
    float* __restrict__ part_acc, eq_u32 kv_heads, eq_u32 group, eq_u32 block,
    eq_u32 max_pages, eq_u32 split_rows) {
    constexpr eq_u32 dim = 32u * E;
    __shared__ float qs[EQ_ATTN_MAX_GROUP][dim];
    __shared__ float wm[EQ_ATTN_WARPS][EQ_ATTN_MAX_GROUP];
    __shared__ float wl[EQ_ATTN_WARPS][EQ_ATTN_MAX_GROUP];
    __shared__ float wacc[EQ_ATTN_WARPS][EQ_ATTN_MAX_GROUP][dim];

    const eq_u32 kv = blockIdx.x;
    const eq_u32 s = blockIdx.y;
    const eq_u32 split = blockIdx.z;
    const eq_u32 splits = gridDim.z;
    const eq_u32 heads = kv_heads * group;
    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 warp = threadIdx.x >> 5;

    for (eq_u32 i = threadIdx.x; i < group * dim; i += blockDim.x) {
        qs[i / dim][i % dim] = q[((eq_u64)s * heads + kv * group) * dim + i];
    }
    __syncthreads();

    float m[EQ_ATTN_MAX_GROUP];
    float l[EQ_ATTN_MAX_GROUP];
    float acc[EQ_ATTN_MAX_GROUP][E];
#pragma unroll
    for (int g = 0; g < EQ_ATTN_MAX_GROUP; ++g) {
        m[g] = EQ_ATTN_NEG_INF;
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) {
            acc[g][i] = 0.0f;
        }
    }

    const eq_u32 len = lens[s];
    const eq_u64 mask = masks[s];
    const eq_u32 end = mask == 0ull ? len : len + 64u - (eq_u32)__clzll((long long)mask);
    const eq_u32* pages = table + (eq_u64)span_of[s] * max_pages;
    const eq_u32 r0 = split * split_rows;
    const eq_u32 r1 = min(end, r0 + split_rows);
    for (eq_u32 r = r0 + warp; r < r1; r += EQ_ATTN_WARPS) {
        if (r >= len && ((mask >> (r - len)) & 1ull) == 0ull) {
            continue;  // a tree row this node does not see (uniform across the warp)
        }
        const eq_u32 page = pages[r / block];
        const eq_u64 at = (((eq_u64)page * kv_heads + kv) * block + r % block) * dim + lane * E;
        float kr[E];
        float vr[E];
        eq_attn_load<E>(keys + at, k_scale, kr);
        eq_attn_load<E>(values + at, v_scale, vr);
#pragma unroll
        for (int g = 0; g < EQ_ATTN_MAX_GROUP; ++g) {
            if ((eq_u32)g < group) {
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < E; ++i) {
                    dot = fmaf(qs[g][lane * E + i], kr[i], dot);
                }
                const float score = eq_warp_sum(dot) * softmax_scale;
                const float mn = fmaxf(m[g], score);
                const float old = expf(m[g] - mn);  // 0 on the first row (m = −inf)
                const float w = expf(score - mn);
                l[g] = l[g] * old + w;
#pragma unroll
                for (int i = 0; i < E; ++i) {
                    acc[g][i] = fmaf(w, vr[i], acc[g][i] * old);
                }
                m[g] = mn;
            }
        }
    }

    // Merge the warps' states, then write this split's partial per query head.
#pragma unroll
    for (int g = 0; g < EQ_ATTN_MAX_GROUP; ++g) {
        if ((eq_u32)g < group) {
            if (lane == 0u) {
                wm[warp][g] = m[g];
                wl[warp][g] = l[g];
            }
#pragma unroll
            for (int i = 0; i < E; ++i) {
                wacc[warp][g][lane * E + i] = acc[g][i];
            }
        }
    }
    __syncthreads();
    for (eq_u32 i = threadIdx.x; i < group * dim; i += blockDim.x) {
        const eq_u32 g = i / dim;
        const eq_u32 d = i % dim;
        float mx = EQ_ATTN_NEG_INF;
        for (eq_u32 w = 0; w < EQ_ATTN_WARPS; ++w) {
            mx = fmaxf(mx, wm[w][g]);
        }
        float lsum = 0.0f;
        float a = 0.0f;
        if (mx != EQ_ATTN_NEG_INF) {
            for (eq_u32 w = 0; w < EQ_ATTN_WARPS; ++w) {
                const float f = expf(wm[w][g] - mx);
                lsum = fmaf(wl[w][g], f, lsum);
                a = fmaf(wacc[w][g][d], f, a);
            }
        }
        const eq_u64 slot = ((eq_u64)s * heads + kv * group + g) * splits + split;
        part_acc[slot * dim + d] = a;
        if (d == 0u) {
            part_m[slot] = mx;
            part_l[slot] = lsum;
        }
    }
}

#define EQ_ATTN_ENTRY(NAME, KV, E)                                                         \
    extern "C" __global__ void __launch_bounds__(EQ_ATTN_THREADS) NAME(                    \
        const float* __restrict__ q, const eq_u32* __restrict__ table,                     \
        const eq_u32* __restrict__ span_of, const eq_u32* __restrict__ lens,               \
        const eq_u64* __restrict__ masks, const KV* __restrict__ keys,                     \
        const KV* __restrict__ values, float k_scale, float v_scale, float softmax_scale,  \
        float* __restrict__ part_m, float* __restrict__ part_l,                            \
        float* __restrict__ part_acc, eq_u32 kv_heads, eq_u32 group, eq_u32 block,         \
        eq_u32 max_pages, eq_u32 split_rows) {                                             \
        eq_attn_rows<KV, E>(q, table, span_of, lens, masks, keys, values, k_scale,         \
                            v_scale, softmax_scale, part_m, part_l, part_acc, kv_heads,    \
                            group, block, max_pages, split_rows);                          \
    }

// Entry points eq_attn_rows_<kv>_d<head_dim>.
EQ_ATTN_ENTRY(eq_attn_rows_fp8_d32, eq_u8, 1)
EQ_ATTN_ENTRY(eq_attn_rows_fp8_d64, eq_u8, 2)
EQ_ATTN_ENTRY(eq_attn_rows_fp8_d128, eq_u8, 4)
EQ_ATTN_ENTRY(eq_attn_rows_fp8_d256, eq_u8, 8)
EQ_ATTN_ENTRY(eq_attn_rows_bf16_d32, eq_u16, 1)
EQ_ATTN_ENTRY(eq_attn_rows_bf16_d64, eq_u16, 2)
EQ_ATTN_ENTRY(eq_attn_rows_bf16_d128, eq_u16, 4)
EQ_ATTN_ENTRY(eq_attn_rows_bf16_d256, eq_u16, 8)
EQ_ATTN_ENTRY(eq_attn_rows_f32_d32, float, 1)
EQ_ATTN_ENTRY(eq_attn_rows_f32_d64, float, 2)
EQ_ATTN_ENTRY(eq_attn_rows_f32_d128, float, 4)
EQ_ATTN_ENTRY(eq_attn_rows_f32_d256, float, 8)

// out[s, h, :] = Σ_p acc_p · e^{m_p − M} / Σ_p l_p · e^{m_p − M} over the splits p.
extern "C" __global__ void __launch_bounds__(EQ_ATTN_MAX_DIM)
    eq_attn_combine(const float* __restrict__ part_m, const float* __restrict__ part_l,
                    const float* __restrict__ part_acc, float* __restrict__ out, eq_u32 heads,
                    eq_u32 dim, eq_u32 splits) {
    const eq_u32 h = blockIdx.x;
    const eq_u32 s = blockIdx.y;
    const eq_u64 base = ((eq_u64)s * heads + h) * splits;
    float mx = EQ_ATTN_NEG_INF;
    for (eq_u32 p = 0; p < splits; ++p) {
        mx = fmaxf(mx, part_m[base + p]);
    }
    for (eq_u32 d = threadIdx.x; d < dim; d += blockDim.x) {
        float lsum = 0.0f;
        float a = 0.0f;
        for (eq_u32 p = 0; p < splits; ++p) {
            const float mp = part_m[base + p];
            if (mp != EQ_ATTN_NEG_INF) {
                const float f = expf(mp - mx);
                lsum = fmaf(part_l[base + p], f, lsum);
                a = fmaf(part_acc[(base + p) * dim + d], f, a);
            }
        }
        out[((eq_u64)s * heads + h) * dim + d] = a / lsum;
    }
}
