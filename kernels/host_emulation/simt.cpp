// The emulated device's scheduler: runs a CUDA block's threads as cooperative fibers on
// one OS thread (see simt.h). A fiber runs until it waits at a barrier, then the next
// live fiber of the block runs (round robin), so a barrier costs one switch per thread
// and a block of 256 threads runs at about the speed of a loop over them. One OS thread
// per CUDA thread (the numpy checkers' first emulator) was too slow for whole models.
//
// The switch is a few instructions of assembly on x86-64 Linux (callee-saved registers,
// MXCSR and the x87 control word); elsewhere it is ucontext's swapcontext. Under
// AddressSanitizer the switches are announced to it, and fiber stacks are larger.

#include "simt.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define EQ_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EQ_SIMT_ASAN 1
#endif
#endif
#ifdef EQ_SIMT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// Elsewhere, or when built with -DEQ_SIMT_UCONTEXT (to test that path on x86-64).
#if !(defined(__x86_64__) && defined(__linux__)) && !defined(EQ_SIMT_UCONTEXT)
#define EQ_SIMT_UCONTEXT 1
#endif
#ifdef EQ_SIMT_UCONTEXT
#include <ucontext.h>
#endif

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

#ifndef EQ_SIMT_UCONTEXT
// eq_simt_switch(save, next): saves the callee-saved state on the current stack, stores
// the stack pointer in *save, and resumes the context whose stack pointer is `next`.
extern "C" void eq_simt_switch(void** save, void* next);
asm(R"(
    .text
    .p2align 4
    .globl eq_simt_switch
    .hidden eq_simt_switch
    .type eq_simt_switch, @function
eq_simt_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size eq_simt_switch, .-eq_simt_switch
)");
#endif

namespace {

#ifdef EQ_SIMT_ASAN
constexpr size_t kStackBytes = 1u << 20;
#else
constexpr size_t kStackBytes = 256u << 10;
#endif
constexpr unsigned kMaxThreads = 1024;

// A saved execution context and the stack it runs on.
struct Context {
#ifdef EQ_SIMT_UCONTEXT
    ucontext_t uc;
#else
    void* sp = nullptr;
#endif
    void* stack_lo = nullptr;
    size_t stack_size = 0;
};

struct Fiber {
    Context ctx;
    dim3 idx;
    unsigned linear;
    bool done;
};

struct Warp {
    unsigned live, arrived, gen;
    // Double-buffered exchange areas: a lane can reach the next exchange only after the
    // next barrier, which every lane reaches only after reading this one.
    unsigned shfl[2][32];
    unsigned shfl_seq[32];
    unsigned mma_a[2][32][4];
    unsigned mma_b[2][32][2];
    unsigned mma_seq[32];
};

struct Block {
    void (*entry)(void**);
    void** args;
    unsigned threads, live, arrived, gen, current;
    // Waits since the last arrival, release or exit: past two rounds, nobody can move.
    unsigned idle_waits;
    Context main;
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    std::vector<void*> stacks;  // mmap'd, a guard page below each; reused
};

thread_local Block* t_block = nullptr;

[[noreturn]] void fiber_start();

void* map_stack() {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void* p = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        std::fprintf(stderr, "emulated CUDA device: cannot map a fiber stack\n");
        std::abort();
    }
    mprotect(p, page, PROT_NONE);  // overflow faults instead of corrupting a neighbour
    return (char*)p + page;
}

// The OS thread's own stack, for the sanitizer's bookkeeping of the scheduler context.
void thread_stack(Context& c) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        pthread_attr_getstack(&attr, &c.stack_lo, &c.stack_size);
        pthread_attr_destroy(&attr);
    }
}

Block& block_state() {
    if (t_block == nullptr) {
        t_block = new Block();  // one per OS thread, kept for its lifetime
        thread_stack(t_block->main);
    }
    return *t_block;
}

void init_fiber(Fiber& f, void* stack) {
#ifdef EQ_SIMT_ASAN
    // The stack's last fiber left its frames' redzones poisoned.
    __asan_unpoison_memory_region(stack, kStackBytes);
#endif
    f.ctx.stack_lo = stack;
    f.ctx.stack_size = kStackBytes;
#ifdef EQ_SIMT_UCONTEXT
    getcontext(&f.ctx.uc);
    f.ctx.uc.uc_stack.ss_sp = stack;
    f.ctx.uc.uc_stack.ss_size = kStackBytes;
    f.ctx.uc.uc_link = nullptr;
    makecontext(&f.ctx.uc, fiber_start, 0);
#else
    // The frame eq_simt_switch pops: MXCSR and x87 control word, six registers, then
    // `ret` into fiber_start with the stack as after a call (rsp ≡ 8 mod 16).
    unsigned long long* top = (unsigned long long*)((char*)stack + kStackBytes);
    unsigned mxcsr;
    unsigned short fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    top[-1] = 0;
    top[-2] = (unsigned long long)&fiber_start;
    for (int r = 3; r <= 8; ++r) {
        top[-r] = 0;
    }
    top[-9] = (unsigned long long)mxcsr | ((unsigned long long)fpucw << 32);
    f.ctx.sp = &top[-9];
#endif
}

// Switches from `from` to `to`; `dying` when `from` never runs again.
void switch_context(Context& from, Context& to, bool dying) {
#ifdef EQ_SIMT_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, to.stack_lo, to.stack_size);
#else
    (void)dying;
#endif
#ifdef EQ_SIMT_UCONTEXT
    swapcontext(&from.uc, &to.uc);
#else
    eq_simt_switch(&from.sp, to.sp);
#endif
#ifdef EQ_SIMT_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void resume(Block& b, unsigned next, bool dying) {
    Fiber& from = b.fibers[b.current];
    b.current = next;
    threadIdx = b.fibers[next].idx;
    switch_context(from.ctx, b.fibers[next].ctx, dying);
}

// The next live fiber after the current one (the current one when it is the only one).
unsigned next_live(const Block& b) {
    unsigned i = b.current;
    do {
        i = i + 1 == b.threads ? 0 : i + 1;
    } while (b.fibers[i].done && i != b.current);
    return i;
}

void yield(Block& b) {
    if (++b.idle_waits > 2 * b.live + 2) {
        std::fprintf(stderr,
                     "emulated CUDA device: deadlock in block (%u, %u, %u): %u of %u threads "
                     "wait at a barrier the others never reach\n",
                     blockIdx.x, blockIdx.y, blockIdx.z, b.live, b.threads);
        std::abort();
    }
    const unsigned next = next_live(b);
    if (next != b.current) {
        resume(b, next, false);
    }
}

Fiber& current_fiber(Block& b) { return b.fibers[b.current]; }

// Arrives at the barrier counted by (arrived, gen) for `live` threads and waits for it.
void barrier(Block& b, unsigned& arrived, unsigned& gen, const unsigned& live) {
    b.idle_waits = 0;
    const unsigned mine = gen;
    if (++arrived == live) {
        arrived = 0;
        ++gen;
        return;
    }
    while (gen == mine) {
        yield(b);
    }
}

// Releases a barrier whose remaining waiters are all there once a thread has exited.
void release_if_complete(unsigned& arrived, unsigned& gen, unsigned live) {
    if (arrived > 0 && arrived >= live) {
        arrived = 0;
        ++gen;
    }
}

[[noreturn]] void fiber_start() {
#ifdef EQ_SIMT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
    Block& b = *t_block;
    b.entry(b.args);
    Fiber& f = current_fiber(b);
    Warp& w = b.warps[f.linear >> 5];
    f.done = true;
    b.idle_waits = 0;
    --b.live;
    --w.live;
    release_if_complete(b.arrived, b.gen, b.live);
    release_if_complete(w.arrived, w.gen, w.live);
    if (b.live == 0) {
        switch_context(f.ctx, b.main, true);
    } else {
        resume(b, next_live(b), true);
    }
    std::abort();  // a finished fiber is never resumed
}

Warp& current_warp(Block& b, unsigned& lane) {
    const unsigned linear = current_fiber(b).linear;
    lane = linear & 31u;
    return b.warps[linear >> 5];
}

float bf16_lo(unsigned v) { return eq_simt_bf16(v); }
float bf16_hi(unsigned v) { return eq_simt_bf16(v >> 16); }

}  // namespace

void eq_simt_syncthreads() {
    Block& b = *t_block;
    barrier(b, b.arrived, b.gen, b.live);
}

unsigned eq_simt_shfl_xor(unsigned v, int off) {
    Block& b = *t_block;
    unsigned lane;
    Warp& w = current_warp(b, lane);
    const unsigned buf = w.shfl_seq[lane]++ & 1u;
    w.shfl[buf][lane] = v;
    barrier(b, w.arrived, w.gen, w.live);
    return w.shfl[buf][(lane ^ (unsigned)off) & 31u];
}

// Lane (g, q) holds A rows g and g+8 (registers 0/1), slots 2q, 2q+1 (registers 0, 1)
// and 2q+8, 2q+9 (registers 2, 3); B column g, slots 2q, 2q+1 (b0) and 2q+8, 2q+9 (b1);
// C rows g (c0, c1) and g+8 (c2, c3), columns 2q, 2q+1 (PTX ISA, mma.m16n8k16 .bf16).
void eq_simt_mma_bf16_16816(float* d, const unsigned* a, const unsigned* b) {
    Block& blk = *t_block;
    unsigned lane;
    Warp& w = current_warp(blk, lane);
    const unsigned buf = w.mma_seq[lane]++ & 1u;
    for (int r = 0; r < 4; ++r) {
        w.mma_a[buf][lane][r] = a[r];
    }
    w.mma_b[buf][lane][0] = b[0];
    w.mma_b[buf][lane][1] = b[1];
    barrier(blk, w.arrived, w.gen, w.live);
    const unsigned g = lane >> 2, q = lane & 3u;
    for (unsigned r = 0; r < 4; ++r) {
        const unsigned row = g + 8u * (r >> 1), col = 2u * q + (r & 1u);
        float acc = d[r];
        for (unsigned k = 0; k < 16; ++k) {
            const unsigned kq = (k & 7u) >> 1, hi = k >> 3, odd = k & 1u;
            const unsigned av = w.mma_a[buf][(row & 7u) * 4u + kq][(row >> 3) + 2u * hi];
            const unsigned bv = w.mma_b[buf][col * 4u + kq][hi];
            const float x = odd ? bf16_hi(av) : bf16_lo(av);
            const float y = odd ? bf16_hi(bv) : bf16_lo(bv);
            acc += x * y;
        }
        d[r] = acc;
    }
}

extern "C" int eq_simt_run_blocks(void (*entry)(void**), void** args, const unsigned* grid,
                                  const unsigned* block, unsigned long long first,
                                  unsigned long long count) {
    const unsigned threads = block[0] * block[1] * block[2];
    if (threads == 0 || threads > kMaxThreads) {
        return 1;
    }
    Block& b = block_state();
    while (b.stacks.size() < threads) {
        b.stacks.push_back(map_stack());
    }
    b.entry = entry;
    b.args = args;
    b.threads = threads;
    b.fibers.resize(threads);
    b.warps.resize((threads + 31) / 32);
    gridDim = dim3{grid[0], grid[1], grid[2]};
    blockDim = dim3{block[0], block[1], block[2]};
    for (unsigned long long id = first; id < first + count; ++id) {
        blockIdx = dim3{(unsigned)(id % grid[0]), (unsigned)(id / grid[0] % grid[1]),
                        (unsigned)(id / grid[0] / grid[1])};
        for (unsigned t = 0; t < threads; ++t) {
            Fiber& f = b.fibers[t];
            f.idx = dim3{t % block[0], t / block[0] % block[1], t / block[0] / block[1]};
            f.linear = t;
            f.done = false;
            init_fiber(f, b.stacks[t]);
        }
        for (unsigned i = 0; i < b.warps.size(); ++i) {
            Warp& w = b.warps[i];
            std::memset(&w, 0, sizeof w);
            w.live = threads - 32 * i < 32 ? threads - 32 * i : 32;
        }
        b.live = threads;
        b.arrived = 0;
        b.gen = 0;
        b.idle_waits = 0;
        b.current = 0;
        threadIdx = b.fibers[0].idx;
        switch_context(b.main, b.fibers[0].ctx, false);
    }
    return 0;
}

// Large buffers (a cache's pools reserve the whole budget) are mapped, so their pages
// are zero until touched; AddressSanitizer builds keep every buffer on the heap, where
// it bounds-checks them.
#ifdef EQ_SIMT_ASAN
constexpr unsigned long long kMapBytes = ~0ull;
#else
constexpr unsigned long long kMapBytes = 1ull << 20;
#endif

extern "C" void* eq_simt_alloc(unsigned long long bytes) {
    if (bytes >= kMapBytes) {
        void* p = mmap(nullptr, (size_t)bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
    }
    void* p = nullptr;
    if (posix_memalign(&p, 256, bytes == 0 ? 1 : (size_t)bytes) != 0) {
        return nullptr;
    }
    std::memset(p, 0, (size_t)bytes);
    return p;
}

extern "C" void eq_simt_free(void* p, unsigned long long bytes) {
    if (bytes >= kMapBytes) {
        munmap(p, (size_t)bytes);
    } else {
        std::free(p);
    }
}
