// Host emulation of edge-quant's CUDA kernels: the .cu sources compiled by g++ with a
// tiny SIMT runtime (one std::thread per CUDA thread, std::barrier for __syncthreads and
// warp shuffles). It checks kernel logic (indexing, packing, tiling, tails, reductions)
// on machines without a GPU; it says nothing about speed, and nothing about the GPU's
// own arithmetic beyond IEEE f32 (which host and GPU share: fmaf, division, no FTZ).
//
// Build and run: python3 kernels/host_emulation/check.py (see docs/CUDA.md).
// The launch shapes below mirror the Rust wrappers in crates/edge-quant/src/cuda/.

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

// ---- CUDA surface the kernels use -----------------------------------------------------
#define EQ_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
thread_local dim3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
static inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
    return {a, b, c, d};
}
static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

static inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
template <typename T>
static inline T __ldg(const T* p) { return *p; }

static inline uint4 eq_ld_stream_v4(const void* p) {
    uint4 r;
    std::memcpy(&r, p, 16);
    return r;
}
static inline uint2 eq_ld_stream_v2(const void* p) {
    uint2 r;
    std::memcpy(&r, p, 8);
    return r;
}

static inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    std::atomic_ref<unsigned long long> a(*p);
    unsigned long long old = a.load();
    while (v < old && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}
static inline unsigned atomicMax(unsigned* p, unsigned v) {
    std::atomic_ref<unsigned> a(*p);
    unsigned old = a.load();
    while (v > old && !a.compare_exchange_weak(old, v)) {
    }
    return old;
}

// One barrier per block and one exchange area + barrier per warp.
struct Warp {
    std::barrier<> bar{32};
    unsigned slots[32];
};
static std::unique_ptr<std::barrier<>> g_block_barrier;
static std::vector<std::unique_ptr<Warp>> g_warps;

static inline void __syncthreads() { g_block_barrier->arrive_and_wait(); }

template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int off) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    const unsigned lane = threadIdx.x & 31u;
    Warp& w = *g_warps[threadIdx.x >> 5];
    std::memcpy(&w.slots[lane], &v, 4);
    w.bar.arrive_and_wait();
    T r;
    std::memcpy(&r, &w.slots[lane ^ (unsigned)off], 4);
    w.bar.arrive_and_wait();
    return r;
}

// ---- The kernels, exactly as NVRTC sees them -------------------------------------------
#include "../common/formats.cuh"
#include "../nvfp4/quantize.cu"
#include "../nvfp4/dequantize.cu"
#include "../nvfp4/gemv.cu"
#include "../fp8/quantize.cu"

// Runs `kernel` on a grid, one block at a time, one std::thread per CUDA thread.
static void launch(dim3 grid, unsigned threads, const std::function<void()>& kernel) {
    gridDim = grid;
    blockDim = dim3{threads, 1, 1};
    for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            g_block_barrier = std::make_unique<std::barrier<>>(threads);
            g_warps.clear();
            for (unsigned w = 0; w < threads / 32; ++w) {
                g_warps.push_back(std::make_unique<Warp>());
            }
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < threads; ++t) {
                pool.emplace_back([=, &kernel] {
                    threadIdx = dim3{t, 0, 0};
                    blockIdx = dim3{bx, by, 0};
                    kernel();
                });
            }
            for (auto& th : pool) {
                th.join();
            }
        }
    }
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
}
