// Host emulation of the CUDA kernels for the numpy checkers (check.py, check_model.py):
// the .cu files compiled by g++ over the emulated device's SIMT runtime (simt.h, simt.cpp:
// a block's threads as cooperative fibers), with C entry points whose launch shapes
// mirror the Rust wrappers in crates/edge-quant/src/cuda/ and crates/edge-model/src/cuda/.
// It checks kernel logic (indexing, packing, tiling, tails, reductions) without a GPU.
//
// Build and run: python3 kernels/host_emulation/check.py (see docs/CUDA.md).

#include <functional>

#include "simt.h"

// ---- The kernels, exactly as NVRTC sees them -------------------------------------------
#include "../common/formats.cuh"
#include "../nvfp4/quantize.cu"
#include "../nvfp4/dequantize.cu"
#include "../nvfp4/gemv.cu"
#include "../common/mma.cuh"
#include "../nvfp4/mma.cu"
#include "../bf16/mma.cu"
#include "../model/elementwise.cu"
#include "../model/sampling.cu"
#include "../model/gdn.cu"
#include "../model/attention.cu"
#include "../model/attention_tiles.cu"
#include "../model/rope.cu"
#include "../model/kv_store.cu"
#include "../fp8/quantize.cu"

// Runs `kernel` on a grid with `threads` threads a block, on the calling thread.
static void launch(dim3 grid, unsigned threads, const std::function<void()>& kernel) {
    void* args[1] = {const_cast<std::function<void()>*>(&kernel)};
    const unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {threads, 1, 1};
    eq_simt_run_blocks([](void** a) { (*static_cast<std::function<void()>*>(a[0]))(); }, args, g, b,
                       0, (unsigned long long)grid.x * grid.y * grid.z);
}

static unsigned blocks_for(unsigned long long items, unsigned per_block, unsigned long long cap) {
    unsigned long long b = (items + per_block - 1) / per_block;
    return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

// ---- C entry points for check.py (launch shapes as the Rust wrappers) -------------------
extern "C" {

void emu_nvfp4_quantize(const float* x, eq_u8* codes, eq_u8* scales, eq_u64* bad, float g,
                        eq_u64 n_blocks) {
    launch(dim3{blocks_for(n_blocks, 256, 0x7fffffff), 1, 1}, 256,
           [=] { eq_nvfp4_quantize_f32(x, codes, scales, bad, g, n_blocks); });
}

void emu_nvfp4_dequantize(const eq_u8* codes, const eq_u8* scales, float* out, float g,
                          eq_u64 n_blocks) {
    launch(dim3{blocks_for(n_blocks, 256, 0x7fffffff), 1, 1}, 256,
           [=] { eq_nvfp4_dequantize_f32(codes, scales, out, g, n_blocks); });
}

void emu_nvfp4_linear(const eq_u8* codes, const eq_u8* scales, const void* x, int bf16,
                      float* y, float g, eq_u32 rows, eq_u32 cols, eq_u32 tokens) {
    unsigned tile = tokens <= 1 ? 1 : tokens == 2 ? 2 : tokens <= 4 ? 4 : tokens <= 8 ? 8 : 16;
    bool gemm = tile >= 8;
    dim3 grid{gemm ? (rows + 31) / 32 : (rows + 3) / 4, (tokens + tile - 1) / tile, 1};
    unsigned threads = gemm ? 256 : 128;
    const float* xf = static_cast<const float*>(x);
    const eq_u16* xb = static_cast<const eq_u16*>(x);
    std::function<void()> k;
#define EQ_CASE(T, F, B)                                                                 \
    case T:                                                                              \
        k = bf16 ? std::function<void()>([=] { B(codes, scales, xb, y, g, rows, cols, tokens); }) \
                 : std::function<void()>([=] { F(codes, scales, xf, y, g, rows, cols, tokens); }); \
        break;
    switch (tile) {
        EQ_CASE(1, eq_nvfp4_gemv_f32_t1, eq_nvfp4_gemv_bf16_t1)
        EQ_CASE(2, eq_nvfp4_gemv_f32_t2, eq_nvfp4_gemv_bf16_t2)
        EQ_CASE(4, eq_nvfp4_gemv_f32_t4, eq_nvfp4_gemv_bf16_t4)
        EQ_CASE(8, eq_nvfp4_gemm_f32_t8, eq_nvfp4_gemm_bf16_t8)
        EQ_CASE(16, eq_nvfp4_gemm_f32_t16, eq_nvfp4_gemm_bf16_t16)
    }
#undef EQ_CASE
    launch(grid, threads, k);
}

void emu_nvfp4_linear_tc(const eq_u8* codes, const eq_u8* scales, const void* x, int bf16,
                         float* y, float g, eq_u32 rows, eq_u32 cols, eq_u32 tokens) {
    unsigned tile = tokens <= 8 ? 8 : tokens <= 16 ? 16 : tokens <= 32 ? 32 : 64;
    unsigned warps = tile == 64 ? 4 : 8;
    dim3 grid{(rows + 31) / 32, (tokens + tile - 1) / tile, 1};
    const float* xf = static_cast<const float*>(x);
    const eq_u16* xb = static_cast<const eq_u16*>(x);
    std::function<void()> k;
#define EQ_CASE(T, F, B)                                                                 \
    case T:                                                                              \
        k = bf16 ? std::function<void()>([=] { B(codes, scales, xb, y, g, rows, cols, tokens); }) \
                 : std::function<void()>([=] { F(codes, scales, xf, y, g, rows, cols, tokens); }); \
        break;
    switch (tile) {
        EQ_CASE(8, eq_nvfp4_mma_f32_t8, eq_nvfp4_mma_bf16_t8)
        EQ_CASE(16, eq_nvfp4_mma_f32_t16, eq_nvfp4_mma_bf16_t16)
        EQ_CASE(32, eq_nvfp4_mma_f32_t32, eq_nvfp4_mma_bf16_t32)
        EQ_CASE(64, eq_nvfp4_mma_f32_t64, eq_nvfp4_mma_bf16_t64)
    }
#undef EQ_CASE
    launch(grid, 32 * warps, k);
}

void emu_bf16_linear_tc(const eq_u16* w, const void* x, int bf16, float* y, eq_u32 rows,
                        eq_u32 cols, eq_u32 tokens) {
    unsigned tile = tokens <= 8 ? 8 : tokens <= 16 ? 16 : tokens <= 32 ? 32 : 64;
    unsigned warps = tile == 64 ? 4 : 8;
    dim3 grid{(rows + 31) / 32, (tokens + tile - 1) / tile, 1};
    const float* xf = static_cast<const float*>(x);
    const eq_u16* xb = static_cast<const eq_u16*>(x);
    std::function<void()> k;
#define EQ_CASE(T, F, B)                                                                  \
    case T:                                                                               \
        k = bf16 ? std::function<void()>([=] { B(w, xb, y, rows, cols, tokens); })        \
                 : std::function<void()>([=] { F(w, xf, y, rows, cols, tokens); });       \
        break;
    switch (tile) {
        EQ_CASE(8, eq_bf16_mma_f32_t8, eq_bf16_mma_bf16_t8)
        EQ_CASE(16, eq_bf16_mma_f32_t16, eq_bf16_mma_bf16_t16)
        EQ_CASE(32, eq_bf16_mma_f32_t32, eq_bf16_mma_bf16_t32)
        EQ_CASE(64, eq_bf16_mma_f32_t64, eq_bf16_mma_bf16_t64)
    }
#undef EQ_CASE
    launch(grid, 32 * warps, k);
}

void emu_fp8_quantize(const void* x, int bf16, eq_u8* q, float scale, eq_u64 n) {
    launch(dim3{blocks_for(n, 256, 4096), 1, 1}, 256, [=] {
        if (bf16) {
            eq_fp8_quantize_bf16(static_cast<const eq_u16*>(x), q, scale, n);
        } else {
            eq_fp8_quantize_f32(static_cast<const float*>(x), q, scale, n);
        }
    });
}

void emu_fp8_dequantize(const eq_u8* q, float* out, float scale, eq_u64 n) {
    launch(dim3{blocks_for(n, 256, 4096), 1, 1}, 256,
           [=] { eq_fp8_dequantize_f32(q, out, scale, n); });
}

eq_u32 emu_absmax(const float* x, eq_u64 n) {
    eq_u32 bits = 0;
    eq_u32* p = &bits;
    launch(dim3{blocks_for(n, 256, 4096), 1, 1}, 256, [=] { eq_absmax_f32(x, p, n); });
    return bits;
}

// Model kernels (launch shapes as crates/edge-model/src/cuda/ops.rs; element-wise grids
// capped at 3 blocks here so that the grid-stride loops wrap).
void emu_add(float* x, const float* y, eq_u64 n) {
    launch(dim3{blocks_for(n, 256, 3), 1, 1}, 256, [=] { eq_add_f32(x, y, n); });
}

void emu_gate(int sigmoid, const float* g, float* x, eq_u64 n) {
    launch(dim3{blocks_for(n, 256, 3), 1, 1}, 256, [=] {
        if (sigmoid) {
            eq_gate_sigmoid_f32(g, x, n);
        } else {
            eq_gate_silu_f32(g, x, n);
        }
    });
}

void emu_concat_rows(const float* a, const float* b, float* out, eq_u32 width, eq_u64 rows) {
    launch(dim3{blocks_for(rows * 2 * width, 256, 3), 1, 1}, 256,
           [=] { eq_concat_rows_f32(a, b, out, width, rows); });
}

void emu_gather_rows(const float* x, const eq_u32* idx, float* out, eq_u32 width, eq_u64 n) {
    launch(dim3{blocks_for(n * width, 256, 3), 1, 1}, 256,
           [=] { eq_gather_rows_f32(x, idx, out, width, n); });
}

void emu_embed_bf16(const eq_u16* table, const eq_u32* ids, float* out, eq_u32 width,
                    eq_u64 tokens) {
    launch(dim3{blocks_for(tokens * width, 256, 3), 1, 1}, 256,
           [=] { eq_embed_bf16(table, ids, out, width, tokens); });
}

void emu_rms_norm(const float* x, const float* w, float* out, eq_u32 width, eq_u32 rows,
                  float eps) {
    launch(dim3{rows, 1, 1}, 256, [=] { eq_rms_norm_f32(x, w, out, width, eps); });
}

void emu_gated_rms_norm(float* o, const float* z, const float* w, eq_u32 width, eq_u32 rows,
                        float eps) {
    launch(dim3{rows, 1, 1}, 256, [=] { eq_gated_rms_norm_f32(o, z, w, width, eps); });
}

void emu_argmax(const float* logits, eq_u32* out, eq_u32 vocab, eq_u32 rows) {
    launch(dim3{rows, 1, 1}, 256, [=] { eq_argmax_f32(logits, out, vocab); });
}

void emu_topk(const float* logits, eq_u32 vocab, eq_u32 rows, eq_u32 k, float inv_temp,
              float* vals, eq_u32* ids, eq_u32* count, float* row_max, float* row_sum) {
    launch(dim3{rows, 1, 1}, EQ_TOPK_THREADS,
           [=] { eq_topk_f32(logits, vocab, k, inv_temp, vals, ids, count, row_max, row_sum); });
}

// chunked: 0 the row kernel, 1 the chunked one (chain spans only).
void emu_gdn_recurrence(int chunked, float* states, const eq_u32* slot_of,
                        const eq_u32* starts, const eq_u32* tree_of, const eq_u32* parents,
                        float* scratch, const float* q, const float* k, const float* v,
                        const float* b, const float* a, const float* z, const float* neg_a,
                        const float* dt_bias, const float* norm_w, float* out, eq_u32 spans,
                        eq_u32 hk, eq_u32 hv, eq_u32 dk, eq_u32 dv, float eps) {
    const auto kernel = chunked ? eq_gdn_chunked_f32 : eq_gdn_recurrence_f32;
    launch(dim3{hv, spans, 1}, EQ_GDN_THREADS, [=] {
        kernel(states, slot_of, starts, tree_of, parents, scratch, q, k, v, b, a, z, neg_a,
               dt_bias, norm_w, out, hk, hv, dk, dv, eps);
    });
}

void emu_gdn_conv(float* windows, const eq_u32* slot_of, const eq_u32* starts,
                  const eq_u32* tree_of, const eq_u32* parents, const float* qkv,
                  const float* taps, float* q, float* k, float* v, eq_u32 spans, eq_u32 hk,
                  eq_u32 hv, eq_u32 dk, eq_u32 dv, eq_u32 kernel) {
    launch(dim3{2 * hk + hv, spans, 1}, EQ_GDN_THREADS, [=] {
        eq_gdn_conv_f32(windows, slot_of, starts, tree_of, parents, qkv, taps, q, k, v, hk, hv,
                        dk, dv, kernel);
    });
}

// kv: 0 FP8, 1 bf16, 2 f32. With tiles > 0 the tile kernel (FP8 and bf16 only) over
// the tiles tile_first/tile_count, else the row kernel; then the combine, as
// attention.rs launches them.
void emu_attn(const float* q, const eq_u32* table, const eq_u32* span_of, const eq_u32* lens,
              const eq_u64* masks, const eq_u32* tile_first, const eq_u32* tile_count,
              eq_u32 tiles, const void* keys, const void* values, int kv, float k_scale,
              float v_scale, float softmax_scale, float* part_m, float* part_l,
              float* part_acc, float* out, eq_u32 rows, eq_u32 kv_heads, eq_u32 group,
              eq_u32 dim, eq_u32 block, eq_u32 max_pages, eq_u32 split_rows, eq_u32 splits) {
    std::function<void()> k;
    // NAME##_d<dim>(<row arrays>, keys, values, <the rest>) for the pages' type KVT.
#define EQ_CALL(D, NAME, ...) k = [=] { NAME##_d##D(__VA_ARGS__, kk, vv, k_scale, v_scale, softmax_scale, part_m, part_l, part_acc, kv_heads, group, block, max_pages, split_rows); }; break;
#define EQ_DIMS(KVT, NAME, ...)                                                           \
    {                                                                                     \
        const KVT* kk = static_cast<const KVT*>(keys);                                    \
        const KVT* vv = static_cast<const KVT*>(values);                                  \
        switch (dim) {                                                                    \
            case 32: EQ_CALL(32, NAME, __VA_ARGS__)                                       \
            case 64: EQ_CALL(64, NAME, __VA_ARGS__)                                       \
            case 128: EQ_CALL(128, NAME, __VA_ARGS__)                                     \
            default: EQ_CALL(256, NAME, __VA_ARGS__)                                      \
        }                                                                                 \
    }
    if (tiles > 0) {
        if (kv == 0) EQ_DIMS(eq_u8, eq_attn_tile_fp8, q, table, span_of, lens, masks, tile_first, tile_count)
        else EQ_DIMS(eq_u16, eq_attn_tile_bf16, q, table, span_of, lens, masks, tile_first, tile_count)
        launch(dim3{kv_heads, tiles, splits}, EQ_TILE_THREADS, k);
    } else {
        if (kv == 0) EQ_DIMS(eq_u8, eq_attn_rows_fp8, q, table, span_of, lens, masks)
        else if (kv == 1) EQ_DIMS(eq_u16, eq_attn_rows_bf16, q, table, span_of, lens, masks)
        else EQ_DIMS(float, eq_attn_rows_f32, q, table, span_of, lens, masks)
        launch(dim3{kv_heads, rows, splits}, EQ_ATTN_THREADS, k);
    }
#undef EQ_DIMS
#undef EQ_CALL
    const eq_u32 heads = kv_heads * group;
    launch(dim3{heads, rows, 1}, dim,
           [=] { eq_attn_combine(part_m, part_l, part_acc, out, heads, dim, splits); });
}

void emu_attn_inputs(const float* qg, float* k, const eq_u32* positions, const float* q_norm,
                     const float* k_norm, const float* inv_freq, float* q, float* gate,
                     eq_u32 rows, eq_u32 heads, eq_u32 kv_heads, eq_u32 dim, eq_u32 half,
                     float eps) {
    launch(dim3{heads + kv_heads, rows, 1}, EQ_ROPE_THREADS, [=] {
        eq_attn_inputs_f32(qg, k, positions, q_norm, k_norm, inv_freq, q, gate, heads,
                           kv_heads, dim, half, eps);
    });
}

// kv: 0 FP8, 1 bf16, 2 f32.
void emu_kv_store(int kv, const float* k, const float* v, const eq_u32* slots, void* keys,
                  void* values, float k_scale, float v_scale, eq_u32 kv_heads, eq_u32 block,
                  eq_u32 dim, eq_u64 rows) {
    const dim3 grid{blocks_for(rows * kv_heads * dim, EQ_KV_THREADS, 3), 1, 1};
    launch(grid, EQ_KV_THREADS, [=] {
        if (kv == 0) {
            eq_kv_store_fp8(k, v, slots, (eq_u8*)keys, (eq_u8*)values, k_scale, v_scale,
                            kv_heads, block, dim, rows);
        } else if (kv == 1) {
            eq_kv_store_bf16(k, v, slots, (eq_u16*)keys, (eq_u16*)values, k_scale, v_scale,
                             kv_heads, block, dim, rows);
        } else {
            eq_kv_store_f32(k, v, slots, (float*)keys, (float*)values, k_scale, v_scale,
                            kv_heads, block, dim, rows);
        }
    });
}

void emu_kv_copy_rows(int kv, void* keys, void* values, const eq_u32* moves, eq_u32 n_moves,
                      eq_u32 kv_heads, eq_u32 block, eq_u32 dim) {
    launch(dim3{1, 1, 1}, EQ_KV_THREADS, [=] {
        if (kv == 0) {
            eq_kv_copy_rows_fp8((eq_u8*)keys, (eq_u8*)values, moves, n_moves, kv_heads, block,
                                dim);
        } else if (kv == 1) {
            eq_kv_copy_rows_bf16((eq_u16*)keys, (eq_u16*)values, moves, n_moves, kv_heads,
                                 block, dim);
        } else {
            eq_kv_copy_rows_f32((float*)keys, (float*)values, moves, n_moves, kv_heads, block,
                                dim);
        }
    });
}
}
