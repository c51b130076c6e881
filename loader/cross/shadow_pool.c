/* shadow_pool.c — a pool of parked lower-half pthreads. Each upper thread borrows one's TCB (its
 * fs value) on its first crossing, so lower TLS (errno, malloc caches, CUDA's per-thread state) is
 * never shared between upper threads. borrow/return are TLS-free: they run with the upper fs. */
#include "shadow_pool.h"

#include "crac_rawsys.h"
#include "lower_threads.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#define POOL_MAX 1024
#define GROW_STEP 8
#define SHADOW_STACK (256 * 1024)

enum { SLOT_UNBORN = 0, SLOT_FREE = 1, SLOT_BORROWED = 2 };

struct slot {
    uint64_t fs;
    volatile int32_t state;
    volatile uint64_t owner_fs; /* the borrowing upper thread's fs (its TCB address), or 0 */
    volatile int32_t owner_tid; /* and its kernel tid */
};

static struct slot pool[POOL_MAX];
static volatile int32_t pool_born;       /* slots [0, pool_born) hold a live thread */
static volatile int32_t pool_generation; /* futex: bumped each time threads are added */
static volatile int32_t growth_wanted;   /* futex: the manager waits on it */
static volatile int32_t park_forever;    /* futex word the shadow threads sleep on */

static void futex_wait(volatile int32_t *w, int32_t val)
{
    raw_syscall6(SYS_futex, (long)w, 128 /* FUTEX_WAIT_PRIVATE */, val, 0, 0, 0);
}

static void futex_wake_all(volatile int32_t *w)
{
    raw_syscall6(SYS_futex, (long)w, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, 0, 0, 0);
}

static void *shadow_main(void *arg)
{
    struct slot *s = arg;
    /* On x86-64 glibc the thread pointer is the TCB address, which is what fs holds. */
    s->fs = (uint64_t)pthread_self();
    lower_threads_register(gettid());
    __atomic_store_n(&s->state, SLOT_FREE, __ATOMIC_RELEASE);
    for (;;)
        futex_wait(&park_forever, 0);
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
    int err = 0;
    for (int i = 0; i < n && pool_born < POOL_MAX; i++) {
        pthread_t t;
        struct slot *s = &pool[pool_born];
        err = pthread_create(&t, &attr, shadow_main, s);
        if (err)
            break;
        while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SLOT_FREE)
            sched_yield();
        __atomic_add_fetch(&pool_born, 1, __ATOMIC_RELEASE);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    __atomic_add_fetch(&pool_generation, 1, __ATOMIC_RELEASE);
    futex_wake_all(&pool_generation);
    return -err;
}

int shadow_pool_start(int initial) { return spawn_shadows(initial); }

int shadow_pool_size(void) { return pool_born; }

uint64_t shadow_pool_borrow(void)
{
    for (;;) {
        int32_t gen = __atomic_load_n(&pool_generation, __ATOMIC_ACQUIRE);
        int32_t born = __atomic_load_n(&pool_born, __ATOMIC_ACQUIRE);
        int32_t free_left = 0;
        uint64_t got = 0;
        for (int32_t i = 0; i < born; i++) {
            if (__atomic_load_n(&pool[i].state, __ATOMIC_RELAXED) != SLOT_FREE)
                continue;
            if (!got && __sync_bool_compare_and_swap(&pool[i].state, SLOT_FREE, SLOT_BORROWED)) {
                got = pool[i].fs;
                /* fs:0 is the TCB's own address in glibc: the borrower's upper TCB. */
                uint64_t self;
                __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
                __atomic_store_n(&pool[i].owner_tid, (int32_t)raw_syscall0(SYS_gettid),
                                 __ATOMIC_RELEASE);
                __atomic_store_n(&pool[i].owner_fs, self, __ATOMIC_RELEASE);
            } else
                free_left++;
        }
        if (free_left < 2 && born < POOL_MAX) { /* ask the manager to grow before we run dry */
            __atomic_add_fetch(&growth_wanted, 1, __ATOMIC_RELEASE);
            futex_wake_all(&growth_wanted);
        }
        if (got)
            return got;
        if (born >= POOL_MAX)
            return 0;
        futex_wait(&pool_generation, gen);
    }
}

void shadow_pool_return(uint64_t fs)
{
    int32_t born = __atomic_load_n(&pool_born, __ATOMIC_ACQUIRE);
    for (int32_t i = 0; i < born; i++) {
        if (pool[i].fs == fs) {
            __atomic_store_n(&pool[i].owner_fs, 0, __ATOMIC_RELEASE);
            __atomic_store_n(&pool[i].state, SLOT_FREE, __ATOMIC_RELEASE);
            return;
        }
    }
}

uint64_t shadow_pool_owner(uint64_t lower_fs, int32_t tid)
{
    int32_t born = __atomic_load_n(&pool_born, __ATOMIC_ACQUIRE);
    for (int32_t i = 0; i < born; i++)
        if (pool[i].fs == lower_fs &&
            __atomic_load_n(&pool[i].state, __ATOMIC_ACQUIRE) == SLOT_BORROWED &&
            __atomic_load_n(&pool[i].owner_tid, __ATOMIC_ACQUIRE) == tid)
            return __atomic_load_n(&pool[i].owner_fs, __ATOMIC_ACQUIRE);
    return 0; /* not lent, or this is the parked shadow thread itself */
}

void shadow_pool_serve_growth(void)
{
    for (;;) {
        int32_t seen = __atomic_load_n(&growth_wanted, __ATOMIC_ACQUIRE);
        if (seen > 0) {
            __atomic_store_n(&growth_wanted, 0, __ATOMIC_RELEASE);
            spawn_shadows(GROW_STEP);
            continue;
        }
        futex_wait(&growth_wanted, 0);
    }
}
