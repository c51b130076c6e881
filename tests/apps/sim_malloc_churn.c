/* sim_malloc_churn [ROUNDS=400]: 4 host threads allocate, fill, check and free device, managed and
 * pinned memory without pause (odd sizes, so allocations end inside a page), so that checkpoints
 * at random moments land between the shim's address bookkeeping and the backend's mapping.
 * Every allocation is checked through a copy back; prints one deterministic DONE line. */
#define _POSIX_C_SOURCE 200809L
#include "../../examples/common.h"
#include "crac_sim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 4

static int rounds = 400;

struct job {
    int id;
    uint64_t sum;
    int bad;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    unsigned char probe[2];
    for (int r = 0; r < rounds && !j->bad; r++) {
        size_t size = 4096 * (size_t)(1 + (r * 7 + j->id) % 48) + (size_t)((r * 37 + j->id) % 4000);
        int value = (r + j->id) & 0xff;
        void *d = NULL;
        int managed = r % 5 == 2;
        if (managed)
            CHECK(cudaMallocManaged(&d, size, cudaMemAttachGlobal));
        else
            CHECK(cudaMalloc(&d, size));
        CHECK(cudaMemset(d, value, size));
        CHECK(cudaMemcpy(&probe[0], d, 1, cudaMemcpyDeviceToHost));
        CHECK(cudaMemcpy(&probe[1], (char *)d + size - 1, 1, cudaMemcpyDeviceToHost));
        if (probe[0] != value || probe[1] != value)
            j->bad = 1;
        j->sum += (uint64_t)size * (uint64_t)(value + 1);
        CHECK(cudaFree(d));
        if (r % 8 == 3) {
            void *h = NULL;
            CHECK(cudaMallocHost(&h, 65536 + (size_t)r));
            memset(h, value, 65536 + (size_t)r);
            j->sum += ((unsigned char *)h)[65535];
            CHECK(cudaFreeHost(h));
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]);
    if (rounds < 1) {
        fprintf(stderr, "usage: sim_malloc_churn [ROUNDS]\n");
        return 2;
    }
    pthread_t t[NTHREADS];
    struct job jobs[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        jobs[i] = (struct job){i, 0, 0};
        if (pthread_create(&t[i], NULL, worker, &jobs[i]) != 0) {
            fprintf(stderr, "sim_malloc_churn: pthread_create failed\n");
            return 1;
        }
    }
    uint64_t total = 0;
    int bad = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        total += jobs[i].sum;
        bad |= jobs[i].bad;
    }
    if (bad) {
        fprintf(stderr, "sim_malloc_churn: FAIL: an allocation read back wrong\n");
        return 1;
    }
    printf("DONE rounds=%d sum=%llu\n", rounds, (unsigned long long)total);
    return 0;
}
