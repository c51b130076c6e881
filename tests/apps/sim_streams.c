/* sim_streams: work on a stream runs in order (kernels, copies, memsets, host functions); events
   order work across streams (cudaStreamWaitEvent); the legacy NULL stream waits for blocking
   streams but not for non-blocking ones; host functions run on an upper-half thread under crac. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include "crac_sim.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W_START 0x200000000000UL
#define W_END 0x300000000000UL

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "sim_streams:%d: %s: %s\n", __LINE__, #call, cudaGetErrorName(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define TRUE(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "sim_streams:%d: %s is false\n", __LINE__, #cond);                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Appends k to the log: the log shows the order in which kernels ran. */
CRAC_SIM_KERNEL(append, (int *, log), (int, k)) { log[1 + log[0]++] = k; }

/* Busy for `spins` iterations (a pure loop: no libc, no clock), then stores value. */
CRAC_SIM_KERNEL(slow_store, (volatile long *, flag), (long, spins), (long, value))
{
    volatile long acc = 0;
    for (long i = 0; i < spins; i++)
        acc += i;
    *flag = value + (acc & 0);
}

CRAC_SIM_KERNEL(copy_flag, (volatile long *, dst), (volatile const long *, src)) { *dst = *src; }

CRAC_SIM_KERNEL(add_one, (int *, x), (int, n))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        x[i] += 1;
}

static dim3 d1(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

static int under_crac;
static __thread int upper_marker = 1234;

struct hostfn_arg {
    int *log; /* managed */
    int expect_len;
    int ok;
};

static void host_check(void *p)
{
    struct hostfn_arg *a = p;
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    /* Everything queued before it is done, nothing after it has started. */
    a->ok = a->log[0] == a->expect_len && upper_marker == 1234 &&
            (!under_crac || (tp >= W_START && tp < W_END));
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", a->log[0]); /* libc works here: an upper-half thread */
    a->log[1 + a->log[0]++] = 1000 + a->expect_len;
}

static void in_order(void)
{
    cudaStream_t s;
    int *log;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocManaged((void **)&log, 4096, cudaMemAttachGlobal));
    log[0] = 0;
    struct hostfn_arg ha[3];
    for (int k = 0; k < 60; k++) {
        void *args[] = {&log, &k};
        CHECK(cudaLaunchKernel((const void *)append, d1(1), d1(1), args, 0, s));
        if (k % 20 == 19) {
            struct hostfn_arg *a = &ha[k / 20];
            a->log = log;
            a->expect_len = k + 1 + k / 20;
            a->ok = 0;
            CHECK(cudaLaunchHostFunc(s, host_check, a));
        }
    }
    CHECK(cudaStreamSynchronize(s));
    TRUE(log[0] == 63);
    int j = 1;
    for (int k = 0; k < 60; k++) {
        TRUE(log[j++] == k);
        if (k % 20 == 19) {
            TRUE(log[j] == 1000 + k + 1 + k / 20);
            j++;
        }
    }
    for (int i = 0; i < 3; i++)
        TRUE(ha[i].ok);

    /* memset, kernel, copy, kernel, copy: each sees the previous one's result */
    int n = 1000, *x, *y, h[1000];
    CHECK(cudaMalloc((void **)&x, n * sizeof(int)));
    CHECK(cudaMalloc((void **)&y, n * sizeof(int)));
    void *ax[] = {&x, &n}, *ay[] = {&y, &n};
    CHECK(cudaMemsetAsync(x, 0, n * sizeof(int), s));
    CHECK(cudaLaunchKernel((const void *)add_one, d1(4), d1(256), ax, 0, s));
    CHECK(cudaMemcpyAsync(y, x, n * sizeof(int), cudaMemcpyDeviceToDevice, s));
    CHECK(cudaLaunchKernel((const void *)add_one, d1(4), d1(256), ay, 0, s));
    CHECK(cudaLaunchKernel((const void *)add_one, d1(4), d1(256), ay, 0, s));
    CHECK(cudaMemcpyAsync(h, y, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++)
        TRUE(h[i] == 3);
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(log));
    CHECK(cudaStreamDestroy(s));
    printf("in order: ok\n");
}

#define SLOW 60000000L /* tens of milliseconds of spinning */

static void cross_stream(void)
{
    cudaStream_t a, b;
    cudaEvent_t done, t0, t1;
    long *flag, *seen, result = 0;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&done));
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    CHECK(cudaMalloc((void **)&flag, sizeof(long)));
    CHECK(cudaMalloc((void **)&seen, sizeof(long)));
    CHECK(cudaMemset(flag, 0, sizeof(long)));
    CHECK(cudaMemset(seen, 0xff, sizeof(long)));
    long spins = SLOW, value = 42;
    void *slow_args[] = {&flag, &spins, &value};
    void *copy_args[] = {&seen, &flag};
    CHECK(cudaEventRecord(t0, a));
    CHECK(cudaLaunchKernel((const void *)slow_store, d1(1), d1(1), slow_args, 0, a));
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaEventRecord(t1, a));
    TRUE(cudaEventQuery(done) == cudaErrorNotReady); /* the slow kernel is still running */
    TRUE(cudaStreamQuery(a) == cudaErrorNotReady);
    CHECK(cudaStreamWaitEvent(b, done, 0));
    CHECK(cudaLaunchKernel((const void *)copy_flag, d1(1), d1(1), copy_args, 0, b));
    CHECK(cudaMemcpyAsync(&result, seen, sizeof(long), cudaMemcpyDeviceToHost, b));
    CHECK(cudaStreamSynchronize(b));
    TRUE(result == 42); /* b waited for a's kernel */
    TRUE(cudaEventQuery(done) == cudaSuccess);
    float ms = -1;
    CHECK(cudaEventSynchronize(t1));
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    TRUE(ms > 1.0f);
    fprintf(stderr, "sim_streams: slow kernel took %.1f ms\n", ms);
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    CHECK(cudaEventDestroy(done));
    CHECK(cudaEventDestroy(t0));
    CHECK(cudaEventDestroy(t1));
    CHECK(cudaFree(flag));
    CHECK(cudaFree(seen));
    printf("cross-stream wait: ok\n");
}

/* Legacy default stream: NULL-stream work waits for earlier work on blocking streams (and later
 * blocking-stream work waits for it), but not for non-blocking streams. */
static void legacy_stream(void)
{
    cudaStream_t blocking, nonblocking;
    long *flag, *seen, result = 0;
    CHECK(cudaStreamCreate(&blocking));
    CHECK(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking));
    CHECK(cudaMalloc((void **)&flag, 2 * sizeof(long)));
    CHECK(cudaMalloc((void **)&seen, sizeof(long)));
    CHECK(cudaMemset(flag, 0, 2 * sizeof(long)));
    long spins = SLOW, value = 7;
    void *slow_args[] = {&flag, &spins, &value};
    void *copy_args[] = {&seen, &flag};
    CHECK(cudaLaunchKernel((const void *)slow_store, d1(1), d1(1), slow_args, 0, blocking));
    CHECK(cudaLaunchKernel((const void *)copy_flag, d1(1), d1(1), copy_args, 0, NULL));
    CHECK(cudaMemcpy(&result, seen, sizeof(long), cudaMemcpyDeviceToHost));
    TRUE(result == 7); /* the NULL stream waited for the blocking stream */

    long *flag2 = flag + 1, big = SLOW * 4, value2 = 9;
    void *slow2[] = {&flag2, &big, &value2};
    CHECK(cudaLaunchKernel((const void *)slow_store, d1(1), d1(1), slow2, 0, nonblocking));
    CHECK(cudaMemsetAsync(seen, 0, sizeof(long), NULL));
    CHECK(cudaStreamSynchronize(NULL));
    TRUE(cudaStreamQuery(nonblocking) == cudaErrorNotReady); /* not waited for */
    CHECK(cudaDeviceSynchronize());
    TRUE(cudaStreamQuery(nonblocking) == cudaSuccess);
    CHECK(cudaStreamDestroy(blocking));
    CHECK(cudaStreamDestroy(nonblocking));
    CHECK(cudaFree(flag));
    CHECK(cudaFree(seen));
    printf("legacy default stream: ok\n");
}

int main(void)
{
    int (*version)(void) = (int (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_version");
    under_crac = version && version() > 0;
    in_order();
    cross_stream();
    legacy_stream();
    printf("sim_streams: OK\n");
    return 0;
}
