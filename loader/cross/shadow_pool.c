/* shadow_pool.c — a pool of parked lower-half pthreads. Each upper thread borrows one's TCB (its
 * fs value) on its first crossing, so lower TLS (errno, malloc caches, CUDA's per-thread state) is
 * never shared between upper threads. This file creates them; shadow_borrow.c (TLS-free) lends them. */
#include "shadow_pool.h"
#include "shadow_pool_int.h"

#include "crac_rawsys.h"
#include "lower_threads.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GROW_STEP 8
#define SHADOW_STACK (256 * 1024)

struct shadow_slot shadow_slots[SHADOW_POOL_MAX];
volatile int32_t shadow_born;
volatile int32_t shadow_generation;
volatile int32_t shadow_growth_wanted;
static volatile int32_t park_forever; /* futex word the shadow threads sleep on */

static void *shadow_main(void *arg)
{
    struct shadow_slot *s = arg;
    /* On x86-64 glibc the thread pointer is the TCB address, which is what fs holds. */
    s->fs = (uint64_t)pthread_self();
    lower_threads_register(gettid());
    __atomic_store_n(&s->state, SLOT_FREE, __ATOMIC_RELEASE);
    raw_futex_wake(&s->state, RAW_WAKE_ALL); /* spawn_shadows may be waiting for it */
    for (;;)
        raw_futex_wait(&park_forever, 0, NULL);
    return NULL;
}

static int spawn_shadows(int n)
{
    /* Shadow threads take no signals (a process-directed signal must reach a program thread);
     * an upper thread borrowing a TCB keeps its own kernel mask. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, SHADOW_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = 0, first = shadow_born, made = 0;
    for (; made < n && first + made < SHADOW_POOL_MAX; made++) {
        pthread_t t;
        err = pthread_create(&t, &attr, shadow_main, &shadow_slots[first + made]);
        if (err)
            break;
    }
    /* All started, then each waited for on a futex: a sched_yield loop per thread gave the CPU
     * away for a whole time slice on a busy machine (~8 ms a thread beside two CPU hogs, a
     * restart's first 50 ms). Borrowers see a slot only once it is ready (shadow_born). */
    for (int i = 0; i < made; i++) {
        struct shadow_slot *s = &shadow_slots[first + i];
        int32_t v;
        while ((v = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE)) != SLOT_FREE)
            raw_futex_wait(&s->state, v, NULL);
    }
    __atomic_add_fetch(&shadow_born, made, __ATOMIC_RELEASE);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    __atomic_add_fetch(&shadow_generation, 1, __ATOMIC_RELEASE);
    raw_futex_wake(&shadow_generation, RAW_WAKE_ALL);
    return -err;
}

int shadow_pool_start(int initial) { return spawn_shadows(initial); }

int shadow_pool_size(void) { return shadow_born; }

int shadow_pool_reset(int initial)
{
    /* In a forked child: the slots' threads were the parent's. Their TCBs' memory is the lower
     * libc's stack cache now, so no slot may lend it again; the caller runs on one of them, which
     * the lower libc made this process's own thread. */
    for (int i = 0; i < SHADOW_POOL_MAX; i++) {
        shadow_slots[i].state = SLOT_UNBORN;
        shadow_slots[i].fs = 0;
        shadow_slots[i].owner_fs = 0;
        shadow_slots[i].owner_tid = 0;
    }
    shadow_born = 0;
    shadow_growth_wanted = 0;
    return spawn_shadows(initial);
}

void shadow_pool_serve_growth(void)
{
    for (;;) {
        int32_t seen = __atomic_load_n(&shadow_growth_wanted, __ATOMIC_ACQUIRE);
        if (seen > 0) {
            __atomic_store_n(&shadow_growth_wanted, 0, __ATOMIC_RELEASE);
            spawn_shadows(GROW_STEP);
            continue;
        }
        raw_futex_wait(&shadow_growth_wanted, 0, NULL);
    }
}
