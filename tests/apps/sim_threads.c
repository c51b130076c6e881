/* sim_threads: 8 threads make CUDA calls concurrently. Each has its own last error (an error in
   one thread never shows in another), and — under crac — its own lower-half TLS: the sim's
   last-error variable of each thread lives at a distinct address outside W, stable across calls. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include "crac_sim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NTHREADS 8
#define ROUNDS 400
#define W_START 0x200000000000UL
#define W_END 0x300000000000UL

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "sim_threads: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

CRAC_SIM_KERNEL(scale, (int *, x), (int, n), (int, f))
{
    int i = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    if (i < n)
        x[i] *= f;
}

static void *(*debug_tls)(void);
static int under_crac;
static uintptr_t tls_addr[NTHREADS];
static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    long id = (long)arg;
    int n = 256, h[256], *d;
    cudaStream_t s;
    uintptr_t first = (uintptr_t)debug_tls();
    tls_addr[id] = first;
    pthread_barrier_wait(&barrier); /* all threads alive at once */
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc((void **)&d, sizeof(h)) != cudaSuccess)
        FAIL("thread %ld: setup failed", id);
    for (int r = 0; r < ROUNDS; r++) {
        if (r % 3 == (int)(id % 3)) {
            /* An error of our own: only this thread's last error records it. */
            if (cudaMalloc(NULL, 8) != cudaErrorInvalidValue ||
                cudaGetLastError() != cudaErrorInvalidValue)
                FAIL("thread %ld round %d: own error not recorded", id, r);
        }
        if (cudaGetLastError() != cudaSuccess)
            FAIL("thread %ld round %d: saw another thread's error", id, r);
        for (int i = 0; i < n; i++)
            h[i] = i + (int)id;
        int f = 1 + r % 5;
        void *args[] = {&d, &n, &f};
        dim3 g = {2, 1, 1}, b = {128, 1, 1};
        if (cudaMemcpyAsync(d, h, sizeof(h), cudaMemcpyHostToDevice, s) != cudaSuccess ||
            cudaLaunchKernel((const void *)scale, g, b, args, 0, s) != cudaSuccess ||
            cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess || cudaStreamQuery(s) != cudaSuccess)
            FAIL("thread %ld round %d: a call failed", id, r);
        for (int i = 0; i < n; i++)
            if (h[i] != (i + (int)id) * f)
                FAIL("thread %ld round %d: wrong result", id, r);
        uintptr_t a = (uintptr_t)debug_tls();
        if (a != first)
            FAIL("thread %ld: its lower TLS moved from %#lx to %#lx", id, (unsigned long)first,
                 (unsigned long)a);
        if (*(volatile int *)a != cudaSuccess)
            FAIL("thread %ld: its last-error variable holds %d", id, *(volatile int *)a);
    }
    cudaFree(d);
    cudaStreamDestroy(s);
    return NULL;
}

int main(void)
{
    debug_tls = (void *(*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_debug_tls");
    int (*version)(void) = (int (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_version");
    int count;
    if (!debug_tls || !version || cudaGetDeviceCount(&count) != cudaSuccess)
        FAIL("no sim runtime");
    under_crac = version() > 0;
    pthread_t t[NTHREADS];
    pthread_barrier_init(&barrier, NULL, NTHREADS);
    for (long i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i) != 0)
            FAIL("pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    uintptr_t mine = (uintptr_t)debug_tls();
    for (int i = 0; i < NTHREADS; i++) {
        if (tls_addr[i] == mine)
            FAIL("thread %d shares the main thread's lower TLS", i);
        if (under_crac && tls_addr[i] >= W_START && tls_addr[i] < W_END)
            FAIL("thread %d: its lower TLS %#lx lies inside W", i, (unsigned long)tls_addr[i]);
        for (int j = i + 1; j < NTHREADS; j++)
            if (tls_addr[i] == tls_addr[j])
                FAIL("threads %d and %d share one lower TLS", i, j);
    }
    printf("sim_threads: %d threads x %d rounds, distinct last-error TLS: OK\n", NTHREADS, ROUNDS);
    return 0;
}
