/* tree_forkwait TAG [STEPS=100] [MS=40]: a fork-and-wait loop. Each step forks a child that checks
   getppid() is its parent's getpid(), sleeps MS ms and exits with the step's status (step % 100);
   the parent waits for it with waitpid and checks the pid and status it gets, then prints
   `TAG step N` (then `TAG DONE checksum=... steps=STEPS`, ckpt_counter's checksum). A checkpoint
   mostly finds the parent blocked in waitpid and a child asleep. Exits non-zero on a mismatch. */
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

static void fail(long step, const char *what, long a, long b)
{
    fprintf(stderr, "tree_forkwait %s: FAIL at step %ld: %s (%ld, %ld)\n", tag, step, what, a, b);
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tree_forkwait TAG [STEPS] [MS]\n");
        return 2;
    }
    tag = argv[1];
    long steps = argc > 2 ? atol(argv[2]) : 100, ms = argc > 3 ? atol(argv[3]) : 40;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        fflush(stdout);
        pid_t me = getpid();
        pid_t pid = fork();
        if (pid < 0)
            fail(k, "fork", errno, 0);
        if (pid == 0) {
            pid_t pp = getppid();
            if (pp != me) {
                fprintf(stderr, "tree_forkwait %s: child of step %ld: getppid %d, parent %d\n", tag,
                        k, (int)pp, (int)me);
                _exit(200);
            }
            sleep_ms(ms);
            if (getppid() != me) {
                fprintf(stderr,
                        "tree_forkwait %s: child of step %ld: getppid %d after sleep, "
                        "parent %d\n",
                        tag, k, (int)getppid(), (int)me);
                _exit(201);
            }
            _exit((int)(k % 100));
        }
        int st;
        pid_t got;
        while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
            ;
        if (got != pid)
            fail(k, "waitpid returned another pid (or -1: errno)", got, got < 0 ? errno : pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != k % 100)
            fail(k, "child status", st, k % 100);
        if (getpid() != me)
            fail(k, "getpid changed", getpid(), me);
        h = fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
    }
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
