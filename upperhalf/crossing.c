/* crossing.c — calls from the upper half into the lower half: checkpoint gate, then fs switched to
 * this thread's own lower TCB (borrowed from the shadow pool) and back (docs/ARCHITECTURE.md "Crossing"). */
#include "upper_runtime.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_SET_FS 0x1002

/* The lower TCB this upper thread borrowed; returned to the pool when the thread exits. */
static __thread uint64_t lower_fs __attribute__((tls_model("initial-exec")));
/* The restart that lower_fs was borrowed under: a restart brings a new lower half and new TCBs. */
static __thread int32_t lower_fs_epoch __attribute__((tls_model("initial-exec")));
static pthread_key_t lower_fs_key;
static pthread_once_t lower_fs_once = PTHREAD_ONCE_INIT;

static void give_back_tcb(void *fs) { crac_upper.api->return_tcb((uint64_t)fs); }

static void make_key(void) { pthread_key_create(&lower_fs_key, give_back_tcb); }

static uint64_t this_thread_lower_fs(void)
{
    int32_t epoch = __atomic_load_n(&crac_registry.lower_epoch, __ATOMIC_RELAXED);
    if (__builtin_expect(lower_fs != 0 && lower_fs_epoch == epoch, 1))
        return lower_fs;
    pthread_once(&lower_fs_once, make_key);
    lower_fs_epoch = epoch;
    lower_fs = crac_upper.api->borrow_tcb();
    pthread_setspecific(lower_fs_key, (void *)lower_fs);
    return lower_fs;
}

static inline uint64_t read_fs(void)
{
    uint64_t fs;
    __asm__ volatile("rdfsbase %0" : "=r"(fs));
    return fs;
}

/* Without FSGSBASE: arch_prctl as a raw syscall (errno is TLS, and fs is in flux). */
static inline void write_fs(uint64_t fs, int fsgsbase)
{
    if (fsgsbase) {
        __asm__ volatile("wrfsbase %0" : : "r"(fs) : "memory");
    } else {
        long ret;
        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(SYS_arch_prctl), "D"(ARCH_SET_FS), "S"(fs)
                         : "rcx", "r11", "memory");
        (void)ret;
    }
}

static inline uint64_t read_fs_any(int fsgsbase)
{
    if (fsgsbase)
        return read_fs();
    /* fs:0 holds the TCB's own address in glibc (x86-64 TLS variant II). */
    uint64_t self;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
    return self;
}

typedef uint64_t (*lower_fn3)(uint64_t, uint64_t, uint64_t);

/* noinline and TLS-free between the two switches: GCC caches the thread pointer, so nothing in
 * here may touch a __thread variable. */
__attribute__((noinline)) static uint64_t switch_and_call(void *fn, uint64_t a0, uint64_t a1,
                                                          uint64_t a2, uint64_t to_fs, int fsgsbase)
{
    uint64_t from_fs = read_fs_any(fsgsbase);
    write_fs(to_fs, fsgsbase);
    uint64_t r = ((lower_fn3)fn)(a0, a1, a2);
    write_fs(from_fs, fsgsbase);
    return r;
}

/* The gate is re-entrant per thread: a shim entry holds it around its whole body (handle
 * translation, crossing, wrapping of created handles) and its crossing takes it again; only the
 * outermost entry may wait, or a nested one would wait for a checkpoint that waits for it. */
static __thread int gate_depth __attribute__((tls_model("initial-exec")));

void cross_gate_enter(void)
{
    const struct crac_lh_api *api = crac_upper.api;
    if (gate_depth++ > 0)
        return;
    if (__atomic_load_n(&crac_registry.in_hook, __ATOMIC_ACQUIRE)) {
        /* A checkpoint or restart hook: the checkpoint is the one running it. */
        __atomic_add_fetch(api->gate_inside, 1, __ATOMIC_SEQ_CST);
        return;
    }
    for (;;) {
        __atomic_add_fetch(api->gate_inside, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(api->gate_pending, __ATOMIC_SEQ_CST))
            return;
        /* A checkpoint is pending: wait in upper-half code, outside the lower half. */
        __atomic_sub_fetch(api->gate_inside, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, api->gate_pending, 0 /* FUTEX_WAIT */, 1, NULL, NULL, 0);
    }
}

void cross_gate_leave(void)
{
    if (--gate_depth > 0)
        return;
    __atomic_sub_fetch(crac_upper.api->gate_inside, 1, __ATOMIC_SEQ_CST);
}

/* Crossings this thread made: what tests read to check how many crossings a library call costs
 * (tests/apps/mpi/mpi_pingpong.c). A plain thread-local add, cheaper than anything it counts. */
static __thread uint64_t crossings __attribute__((tls_model("initial-exec")));

uint64_t crac_upper_crossings(void) { return crossings; }

/* With the gate already passed. The lower TCB is looked up only now: a thread that waited at
 * the gate may have been checkpointed there and restarted, with a new lower half. */
uint64_t cross_call_entered(void *fn, uint64_t a0, uint64_t a1, uint64_t a2)
{
    crossings++;
    uint64_t to_fs = this_thread_lower_fs();
    return switch_and_call(fn, a0, a1, a2, to_fs, crac_upper.api->hwcap_fsgsbase);
}

/* For entries whose address cannot change under a waiting thread (the loader's own, at a fixed
 * address); entries of a backend must be looked up after the gate (see the shim's shim_cross). */
uint64_t cross_call(void *fn, uint64_t a0, uint64_t a1, uint64_t a2)
{
    cross_gate_enter();
    uint64_t r = cross_call_entered(fn, a0, a1, a2);
    cross_gate_leave();
    return r;
}
