/* lower_threads.c — which kernel threads belong to the lower half (manager, shadow pool, backend
 * workers). The checkpoint treats every other thread of the process as an upper thread. */
#include "lower_threads.h"

#include <stdint.h>

#define MAX_LOWER_THREADS 4096

static volatile int32_t lower_tids[MAX_LOWER_THREADS];

void lower_threads_register(pid_t tid)
{
    for (int i = 0; i < MAX_LOWER_THREADS; i++)
        if (__sync_bool_compare_and_swap(&lower_tids[i], 0, tid))
            return;
}

void lower_threads_unregister(pid_t tid)
{
    for (int i = 0; i < MAX_LOWER_THREADS; i++)
        if (__sync_bool_compare_and_swap(&lower_tids[i], tid, 0))
            return;
}

int lower_threads_contains(pid_t tid)
{
    for (int i = 0; i < MAX_LOWER_THREADS; i++)
        if (__atomic_load_n(&lower_tids[i], __ATOMIC_RELAXED) == tid)
            return 1;
    return 0;
}

void lower_threads_reset(void)
{
    /* After a fork: the threads recorded were the parent's. */
    for (int i = 0; i < MAX_LOWER_THREADS; i++)
        __atomic_store_n(&lower_tids[i], 0, __ATOMIC_RELAXED);
}
