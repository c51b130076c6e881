/* sim_signal: a signal handler that fires while its thread is inside a crossing (blocked in the
   lower half) runs with the upper half's fs: it sees its own thread's __thread variables and
   errno, and the call it interrupted returns normally afterwards. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W_START 0x200000000000UL
#define W_END 0x300000000000UL

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "sim_signal: " __VA_ARGS__);                                               \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

static __thread long marker;
static long (*block_signal)(long timeout_ms);
static int under_crac;

struct seen {
    volatile long marker;
    volatile uintptr_t tp;
    volatile int signo, errno_ok, count;
};
static struct seen seen;

static uintptr_t thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
}

static void handler(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    seen.marker = marker; /* the interrupted thread's own TLS? */
    seen.tp = thread_pointer();
    seen.signo = info->si_signo == sig ? sig : -1;
    int saved = errno;
    errno = 0;
    seen.errno_ok = getpid() > 0 && errno == 0; /* libc and errno work in the handler */
    errno = saved;
    seen.count++;
}

static volatile int ready;
static long blocked_result;

static void *blocker(void *arg)
{
    (void)arg;
    marker = 4242;
    ready = 1;
    blocked_result = block_signal(10000); /* inside the lower half until the signal */
    if (marker != 4242)
        FAIL("the thread's TLS changed across the crossing");
    return NULL;
}

static void check_handler(const char *where, pthread_t self_tp_owner, uintptr_t owner_tp)
{
    (void)self_tp_owner;
    if (seen.marker != 4242)
        FAIL("%s: handler saw marker %ld, not its thread's 4242", where, seen.marker);
    if (seen.tp != owner_tp)
        FAIL("%s: handler ran with fs %#lx, not the thread's %#lx", where, (unsigned long)seen.tp,
             (unsigned long)owner_tp);
    if (under_crac && (seen.tp < W_START || seen.tp >= W_END))
        FAIL("%s: handler's thread pointer %#lx is not the upper half's", where,
             (unsigned long)seen.tp);
    if (seen.signo != SIGUSR1 || !seen.errno_ok)
        FAIL("%s: handler got signo %d, errno_ok %d", where, seen.signo, seen.errno_ok);
}

static uintptr_t blocker_tp;

static void *blocker_tp_probe(void *arg)
{
    (void)arg;
    blocker_tp = thread_pointer();
    return blocker(NULL);
}

int main(void)
{
    block_signal = (long (*)(long))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_debug_block_signal");
    int (*version)(void) = (int (*)(void))(uintptr_t)dlsym(RTLD_DEFAULT, "crac_sim_version");
    int count;
    if (!block_signal || !version || cudaGetDeviceCount(&count) != cudaSuccess)
        FAIL("no sim runtime");
    under_crac = version() > 0;

    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0 || sigaction(SIGUSR1, NULL, &old) != 0)
        FAIL("sigaction");
    if (old.sa_sigaction != handler || !(old.sa_flags & SA_SIGINFO))
        FAIL("sigaction reports %p, not the program's handler", (void *)old.sa_sigaction);

    /* 1. The signal arrives while the thread is blocked inside the lower half. */
    pthread_t t;
    if (pthread_create(&t, NULL, blocker_tp_probe, NULL) != 0)
        FAIL("pthread_create");
    while (!ready)
        usleep(1000);
    usleep(200000); /* let it enter the lower half */
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    if (blocked_result != -EINTR)
        FAIL("the blocking lower-half call returned %ld, not -EINTR: the signal did not "
             "interrupt it",
             blocked_result);
    check_handler("inside a crossing", t, blocker_tp);

    /* 2. The same handler outside any crossing, on the main thread. */
    marker = 4242;
    raise(SIGUSR1);
    if (seen.count != 2)
        FAIL("handler ran %d times, expected 2", seen.count);
    check_handler("outside a crossing", pthread_self(), thread_pointer());

    /* 3. Back to the default action: reported as such. */
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    if (sigaction(SIGUSR1, &sa, NULL) != 0 || sigaction(SIGUSR1, NULL, &old) != 0 ||
        old.sa_handler != SIG_IGN)
        FAIL("SIG_IGN not reported back");
    raise(SIGUSR1);
    printf("sim_signal: handler inside a crossing ran with its thread's upper TLS: OK\n");
    return 0;
}
