// Tensor-core ("flash") attention of query-row tiles over the paged KV cache: the same
// result as eq_attn_rows (kernels/model/attention.cu) for prompt and token-tree rows, with
// each cached row read once per tile of query rows instead of once per query row, and the
// products on the tensor cores. Prepended by kernels/common/formats.cuh and
// kernels/common/mma.cuh; its partials are merged by attention.cu's eq_attn_combine.
//
// Rows, visibility and the cache layout are attention.cu's: query row s sees cache rows
// 0 .. lens[s] − 1 of its span and row lens[s] + o for every bit o of masks[s].
//
// Tiling: grid (kv_heads, tiles, splits), block EQ_TILE_THREADS. Tile t is query rows
// tile_first[t] .. + tile_count[t] of one span (built on the host), at most
// EQ_TILE_PAIRS / group rows. Its (row, query head) pairs p = i · group + g are the
// mma's M rows, 16 per warp. The CTA walks cache rows [split · split_rows, ...) ∩
// [0, the tile's furthest end) in chunks of EQ_TILE_KV rows: the chunk's keys (row-major)
// and values (transposed) go to shared memory as bf16, which holds FP8 E4M3 codes and bf16
// values exactly; the layer's k/v scales are applied to the sums.
//
// Precision: q (f32) and the softmax weights p (f32) are each split into three bf16 parts
// whose sum is exact (eq_tile_split), and all three go through the mma with the exact
// bf16 keys or values, so the products are f32's and the result stays within f32
// rounding of the CPU's attention rather than bf16's. The tensor cores have throughput to
// spare at these shapes: the kernel is bound by reading the cache.
//
// The mma's own accumulation is not IEEE f32 (the tensor cores align the products to the
// largest term, C included, and truncate), so no fragment carries a sum from one mma3 to
// the next: each k-step of S and each chunk's P · V starts from zero, and those partial
// sums are added to S and O in ordinary (rounded) f32 arithmetic. Accumulating O over a
// split in the fragment cost every later chunk up to an ulp of |O| per mma, always in the
// same direction.
//
// Fragment use (m16n8k16, see mma.cuh): scores S = Q · Kᵀ take A = q pairs × 16 head dims,
// B = 16 head dims × 8 cached rows (keys row-major: a lane's two elements are adjacent);
// the output O = P · V takes A = S's accumulators repacked (C tiles 2j and 2j + 1 are the
// A tile of cached rows 16j .. 16j + 15) and B = 16 cached rows × 8 head dims (values
// transposed, so a lane's two cached rows are adjacent).

#define EQ_TILE_WARPS 4
#define EQ_TILE_THREADS (32 * EQ_TILE_WARPS)
#define EQ_TILE_PAIRS (16 * EQ_TILE_WARPS)
#define EQ_TILE_KV 32
#define EQ_TILE_PAD 8
#define EQ_TILE_NEG_INF __uint_as_float(0xff800000u)

// bf16 bits of a cached element: an FP8 code's value (exact in bf16), or the bf16 itself.
__device__ __forceinline__ eq_u16 eq_tile_bits(const eq_u8* p) {
    return (eq_u16)(__float_as_uint(eq_e4m3_decode(*p)) >> 16);
}
__device__ __forceinline__ eq_u16 eq_tile_bits(const eq_u16* p) { return *p; }

// The layer's scale for a cache of this type: FP8 codes are scaled, bf16 values are not
// (as attention.cu's eq_attn_load).
__device__ __forceinline__ float eq_tile_scale(const eq_u8*, float scale) { return scale; }
__device__ __forceinline__ float eq_tile_scale(const eq_u16*, float) { return 1.0f; }

// Two adjacent f32 values as three bf16 pairs whose sum is the values exactly (8 bits of
// the significand each): hi = bf16(x), mid = bf16(x − hi), lo = bf16(x − hi − mid).
__device__ __forceinline__ void eq_tile_split(float x0, float x1, eq_u32 (&parts)[3]) {
#pragma unroll
    for (int i = 0; i < 3; ++i) {
        const eq_u32 b0 = eq_f32_to_bf16_rne(x0);
        const eq_u32 b1 = eq_f32_to_bf16_rne(x1);
        parts[i] = b0 | (b1 << 16);
        x0 -= __uint_as_float(b0 << 16);
        x1 -= __uint_as_float(b1 << 16);
    }
}

// d += A · B with A given as three bf16 parts (smallest first, so the small products are
// summed before the large one lands in d). d should hold nothing larger than the products
// (a fresh zero, or this product's earlier k-steps): the mma aligns to its largest term.
__device__ __forceinline__ void eq_tile_mma3(float* d, const eq_u32 (&a)[4][3], const eq_u32* b) {
#pragma unroll
    for (int i = 2; i >= 0; --i) {
        const eq_u32 part[4] = {a[0][i], a[1][i], a[2][i], a[3][i]};
        eq_mma_bf16_16816(d, part, b);
    }
}

// A pair's query row: the cache rows it sees (len, mask) and whether it exists.
struct EqTileRow {
    eq_u32 len;
    eq_u64 mask;
    bool valid;
};

__device__ __forceinline__ bool eq_tile_sees(const EqTileRow& row, eq_u32 r) {
    if (!row.valid) {
        return false;
    }
    if (r < row.len) {
        return true;
    }
    const eq_u32 o = r - row.len;
    return o < 64u && ((row.mask >> o) & 1ull) != 0ull;
}

template <typename Kv, int D>
__device__ __forceinline__ void eq_attn_tile(
    const float* __restrict__ q, const eq_u32* __restrict__ table,
    const eq_u32* __restrict__ span_of, const eq_u32* __restrict__ lens,
    const eq_u64* __restrict__ masks, const eq_u32* __restrict__ tile_first,
    const eq_u32* __restrict__ tile_count, const Kv* __restrict__ keys,
    const Kv* __restrict__ values, float k_scale, float v_scale, float softmax_scale,
    float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_acc,
    eq_u32 kv_heads, eq_u32 group, eq_u32 block, eq_u32 max_pages, eq_u32 split_rows) {
    constexpr int KSTEPS = D / 16;  // head-dim steps of S = Q · Kᵀ
    constexpr int OTILES = D / 8;   // n8 tiles of O
    constexpr int STILES = EQ_TILE_KV / 8;
    __shared__ __align__(16) eq_u16 ks[EQ_TILE_KV][D + EQ_TILE_PAD];
    __shared__ __align__(16) eq_u16 vt[D][EQ_TILE_KV + EQ_TILE_PAD];
    __shared__ eq_u32 tile_end;
    __shared__ eq_u32 tile_lens[EQ_TILE_PAIRS];  // the tile's rows (at most 64: group ≥ 1)
    __shared__ eq_u64 tile_masks[EQ_TILE_PAIRS];
    __shared__ bool chunk_seen[EQ_TILE_KV];  // whether any row of the tile sees it

    const eq_u32 kv = blockIdx.x;
    const eq_u32 first = tile_first[blockIdx.y];
    const eq_u32 count = tile_count[blockIdx.y];
    const eq_u32 split = blockIdx.z;
    const eq_u32 splits = gridDim.z;
    const eq_u32 heads = kv_heads * group;
    const eq_u32 lane = threadIdx.x & 31u;
    const eq_u32 warp = threadIdx.x >> 5;
    const eq_u32 g = lane >> 2;
    const eq_u32 qd = lane & 3u;
    const eq_u32 pairs = count * group;
    const eq_u32* pages = table + (eq_u64)span_of[first] * max_pages;

    for (eq_u32 i = threadIdx.x; i < count; i += blockDim.x) {
        tile_lens[i] = lens[first + i];
        tile_masks[i] = masks[first + i];
    }
    if (threadIdx.x == 0u) {
        eq_u32 end = 0u;
        for (eq_u32 i = first; i < first + count; ++i) {
            const eq_u64 m = masks[i];
            const eq_u32 e = m == 0ull ? lens[i] : lens[i] + 64u - (eq_u32)__clzll((long long)m);
            end = max(end, e);
        }
        tile_end = end;
    }

    // This lane's two pairs (M rows g and g + 8 of the warp's tile).
    eq_u32 pair[2];
    EqTileRow row[2];
    const float* qrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        pair[h] = 16u * warp + g + 8u * h;
        const bool valid = pair[h] < pairs;
        const eq_u32 p = valid ? pair[h] : 0u;
        const eq_u32 i = first + p / group;
        row[h] = EqTileRow{lens[i], masks[i], valid};
        qrow[h] = q + ((eq_u64)i * heads + kv * group + p % group) * D;
    }
    const bool busy = 16u * warp < pairs;  // warp-uniform: the warp has a pair

    float m[2] = {EQ_TILE_NEG_INF, EQ_TILE_NEG_INF};
    float l[2] = {0.0f, 0.0f};  // this lane's share of the row sums
    float o[OTILES][4];
#pragma unroll
    for (int t = 0; t < OTILES; ++t) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            o[t][r] = 0.0f;
        }
    }
    const float score_scale = eq_tile_scale(keys, k_scale) * softmax_scale;
    const float out_scale = eq_tile_scale(values, v_scale);
    __syncthreads();
    const eq_u32 r0 = split * split_rows;
    const eq_u32 r1 = min(tile_end, r0 + split_rows);

    for (eq_u32 c0 = r0; c0 < r1; c0 += EQ_TILE_KV) {
        __syncthreads();  // the previous chunk is no longer read
        // Rows no row of the tile sees (a tree's unused slots, stale data) are not read:
        // their weight is 0, but 0 · NaN would not be.
        if (threadIdx.x < (eq_u32)EQ_TILE_KV) {
            const eq_u32 r = c0 + threadIdx.x;
            bool any = false;
            for (eq_u32 i = 0; i < count && r < r1 && !any; ++i) {
                any = eq_tile_sees(EqTileRow{tile_lens[i], tile_masks[i], true}, r);
            }
            chunk_seen[threadIdx.x] = any;
        }
        __syncthreads();
        for (eq_u32 idx = threadIdx.x; idx < EQ_TILE_KV * D; idx += EQ_TILE_THREADS) {
            const eq_u32 rr = idx / D;
            const eq_u32 d = idx % D;
            const eq_u32 r = c0 + rr;
            eq_u16 kb = 0, vb = 0;
            if (chunk_seen[rr]) {
                const eq_u64 at =
                    (((eq_u64)pages[r / block] * kv_heads + kv) * block + r % block) * D + d;
                kb = eq_tile_bits(keys + at);
                vb = eq_tile_bits(values + at);
            }
            ks[rr][d] = kb;
            vt[d][rr] = vb;
        }
        __syncthreads();
        if (!busy) {
            continue;
        }

        // S = Q · Kᵀ for the chunk's EQ_TILE_KV rows.
        float s[STILES][4];
#pragma unroll
        for (int t = 0; t < STILES; ++t) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                s[t][r] = 0.0f;
            }
        }
#pragma unroll 4
        for (int k = 0; k < KSTEPS; ++k) {
            const eq_u32 col = 16u * k + 2u * qd;
            eq_u32 a[4][3];  // [fragment register][part]
            eq_tile_split(qrow[0][col], qrow[0][col + 1], a[0]);
            eq_tile_split(qrow[1][col], qrow[1][col + 1], a[1]);
            eq_tile_split(qrow[0][col + 8], qrow[0][col + 9], a[2]);
            eq_tile_split(qrow[1][col + 8], qrow[1][col + 9], a[3]);
#pragma unroll
            for (int t = 0; t < STILES; ++t) {
                const eq_u16* kr = &ks[8 * t + g][col];
                eq_u32 b[2];
                b[0] = *reinterpret_cast<const eq_u32*>(kr);
                b[1] = *reinterpret_cast<const eq_u32*>(kr + 8);
                // This k-step's 16 head dims from zero, then into S in f32 (see above).
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                eq_tile_mma3(d, a, b);
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    s[t][r] += d[r];
                }
            }
        }

        // Mask, scale and the online softmax; C entry r of tile t is pair g + 8·(r / 2),
        // cached row c0 + 8t + 2·qd + r % 2.
        float mx[2] = {EQ_TILE_NEG_INF, EQ_TILE_NEG_INF};
#pragma unroll
        for (int t = 0; t < STILES; ++t) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int h = r >> 1;
                const eq_u32 cr = c0 + 8u * t + 2u * qd + (r & 1);
                s[t][r] = cr < r1 && eq_tile_sees(row[h], cr) ? s[t][r] * score_scale
                                                              : EQ_TILE_NEG_INF;
                mx[h] = fmaxf(mx[h], s[t][r]);
            }
        }
        float corr[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float mn = fmaxf(m[h], mx[h]);
            // Nothing seen yet (mn = −inf): keep the empty state as it is.
            corr[h] = mn == EQ_TILE_NEG_INF ? 1.0f : expf(m[h] - mn);
            m[h] = mn;
            l[h] *= corr[h];
        }
#pragma unroll
        for (int t = 0; t < STILES; ++t) {
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int h = r >> 1;
                s[t][r] = s[t][r] == EQ_TILE_NEG_INF ? 0.0f : expf(s[t][r] - m[h]);
                l[h] += s[t][r];
            }
        }

        // O = O · corr + P · V: the chunk's product (16 cached rows per k-step) from zero in
        // the mma, then into O in f32 (see above), one n8 tile of O at a time.
        eq_u32 pa[STILES / 2][4][3];  // P's A fragments: [k-step][fragment register][part]
#pragma unroll
        for (int j = 0; j < STILES / 2; ++j) {
            eq_tile_split(s[2 * j][0], s[2 * j][1], pa[j][0]);
            eq_tile_split(s[2 * j][2], s[2 * j][3], pa[j][1]);
            eq_tile_split(s[2 * j + 1][0], s[2 * j + 1][1], pa[j][2]);
            eq_tile_split(s[2 * j + 1][2], s[2 * j + 1][3], pa[j][3]);
        }
#pragma unroll
        for (int t = 0; t < OTILES; ++t) {
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < STILES / 2; ++j) {
                const eq_u16* vr = &vt[8 * t + g][16 * j + 2u * qd];
                eq_u32 b[2];
                b[0] = *reinterpret_cast<const eq_u32*>(vr);
                b[1] = *reinterpret_cast<const eq_u32*>(vr + 8);
                eq_tile_mma3(d, pa[j], b);
            }
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                o[t][r] = fmaf(o[t][r], corr[r >> 1], d[r]);
            }
        }
    }

    // The row sums across the four lanes of a row, then this split's partials.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        if (!row[h].valid) {
            continue;
        }
        const eq_u32 i = first + pair[h] / group;
        const eq_u64 slot = ((eq_u64)i * heads + kv * group + pair[h] % group) * splits + split;
        if (qd == 0u) {
            part_m[slot] = m[h];
            part_l[slot] = l[h];
        }
#pragma unroll
        for (int t = 0; t < OTILES; ++t) {
            const eq_u32 d = 8u * t + 2u * qd;
            part_acc[slot * D + d] = o[t][2 * h] * out_scale;
            part_acc[slot * D + d + 1] = o[t][2 * h + 1] * out_scale;
        }
    }
}

#define EQ_TILE_ENTRY(NAME, KV, D)                                                          \
    extern "C" __global__ void __launch_bounds__(EQ_TILE_THREADS) NAME(                     \
        const float* __restrict__ q, const eq_u32* __restrict__ table,                      \
        const eq_u32* __restrict__ span_of, const eq_u32* __restrict__ lens,                \
        const eq_u64* __restrict__ masks, const eq_u32* __restrict__ tile_first,            \
        const eq_u32* __restrict__ tile_count, const KV* __restrict__ keys,                 \
        const KV* __restrict__ values, float k_scale, float v_scale, float softmax_scale,   \
        float* __restrict__ part_m, float* __restrict__ part_l,                             \
        float* __restrict__ part_acc, eq_u32 kv_heads, eq_u32 group, eq_u32 block,          \
        eq_u32 max_pages, eq_u32 split_rows) {                                              \
        eq_attn_tile<KV, D>(q, table, span_of, lens, masks, tile_first, tile_count, keys,   \
                            values, k_scale, v_scale, softmax_scale, part_m, part_l,        \
                            part_acc, kv_heads, group, block, max_pages, split_rows);       \
    }

// Entry points eq_attn_tile_<kv>_d<head_dim>.
EQ_TILE_ENTRY(eq_attn_tile_fp8_d32, eq_u8, 32)
EQ_TILE_ENTRY(eq_attn_tile_fp8_d64, eq_u8, 64)
EQ_TILE_ENTRY(eq_attn_tile_fp8_d128, eq_u8, 128)
EQ_TILE_ENTRY(eq_attn_tile_fp8_d256, eq_u8, 256)
EQ_TILE_ENTRY(eq_attn_tile_bf16_d32, eq_u16, 32)
EQ_TILE_ENTRY(eq_attn_tile_bf16_d64, eq_u16, 64)
EQ_TILE_ENTRY(eq_attn_tile_bf16_d128, eq_u16, 128)
EQ_TILE_ENTRY(eq_attn_tile_bf16_d256, eq_u16, 256)
