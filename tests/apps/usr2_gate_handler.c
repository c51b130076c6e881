/* usr2_gate_handler GATE [MS=20]: prints `step N` every MS ms, forever. Its SIGUSR2 handler (the
   number of crac's checkpoint signal, sent by another crac process's program) prints `in handler
   K` and, the first time only, waits inside the handler until the file GATE exists, then prints
   `handler done K`: a checkpoint comes while the handler runs, and the restarted program's next
   SIGUSR2 must reach the handler again. */
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

#define PROG "usr2_gate_handler"
#define USAGE "GATE [MS]"
#include "ckpt_common.h"

static const char *gate;
static volatile sig_atomic_t runs;

/* LINE K: write(2) only, as a handler may. */
static void say(const char *line, long k)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "%s %ld\n", line, k);
    if (write(STDOUT_FILENO, buf, (size_t)n) != n)
        _exit(4);
}

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    long k = runs + 1;
    say("in handler", k);
    while (k == 1 && access(gate, F_OK) != 0) {
        struct timespec ten_ms = {0, 10 * 1000000L};
        nanosleep(&ten_ms, NULL);
    }
    say("handler done", k);
    runs = (sig_atomic_t)k;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    gate = argv[1];
    long ms = arg(argc, argv, 2, 20, 1, 10000);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR2, &sa, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    for (long k = 1;; k++) {
        step_line(k);
        ckpt_sleep_ms(ms);
    }
}
