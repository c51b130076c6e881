/* ckpt_openmp [STEPS=150] [MS=10]: OpenMP (libgomp) with 4 threads on however many CPUs: per step
   a dynamically scheduled parallel loop with an integer reduction over 1 Mi doubles, 8 tasks and a
   barrier; prints `step K`, then `DONE checksum=... steps=STEPS` over the reductions (integer
   sums: the same whatever the schedule). */
#include <omp.h>
#include <stdint.h>

#define PROG "ckpt_openmp"
#define USAGE "[STEPS] [MS]"
#include "../ckpt_common.h"

#define N (1 << 20)

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 150, 1, 1000000), ms = arg(argc, argv, 2, 10, 0, 10000);
    omp_set_num_threads(4);
    double *a = malloc(N * sizeof(double));
    if (!a)
        fail("out of memory");
    for (int i = 0; i < N; i++)
        a[i] = i * 1e-6;
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        uint64_t s = 0, tasks = 0;
#pragma omp parallel for reduction(+ : s) schedule(dynamic, 4096)
        for (int i = 0; i < N; i++) {
            a[i] = a[i] * 0.999 + 1e-3 * (i % 7);
            s += (uint64_t)(a[i] * 1e6);
        }
#pragma omp parallel
        {
#pragma omp single
            for (int t = 0; t < 8; t++) {
#pragma omp task
                {
                    uint64_t x = 0;
                    for (int j = 0; j < 10000; j++)
                        x += (uint64_t)j * (uint64_t)(t + 1);
#pragma omp atomic
                    tasks += x;
                }
            }
#pragma omp barrier
        }
        if (omp_get_max_threads() != 4)
            fail("step %ld: %d OpenMP threads, not 4", k, omp_get_max_threads());
        h = ckpt_fnv(ckpt_fnv(h, s), tasks);
        step_line(k);
        ckpt_sleep_ms(ms);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    free(a);
    return 0;
}
