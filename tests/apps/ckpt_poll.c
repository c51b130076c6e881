/* ckpt_poll [STEPS=120] [SLEEP_MS=1500]: one thread blocks in poll(-1) on an empty pipe until the last
   step, another in long nanosleeps; no call may fail with EINTR, and no SIGCHLD may ever arrive. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_poll"
#define USAGE "[STEPS] [SLEEP_MS]"
#include "ckpt_common.h"

/* A nanosleep that must not be interrupted: this program takes no signal at all. */
static void strict_sleep(long ms, const char *who)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
    double t0 = now_mono();
    if (nanosleep(&req, NULL) != 0)
        fail("%s: nanosleep(%ld ms) failed: %s", who, ms, strerror(errno));
    double dt = now_mono() - t0;
    if (dt < (double)ms / 1000.0 - 1e-3)
        fail("%s: nanosleep(%ld ms) returned after %.6f s", who, ms, dt);
}

static int pipefd[2];
static long sleep_ms;
static atomic_int stop_sleeper, poller_woke;
static atomic_long sleeps_done;
static volatile sig_atomic_t sigchld_count;

static void on_sigchld(int sig)
{
    (void)sig;
    sigchld_count++;
}

static void *poller(void *arg)
{
    (void)arg;
    struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
    int n = poll(&p, 1, -1);
    if (n < 0)
        fail("poller: poll(-1) failed: %s", strerror(errno));
    if (n != 1 || !(p.revents & POLLIN))
        fail("poller: poll returned %d, revents %#x", n, p.revents);
    char c;
    ssize_t r = read(pipefd[0], &c, 1);
    if (r != 1 || c != 'W')
        fail("poller: read %zd bytes (%d) from the pipe: %s", r, r == 1 ? c : -1,
             r < 0 ? strerror(errno) : "unexpected");
    p.revents = 0;
    n = poll(&p, 1, 0);
    if (n != 0)
        fail("poller: the pipe is not empty after one byte (poll=%d, revents %#x)", n, p.revents);
    atomic_store(&poller_woke, 1);
    return (void *)(intptr_t)0x9011;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_sleeper)) {
        strict_sleep(sleep_ms, "sleeper");
        atomic_fetch_add(&sleeps_done, 1);
    }
    return (void *)(intptr_t)0x5133;
}

static void check_no_child(long k)
{
    if (sigchld_count != 0)
        fail("step %ld: %d SIGCHLD arrived, but this program has no children", k,
             (int)sigchld_count);
    int st;
    pid_t w = waitpid(-1, &st, WNOHANG);
    if (w != -1 || errno != ECHILD)
        fail("step %ld: waitpid(-1) = %d (%s): this program has no children", k, (int)w,
             w < 0 ? strerror(errno) : "a child");
}

static void join(pthread_t t, intptr_t expect, const char *who)
{
    void *ret;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60 + sleep_ms / 1000;
    int rc = pthread_timedjoin_np(t, &ret, &ts);
    if (rc != 0)
        fail("joining the %s: %s", who, strerror(rc));
    if ((intptr_t)ret != expect)
        fail("the %s returned %#lx", who, (long)(intptr_t)ret);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 120, 1, 1000000);
    sleep_ms = arg(argc, argv, 2, 1500, 1, 600000);
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_sigchld;
    sigemptyset(&a.sa_mask);
    a.sa_flags = SA_RESTART;
    if (sigaction(SIGCHLD, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    if (pipe(pipefd) != 0)
        fail("pipe: %s", strerror(errno));
    pthread_t tp, ts;
    if (pthread_create(&tp, NULL, poller, NULL) != 0 ||
        pthread_create(&ts, NULL, sleeper, NULL) != 0)
        fail("pthread_create");

    for (long k = 1; k <= steps; k++) {
        check_no_child(k);
        if (atomic_load(&poller_woke))
            fail("step %ld: the poller woke up with nothing written", k);
        step_line(k);
        strict_sleep(20, "main");
    }
    if (write(pipefd[1], "W", 1) != 1)
        fail("write to the pipe: %s", strerror(errno));
    join(tp, 0x9011, "poller");
    atomic_store(&stop_sleeper, 1);
    join(ts, 0x5133, "sleeper");
    if (atomic_load(&sleeps_done) < 1)
        fail("the sleeper never completed a sleep");
    check_no_child(steps + 1);
    printf("DONE steps=%ld woke=%d sigchld=%d\n", steps, atomic_load(&poller_woke),
           (int)sigchld_count);
    return fflush(stdout) == 0 ? 0 : 1;
}
