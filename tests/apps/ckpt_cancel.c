/* ckpt_cancel [STEPS=100] [read]: pthread_cancel and the setuid family in a multi-threaded program
   (both rely on signals glibc keeps for itself): per step a thread blocked in read() (odd steps,
   every step with `read`) or in the open() of a FIFO no one writes (even steps) is cancelled and
   joined, its cleanup handler run, and seteuid/setegid run with a long-lived thread alive, which
   is cancelled at the end. Built with -fexceptions, pthread_cleanup_push is a cleanup the
   unwinder runs: the forced unwind must cross the signal frame of glibc's cancellation signal. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_cancel"
#define USAGE "[STEPS] [read]"
#include "ckpt_common.h"

static int pipe_fds[2]; /* never written: readers block until cancelled */
static char fifo[64];   /* never opened for writing: openers block until cancelled */
static atomic_int cleanups, blocked;

static void cleanup(void *arg)
{
    (void)arg;
    atomic_fetch_add(&cleanups, 1);
}

static void *reader(void *arg)
{
    (void)arg;
    char c;
    pthread_cleanup_push(cleanup, NULL);
    atomic_fetch_add(&blocked, 1);
    for (;;)
        if (read(pipe_fds[0], &c, 1) >= 0)
            fail("read from the silent pipe returned");
    pthread_cleanup_pop(0);
    return NULL;
}

static void *opener(void *arg)
{
    (void)arg;
    pthread_cleanup_push(cleanup, NULL);
    atomic_fetch_add(&blocked, 1);
    for (;;)
        if (open(fifo, O_RDONLY | O_CLOEXEC) >= 0)
            fail("open of the FIFO nobody writes returned");
    pthread_cleanup_pop(0);
    return NULL;
}

static void start(pthread_t *t, void *(*blocker)(void *))
{
    int before = atomic_load(&blocked), rc = pthread_create(t, NULL, blocker, NULL);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    struct watchdog wd;
    wd_start(&wd);
    while (atomic_load(&blocked) == before) {
        struct timespec req = {0, 500000L};
        nanosleep(&req, NULL);
        if (wd_expired(&wd, 30))
            fail("a reader thread never started");
    }
}

static void cancel_join(long k, pthread_t t)
{
    int rc = pthread_cancel(t);
    if (rc != 0)
        fail("step %ld: pthread_cancel: %s", k, strerror(rc));
    void *ret = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    if ((rc = pthread_timedjoin_np(t, &ret, &ts)) != 0)
        fail("step %ld: joining the cancelled thread: %s", k, strerror(rc));
    if (ret != PTHREAD_CANCELED)
        fail("step %ld: the cancelled thread returned %p, not PTHREAD_CANCELED", k, ret);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    int only_read = argc > 2 && strcmp(argv[2], "read") == 0;
    if (pipe(pipe_fds) != 0)
        fail("pipe: %s", strerror(errno));
    snprintf(fifo, sizeof(fifo), "ckpt_cancel.%d.fifo", (int)getpid());
    if ((mkfifo(fifo, 0600) != 0 && errno != EEXIST))
        fail("mkfifo %s: %s", fifo, strerror(errno));
    pthread_t longlived;
    start(&longlived, reader);
    uid_t euid = geteuid();
    gid_t egid = getegid();
    for (long k = 1; k <= steps; k++) {
        pthread_t t;
        start(&t, k % 2 || only_read ? reader : opener);
        cancel_join(k, t);
        if (atomic_load(&cleanups) != k)
            fail("step %ld: %d cleanup handlers ran, expected %ld", k, atomic_load(&cleanups), k);
        /* Every thread must take the new ids: glibc signals each one (multi-threaded setxid). */
        if (seteuid(euid) != 0 || setegid(egid) != 0)
            fail("step %ld: seteuid/setegid to the same ids: %s", k, strerror(errno));
        if (geteuid() != euid || getegid() != egid)
            fail("step %ld: the effective ids changed", k);
        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL);
    }
    cancel_join(steps + 1, longlived);
    if (atomic_load(&cleanups) != steps + 1)
        fail("at the end: %d cleanup handlers ran, expected %ld", atomic_load(&cleanups),
             steps + 1);
    unlink(fifo);
    printf("DONE cancelled=%d\n", atomic_load(&cleanups));
    return fflush(stdout) == 0 ? 0 : 1;
}
