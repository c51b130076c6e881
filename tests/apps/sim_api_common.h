/* sim_api_common.h — what the sim_api_*.c test programs share: CUDA error checks that fail the
   program, a running FNV hash of results, and a pause per step (so checkpoints land mid-run). */
#ifndef SIM_API_COMMON_H
#define SIM_API_COMMON_H

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <time.h>

#include "ckpt_common.h"
#include "crac_sim.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t ck_ = (call);                                                                  \
        if (ck_ != cudaSuccess)                                                                    \
            fail("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorName(ck_));               \
    } while (0)

/* A call that must fail with exactly `want` (its error is then cleared). */
#define CK_ERR(call, want)                                                                         \
    do {                                                                                           \
        cudaError_t ck_ = (call);                                                                  \
        if (ck_ != (want))                                                                         \
            fail("%s:%d: %s returned %s, expected %s", __FILE__, __LINE__, #call,                  \
                 cudaGetErrorName(ck_), cudaGetErrorName(want));                                   \
        (void)cudaGetLastError();                                                                  \
    } while (0)

static inline uint64_t fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static inline void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline dim3 d3(unsigned x)
{
    dim3 d = {x, 1, 1};
    return d;
}

#endif
