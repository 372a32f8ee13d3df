// The CUDA surface the kernels use, for compiling them as host C++ (the emulated CUDA
// device, `edge_core::cuda::CudaDevice::emulated`, and the numpy checkers' emulate.cpp).
//
// A block's threads run as cooperative fibers on one OS thread (simt.cpp): a thread runs
// until it reaches a barrier (__syncthreads, a warp shuffle, an mma), then the next one
// runs. Blocks run on as many OS threads as the caller gives them, so `__shared__` is a
// thread_local static: one copy per OS thread, shared by the fibers of the block running
// there. The GPU's arithmetic beyond IEEE f32 (which host and GPU share: fmaf, division,
// no FTZ) is emulated where the kernels rely on it: bf16x2 products, __byte_perm and the
// bf16 mma tile (sums in k order, so within f32 rounding of the tensor cores, not equal).
//
// Only this header is included by kernel code; the scheduler is simt.cpp.

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#define EQ_HOST_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__ __restrict

// A plain aggregate (no initialisers), so the thread_local copies below need no TLS
// wrapper calls.
struct dim3 {
    unsigned x, y, z;
};

// The executing CUDA thread's coordinates, switched by the scheduler with the fiber.
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
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
static inline int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll((unsigned long long)x);
}
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
template <typename T>
static inline T __ldg(const T* p) {
    return *p;
}

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

// Atomics: blocks may run on different OS threads, so these are real atomics.
template <typename T, typename Keep>
static inline T eq_simt_atomic_update(T* p, T v, Keep keep_old) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!keep_old(old, v) &&
           !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
static inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    return eq_simt_atomic_update(p, v, [](auto old, auto v) { return old <= v; });
}
static inline unsigned atomicMax(unsigned* p, unsigned v) {
    return eq_simt_atomic_update(p, v, [](auto old, auto v) { return old >= v; });
}
static inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}

// ---- The scheduler's side (simt.cpp) -------------------------------------------------
// Waits until every live thread of the block has arrived.
void eq_simt_syncthreads();
// Lane `lane ^ off`'s value of the calling lane's warp-wide exchange (one warp barrier).
unsigned eq_simt_shfl_xor(unsigned v, int off);
// The warp's mma fragments gathered at one warp barrier: fills this lane's 4 outputs.
void eq_simt_mma_bf16_16816(float* d, const unsigned* a, const unsigned* b);

static inline void __syncthreads() { eq_simt_syncthreads(); }

template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int off) {
    static_assert(sizeof(T) == 4, "32-bit shuffles only");
    unsigned u;
    std::memcpy(&u, &v, 4);
    u = eq_simt_shfl_xor(u, off);
    T r;
    std::memcpy(&r, &u, 4);
    return r;
}

// __byte_perm: result byte n is byte ((s >> 4n) & 7) of {y, x} (x = bytes 0..3).
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long in = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int n = 0; n < 4; ++n) {
        const unsigned sel = (s >> (4 * n)) & 7u;
        r |= (unsigned)((in >> (8 * sel)) & 0xffu) << (8 * n);
    }
    return r;
}

static inline float eq_simt_bf16(unsigned bits16) {
    return __uint_as_float((bits16 & 0xffffu) << 16);
}

static inline unsigned eq_simt_bf16_rne(float f) {
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u >> 16) | 0x40u;
    }
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// fma.rn.bf16x2 a, b, -0: each bf16 product (exact in f32) rounded once to bf16.
static inline unsigned eq_bf16x2_mul(unsigned a, unsigned b) {
    const unsigned lo = eq_simt_bf16_rne(eq_simt_bf16(a) * eq_simt_bf16(b));
    const unsigned hi = eq_simt_bf16_rne(eq_simt_bf16(a >> 16) * eq_simt_bf16(b >> 16));
    return lo | (hi << 16);
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (d += A·B for the warp's tile).
static inline void eq_mma_bf16_16816(float* d, const unsigned* a, const unsigned* b) {
    eq_simt_mma_bf16_16816(d, a, b);
}

// ---- Launch interface (C ABI; edge-core's Rust side and emulate.cpp call it) ----------
extern "C" {
// Runs blocks first .. first + count (linear, x fastest) of `grid` with `block` threads
// each, on the calling OS thread, calling entry(args) in every thread. Returns 0, or
// 1 when the block has more than 1024 threads or none.
int eq_simt_run_blocks(void (*entry)(void**), void** args, const unsigned* grid,
                       const unsigned* block, unsigned long long first,
                       unsigned long long count);
// Device memory: zeroed, 256-byte aligned (as cudaMalloc), one allocation each so that a
// sanitizer build bounds-checks every buffer; freed with the size it was allocated with.
void* eq_simt_alloc(unsigned long long bytes);
void eq_simt_free(void* p, unsigned long long bytes);
}
