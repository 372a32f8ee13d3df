// Writes into the paged KV cache, as edge_kvcache::memory::HostKv does on the CPU:
//  * eq_kv_store_<kv>: each row's keys and values ([rows, kv_heads, dim] f32) encoded into
//    its cache row: FP8 E4M3 as encode(x / scale) (a division, as write_row does), bf16
//    rounded to nearest even, or f32;
//  * eq_kv_copy_rows_<kv>: copies cached rows (every KV head's key and value, no
//    re-encoding) in the order given, as copy_row does for tree speculation's commit.
// Prepended by kernels/common/formats.cuh.
//
// Cache layout (one layer): keys and values each [pages, kv_heads, block, dim]. A cache
// slot is page · block + row within the page.
//
// Launch shapes: store, block EQ_KV_THREADS, grid-stride over rows · kv_heads · dim, any
// grid; copy, one block of EQ_KV_THREADS (the moves run one after another).

#define EQ_KV_THREADS 256

// The cache index of element (h, d) of slot `slot`.
__device__ __forceinline__ eq_u64 eq_kv_at(eq_u32 slot, eq_u32 h, eq_u32 d, eq_u32 kv_heads,
                                           eq_u32 block, eq_u32 dim) {
    const eq_u64 page = slot / block;
    return ((page * kv_heads + h) * block + slot % block) * dim + d;
}

__device__ __forceinline__ eq_u8 eq_kv_encode(float x, float scale, eq_u8*) {
    return (eq_u8)eq_e4m3_encode(x / scale);
}

__device__ __forceinline__ eq_u16 eq_kv_encode(float x, float, eq_u16*) {
    return (eq_u16)eq_f32_to_bf16_rne(x);
}

__device__ __forceinline__ float eq_kv_encode(float x, float, float*) {
    return x;
}

template <typename Kv>
__device__ __forceinline__ void eq_kv_store(const float* __restrict__ k,
                                            const float* __restrict__ v,
                                            const eq_u32* __restrict__ slots, Kv* __restrict__ keys,
                                            Kv* __restrict__ values, float k_scale, float v_scale,
                                            eq_u32 kv_heads, eq_u32 block, eq_u32 dim,
                                            eq_u64 rows) {
    const eq_u64 width = (eq_u64)kv_heads * dim;
    for (eq_u64 i = (eq_u64)blockIdx.x * blockDim.x + threadIdx.x; i < rows * width;
         i += (eq_u64)gridDim.x * blockDim.x) {
        const eq_u64 r = i / width;
        const eq_u32 h = (eq_u32)((i % width) / dim);
        const eq_u32 d = (eq_u32)(i % dim);
        const eq_u64 at = eq_kv_at(slots[r], h, d, kv_heads, block, dim);
        keys[at] = eq_kv_encode(k[i], k_scale, keys);
        values[at] = eq_kv_encode(v[i], v_scale, values);
    }
}

template <typename Kv>
__device__ __forceinline__ void eq_kv_copy_rows(Kv* __restrict__ keys, Kv* __restrict__ values,
                                                const eq_u32* __restrict__ moves,
                                                eq_u32 n_moves, eq_u32 kv_heads, eq_u32 block,
                                                eq_u32 dim) {
    for (eq_u32 m = 0; m < n_moves; ++m) {
        const eq_u32 from = moves[2u * m];
        const eq_u32 to = moves[2u * m + 1u];
        for (eq_u32 i = threadIdx.x; i < kv_heads * dim; i += blockDim.x) {
            const eq_u32 h = i / dim;
            const eq_u32 d = i % dim;
            const eq_u64 a = eq_kv_at(from, h, d, kv_heads, block, dim);
            const eq_u64 b = eq_kv_at(to, h, d, kv_heads, block, dim);
            keys[b] = keys[a];
            values[b] = values[a];
        }
        // No barrier: a thread copies the same (head, element) of every move, so a later
        // move reads what an earlier one wrote.
    }
}

#define EQ_KV_ENTRIES(STORE, COPY, KV)                                                     \
    extern "C" __global__ void __launch_bounds__(EQ_KV_THREADS) STORE(                     \
        const float* __restrict__ k, const float* __restrict__ v,                          \
        const eq_u32* __restrict__ slots, KV* __restrict__ keys, KV* __restrict__ values,  \
        float k_scale, float v_scale, eq_u32 kv_heads, eq_u32 block, eq_u32 dim,           \
        eq_u64 rows) {                                                                     \
        eq_kv_store<KV>(k, v, slots, keys, values, k_scale, v_scale, kv_heads, block, dim, \
                        rows);                                                             \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(EQ_KV_THREADS) COPY(                      \
        KV* __restrict__ keys, KV* __restrict__ values, const eq_u32* __restrict__ moves,  \
        eq_u32 n_moves, eq_u32 kv_heads, eq_u32 block, eq_u32 dim) {                       \
        eq_kv_copy_rows<KV>(keys, values, moves, n_moves, kv_heads, block, dim);           \
    }

EQ_KV_ENTRIES(eq_kv_store_fp8, eq_kv_copy_rows_fp8, eq_u8)
EQ_KV_ENTRIES(eq_kv_store_bf16, eq_kv_copy_rows_bf16, eq_u16)
EQ_KV_ENTRIES(eq_kv_store_f32, eq_kv_copy_rows_f32, float)
