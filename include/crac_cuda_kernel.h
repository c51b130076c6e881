/* crac_cuda_kernel.h — compiles the device code of a CUDA C++ source for the CPU, for crac's sim:
 * `crac kernels app.cu -o app.kernels.so` force-includes it (docs/SIM.md "Programs built by nvcc"). */
#ifndef CRAC_CUDA_KERNEL_H
#define CRAC_CUDA_KERNEL_H

#ifndef __cplusplus
#error "crac_cuda_kernel.h is for C++ (CUDA C++ sources compiled by crac kernels)"
#endif

/*
 * What the macros below do to a .cu file compiled with g++/clang:
 *
 * - __global__ functions get protected visibility: that is how `crac kernels` tells them apart
 *   from every other function of the object, and lists them in the library's table under their
 *   mangled name (the device name nvcc's __cudaRegisterFunction passes).
 * - __device__/__constant__/__managed__ variables get default visibility, so that -fPIC code
 *   reaches them through the GOT; the sim points those GOT entries at the device memory it
 *   allocated for the variable (that memory is saved at a checkpoint; the library's own copy only
 *   holds the initial value).
 * - Host code compiles (CUDA's host API is declared by cuda_runtime.h) but is hidden and dropped
 *   by the linker (--gc-sections); `<<<...>>>` launches are rewritten by crac kernels first.
 * - __shared__ variables are thread-local: all the CUDA threads of a block run on one CPU thread
 *   (as fibers), so they share them; blocks of concurrent streams run on different CPU threads.
 *   `extern __shared__ T name[];` (dynamic shared memory) is rewritten by crac kernels into
 *   `T *const name = (T *)crac_dynamic_shared();`, the launch's sharedMem bytes.
 * - threadIdx/blockIdx/blockDim/gridDim read the running fiber's block state; __syncthreads()
 *   switches to the next thread of the block (every thread reaches the barrier before any passes).
 */

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include <sys/mman.h>
#include <ucontext.h>

#include "crac_kernels_abi.h"

#undef __global__
#undef __device__
#undef __host__
#undef __constant__
#undef __managed__
#undef __shared__
#undef __forceinline__
#undef __noinline__
#undef __launch_bounds__
#undef __grid_constant__

#define __global__ __attribute__((visibility("protected"), used))
#define __device__ __attribute__((visibility("default")))
#define __host__
#define __constant__ __attribute__((visibility("default")))
#define __managed__ __attribute__((visibility("default")))
#define __shared__ static __thread
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__

namespace crac
{

struct fiber {
    uint3 tid;
    ucontext_t ctx;
    int done;
};

struct block_state {
    dim3 grid, block;
    uint3 bidx;
    ucontext_t sched;
    fiber *cur;
    int fault;
    const crac_kernel_entry *k;
    void **args;
    void *dyn_shared;
};

} // namespace crac

/* The block the calling CPU thread runs (thread-local: streams run on their own workers); one
 * variable for the whole library, defined by the table's translation unit. */
extern "C" __attribute__((visibility("hidden"))) __thread crac::block_state *crac_blk;

#ifdef CRAC_KERNELS_TABLE_TU
__thread crac::block_state *crac_blk;

namespace crac
{
/* The block the calling CPU thread runs (thread-local: streams run on their own workers). */
static __thread fiber *fibers;
static __thread char *stacks;
static __thread size_t stacks_n;

static const size_t STACK = 256 * 1024;

static void fiber_main()
{
    crac_blk->k->call(crac_blk->args);
    crac_blk->cur->done = 1; /* uc_link returns to the scheduler */
}

static int ensure(size_t n)
{
    if (n <= stacks_n)
        return 0;
    if (stacks) {
        munmap(stacks, stacks_n * STACK);
        munmap(fibers, stacks_n * sizeof(fiber));
    }
    stacks = (char *)mmap(nullptr, n * STACK, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    fibers = (fiber *)mmap(nullptr, n * sizeof(fiber), PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stacks == MAP_FAILED || fibers == MAP_FAILED) {
        stacks = nullptr;
        fibers = nullptr;
        stacks_n = 0;
        return -1;
    }
    stacks_n = n;
    return 0;
}

/* One block: every thread is a fiber; a round runs each unfinished thread until it finishes or
 * reaches __syncthreads(), so no thread passes a barrier before all reached it. */
int run_block(const crac_kernel_entry *k, void **args, const crac_kernel_block *b)
{
    size_t n = (size_t)b->block.x * b->block.y * b->block.z;
    if (ensure(n) != 0)
        return CRAC_KERNEL_NO_MEMORY;
    block_state st;
    st.grid = b->grid;
    st.block = b->block;
    st.bidx = b->block_idx;
    st.fault = 0;
    st.k = k;
    st.args = args;
    st.dyn_shared = b->shared;
    block_state *saved = crac_blk;
    crac_blk = &st;
    size_t i = 0;
    for (unsigned z = 0; z < b->block.z; z++)
        for (unsigned y = 0; y < b->block.y; y++)
            for (unsigned x = 0; x < b->block.x; x++, i++) {
                fiber *f = &fibers[i];
                f->tid = uint3{x, y, z};
                f->done = 0;
                getcontext(&f->ctx);
                f->ctx.uc_stack.ss_sp = stacks + i * STACK;
                f->ctx.uc_stack.ss_size = STACK;
                f->ctx.uc_link = &st.sched;
                makecontext(&f->ctx, fiber_main, 0);
            }
    size_t left = n;
    while (left && !st.fault) {
        for (i = 0; i < n && !st.fault; i++) {
            fiber *f = &fibers[i];
            if (f->done)
                continue;
            st.cur = f;
            swapcontext(&st.sched, &f->ctx);
            if (f->done)
                left--;
        }
    }
    crac_blk = saved;
    return st.fault;
}

} // namespace crac
#endif

namespace crac
{
template <auto F> struct kernel_of;

template <typename... A, void (*F)(A...)> struct kernel_of<F> {
    static_assert(sizeof...(A) <= CRAC_KERNEL_MAX_PARAMS, "too many kernel parameters");
    template <size_t... I> static void call_i(void **args, std::index_sequence<I...>)
    {
        (void)args;
        F(*static_cast<std::remove_cv_t<A> *>(args[I])...);
    }
    static void call(void **args) { call_i(args, std::index_sequence_for<A...>{}); }
    static constexpr crac_kernel_entry entry(const char *name, const char *pretty)
    {
        crac_kernel_entry e{};
        e.name = name;
        e.pretty = pretty;
        e.call = &call;
        e.n_params = sizeof...(A);
        const uint32_t sizes[] = {0u, (uint32_t)sizeof(A)...};
        const uint32_t aligns[] = {0u, (uint32_t)alignof(A)...};
        for (uint32_t i = 0; i < sizeof...(A); i++) {
            e.param_size[i] = sizes[i + 1];
            e.param_align[i] = aligns[i + 1];
        }
        return e;
    }
};

} // namespace crac

/* `extern __shared__ T name[];` is rewritten by crac kernels into a pointer to this. */
static inline void *crac_dynamic_shared() { return ::crac_blk->dyn_shared; }

#define threadIdx (::crac_blk->cur->tid)
#define blockIdx (::crac_blk->bidx)
#define blockDim (::crac_blk->block)
#define gridDim (::crac_blk->grid)
#define warpSize 32

static inline void __syncthreads() { swapcontext(&::crac_blk->cur->ctx, &::crac_blk->sched); }
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* A device-side trap: the launch fails (cudaErrorLaunchFailure, sticky). */
static inline void __trap()
{
    ::crac_blk->fault = CRAC_KERNEL_TRAP;
    swapcontext(&::crac_blk->cur->ctx, &::crac_blk->sched); /* never resumed */
    __builtin_unreachable();
}
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
template <typename T> static inline T __ldg(const T *p) { return *p; }

/* ---- atomics (a block's threads share a CPU thread, but blocks of other streams do not) ---- */
#define CRAC__ATOMIC_INT(T)                                                                        \
    static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }    \
    static inline T atomicSub(T *p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }    \
    static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }  \
    static inline T atomicAnd(T *p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }    \
    static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }      \
    static inline T atomicXor(T *p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }    \
    static inline T atomicCAS(T *p, T cmp, T v)                                                    \
    {                                                                                              \
        __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
        return cmp;                                                                                \
    }                                                                                              \
    static inline T atomicMin(T *p, T v)                                                           \
    {                                                                                              \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                              \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST,        \
                                                       __ATOMIC_SEQ_CST)) {                        \
        }                                                                                          \
        return old;                                                                                \
    }                                                                                              \
    static inline T atomicMax(T *p, T v)                                                           \
    {                                                                                              \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                              \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST,        \
                                                       __ATOMIC_SEQ_CST)) {                        \
        }                                                                                          \
        return old;                                                                                \
    }
CRAC__ATOMIC_INT(int)
CRAC__ATOMIC_INT(unsigned int)
CRAC__ATOMIC_INT(unsigned long long)
CRAC__ATOMIC_INT(long long)
#undef CRAC__ATOMIC_INT

/* Floating-point atomics: compare-and-swap on the bits. */
#define CRAC__ATOMIC_FP(T, U)                                                                      \
    static inline T atomicAdd(T *p, T v)                                                           \
    {                                                                                              \
        U *q = reinterpret_cast<U *>(p);                                                           \
        U old = __atomic_load_n(q, __ATOMIC_SEQ_CST), nv;                                          \
        T f;                                                                                       \
        do {                                                                                       \
            std::memcpy(&f, &old, sizeof f);                                                       \
            f += v;                                                                                \
            std::memcpy(&nv, &f, sizeof f);                                                        \
        } while (                                                                                  \
            !__atomic_compare_exchange_n(q, &old, nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)); \
        std::memcpy(&f, &old, sizeof f);                                                           \
        return f;                                                                                  \
    }                                                                                              \
    static inline T atomicExch(T *p, T v)                                                          \
    {                                                                                              \
        U nv, old;                                                                                 \
        std::memcpy(&nv, &v, sizeof v);                                                            \
        old = __atomic_exchange_n(reinterpret_cast<U *>(p), nv, __ATOMIC_SEQ_CST);                 \
        T f;                                                                                       \
        std::memcpy(&f, &old, sizeof f);                                                           \
        return f;                                                                                  \
    }
CRAC__ATOMIC_FP(float, uint32_t)
CRAC__ATOMIC_FP(double, uint64_t)
#undef CRAC__ATOMIC_FP

static inline unsigned int atomicInc(unsigned int *p, unsigned int limit)
{
    unsigned int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, old >= limit ? 0u : old + 1, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}
static inline unsigned int atomicDec(unsigned int *p, unsigned int limit)
{
    unsigned int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(p, &old, (old == 0 || old > limit) ? limit : old - 1, false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
}

/* ---- fast-math intrinsics: the plain libm functions ---- */
static inline float __fdividef(float a, float b) { return a / b; }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __powf(a, b) powf(a, b)
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
static inline int __float_as_int(float f)
{
    int i;
    std::memcpy(&i, &f, sizeof i);
    return i;
}
static inline float __int_as_float(int i)
{
    float f;
    std::memcpy(&f, &i, sizeof f);
    return f;
}

/* ---- host code: it must compile, it never runs. nvcc's cuda_runtime.h declares these C++
 * symbol overloads only for __CUDACC__; a source whose host code still does not compile can hide it
 * with #ifndef CRAC_KERNELS. ---- */
#define CRAC_KERNELS 1
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(const T &sym, const void *src, size_t n = sizeof(T),
                                             size_t off = 0,
                                             cudaMemcpyKind k = cudaMemcpyHostToDevice)
{
    return ::cudaMemcpyToSymbol((const void *)&sym, src, n, off, k);
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void *dst, const T &sym, size_t n = sizeof(T),
                                               size_t off = 0,
                                               cudaMemcpyKind k = cudaMemcpyDeviceToHost)
{
    return ::cudaMemcpyFromSymbol(dst, (const void *)&sym, n, off, k);
}
template <class T>
static inline cudaError_t
cudaMemcpyToSymbolAsync(const T &sym, const void *src, size_t n = sizeof(T), size_t off = 0,
                        cudaMemcpyKind k = cudaMemcpyHostToDevice, cudaStream_t s = 0)
{
    return ::cudaMemcpyToSymbolAsync((const void *)&sym, src, n, off, k, s);
}
template <class T>
static inline cudaError_t
cudaMemcpyFromSymbolAsync(void *dst, const T &sym, size_t n = sizeof(T), size_t off = 0,
                          cudaMemcpyKind k = cudaMemcpyDeviceToHost, cudaStream_t s = 0)
{
    return ::cudaMemcpyFromSymbolAsync(dst, (const void *)&sym, n, off, k, s);
}
template <class T> static inline cudaError_t cudaGetSymbolAddress(void **p, const T &sym)
{
    return ::cudaGetSymbolAddress(p, (const void *)&sym);
}
template <class T> static inline cudaError_t cudaGetSymbolSize(size_t *n, const T &sym)
{
    return ::cudaGetSymbolSize(n, (const void *)&sym);
}

#endif
