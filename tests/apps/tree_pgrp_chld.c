/* tree_pgrp_chld TAG [STEPS=100] [MS=40]: SIGCHLD as before, across restarts. A SIGCHLD handler
   counts; each step forks a child that sleeps MS ms and exits with the step's status; the
   parent waits (sigsuspend) until the count says the child ended, then, with the child a zombie,
   sleeps MS ms (a checkpoint then often finds a zombie not yet waited for), reaps it with
   waitpid, and checks the count is exactly the number of children so far (a restart that sent
   SIGCHLD again for a recreated zombie, or lost one, breaks it), then prints `TAG step N` (then
   `TAG DONE checksum=... steps=STEPS`, ckpt_counter's checksum). Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *tag = "?";
static volatile sig_atomic_t chld;

static void fail(long step, const char *what, long a, long b)
{
    fprintf(stderr, "tree_pgrp_chld %s: FAIL at step %ld: %s (%ld, %ld)\n", tag, step, what, a, b);
    exit(1);
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void sleep_ms(long ms)
{
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR)
        req = rem;
}

static void on_chld(int sig)
{
    (void)sig;
    chld++;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tree_pgrp_chld TAG [STEPS] [MS]\n");
        return 2;
    }
    tag = argv[1];
    long steps = argc > 2 ? atol(argv[2]) : 100, ms = argc > 3 ? atol(argv[3]) : 40;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            fail(k, "fork", errno, 0);
        if (pid == 0) {
            sleep_ms(ms);
            _exit((int)(k % 100));
        }
        sigprocmask(SIG_BLOCK, &set, &old);
        while (chld < k)
            sigsuspend(&old);
        sigprocmask(SIG_SETMASK, &old, NULL);
        sleep_ms(ms); /* the child is a zombie, not yet waited for */
        int st;
        pid_t got;
        while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
        if (got != pid)
            fail(k, "waitpid returned another pid (or -1: errno)", got, got < 0 ? errno : pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != k % 100)
            fail(k, "child status", st, k % 100);
        if (chld != k)
            fail(k, "SIGCHLDs received", chld, k);
        h = fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
    }
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
