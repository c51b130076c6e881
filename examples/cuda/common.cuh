// common.cuh — shared by the examples/cuda programs: arguments, `step N` lines, CUDA error checks.
#ifndef CRAC_EXAMPLES_CUDA_COMMON_CUH
#define CRAC_EXAMPLES_CUDA_COMMON_CUH

#include <cstdio>
#include <cstdlib>
#include <ctime>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                          \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// argv[1]: steps, argv[2]: milliseconds to sleep after each step (so a checkpoint can land).
static inline void parse_args(int argc, char **argv, long *steps, long *ms)
{
    *steps = argc > 1 ? strtol(argv[1], nullptr, 10) : 20;
    *ms = argc > 2 ? strtol(argv[2], nullptr, 10) : 0;
    if (*steps < 1 || *ms < 0) {
        fprintf(stderr, "usage: %s [STEPS] [MS]\n", argv[0]);
        exit(2);
    }
}

static inline void step_done(long k, long ms)
{
    printf("step %ld\n", k);
    fflush(stdout);
    if (ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, nullptr);
    }
}

#endif
