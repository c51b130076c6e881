/* lower_spawn.c — every thread started through the lower half's libc is a lower-half thread: the
 * loader exports pthread_create, so libraries a backend loads (NVIDIA's runtime and driver start
 * their own threads) are registered without knowing about crac (docs/CUDA.md "Threads"). */
#include "lower_threads.h"
#include "shadow_pool_int.h" /* its futex wait and wake */

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

struct start {
    void *(*fn)(void *);
    void *arg;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static create_fn libc_create;

/* Runs when the thread ends by any path (return, pthread_exit, cancellation). */
static void unregister_on_exit(void *tid) { lower_threads_unregister((pid_t)(intptr_t)tid); }

static void init(void)
{
    libc_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    pthread_key_create(&exit_key, unregister_on_exit);
}

static void *trampoline(void *p)
{
    struct start s = *(struct start *)p;
    free(p);
    pid_t tid = (pid_t)syscall(SYS_gettid);
    lower_threads_register(tid);
    pthread_setspecific(exit_key, (void *)(intptr_t)tid);
    return s.fn(s.arg);
}

/* The new thread starts with every asynchronous signal blocked, as the loader's own lower threads
 * run: the program's signals must never run its handlers on a thread with the lower half's fs, and the
 * suspend signal a checkpoint may send before the thread registered stays pending (the checkpoint
 * stops waiting for a thread once it is registered, loader/ckpt/ckpt_suspend.c). A library that
 * sets its thread's mask itself afterwards is trusted to know what it does. */
/* Threads inside libc's pthread_create, and whether the checkpoint writer's fork is being made:
 * libc's pthread_create holds the dynamic linker's TLS lock for a moment, and a fork made then
 * leaves that lock held forever in the child, whose own threads (the compression workers) then
 * never start. So no creation runs across that fork (lower_spawn_hold). */
static volatile int32_t creating, held;

static void futex_wait_while(volatile int32_t *word, int32_t seen)
{
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == seen)
        raw_futex_wait(word, seen, NULL);
}

void lower_spawn_hold(void)
{
    __atomic_store_n(&held, 1, __ATOMIC_SEQ_CST);
    int32_t n;
    while ((n = __atomic_load_n(&creating, __ATOMIC_SEQ_CST)) != 0)
        futex_wait_while(&creating, n);
}

void lower_spawn_release(void)
{
    __atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
    raw_futex_wake(&held, RAW_WAKE_ALL);
}

void lower_spawn_reset(void)
{
    __atomic_store_n(&creating, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&held, 0, __ATOMIC_SEQ_CST);
}

static void creation_end(void);

static void creation_begin(void)
{
    for (;;) {
        futex_wait_while(&held, 1);
        __atomic_add_fetch(&creating, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&held, __ATOMIC_SEQ_CST))
            return;
        creation_end(); /* the fork began meanwhile: wait for it */
    }
}

static void creation_end(void)
{
    if (__atomic_sub_fetch(&creating, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&held, __ATOMIC_SEQ_CST))
        raw_futex_wake(&creating, RAW_WAKE_ALL);
}

__attribute__((visibility("default"))) int
pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    pthread_once(&once, init);
    if (!libc_create)
        return EAGAIN;
    struct start *s = malloc(sizeof(*s));
    if (!s)
        return EAGAIN;
    s->fn = fn;
    s->arg = arg;
    sigset_t all, old;
    sigfillset(&all);
    /* Faults stay deliverable, and SIGSYS: the loader's own threads run upper code at times
     * (restart hooks), whose trapped calls the SIGSYS handler emulates. */
    static const int synchronous[] = {SIGSYS, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};
    for (unsigned i = 0; i < sizeof(synchronous) / sizeof(synchronous[0]); i++)
        sigdelset(&all, synchronous[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    creation_begin();
    int r = libc_create(thread, attr, trampoline, s);
    creation_end();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0)
        free(s);
    return r;
}
