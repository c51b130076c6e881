/* share_siblings TAG [STEPS=300] [MS=20]: processes of a tree signal a sibling by the pid they know
   (PostgreSQL's backends signal its checkpointer by the pid in its shared memory). The parent
   forks B, which counts SIGUSR1 in a handler and answers each count through a pipe, then A, which
   sends B a SIGUSR1 each time the parent asks it to. On odd steps the parent asks A; on even ones
   it forks a short-lived child that sends B a SIGUSR1 and exits; A execs itself every 10
   signals. After a restart A and B are new processes, and the short-lived children are forked
   by the restarted parent: each, and A after an exec, must still reach B by B's first pid. The parent prints `TAG step N` per answer and, after both children's
   exit status 0, `TAG DONE checksum=... steps=STEPS`. */
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

#define PROG "share_siblings"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"
#include "signal_answer.h"

static volatile sig_atomic_t received;

static void on_usr1(int sig)
{
    (void)sig;
    received++;
}

static void write_long(int fd, long v, const char *who)
{
    if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
        fail("%s: write: %s", who, strerror(errno));
}

/* B: answers each signal's count; between signals it waits in read() of its idle pipe. */
static void receiver(int idle_fd, int answer_fd, long steps)
{
    for (long k = 1; k <= steps; k++) {
        while (received < k) {
            char c;
            ssize_t r = read(idle_fd, &c, 1);
            if (r == 0)
                fail("B: end-of-file on the idle pipe at step %ld", k);
            if (r < 0 && errno != EINTR)
                fail("B: read: %s", strerror(errno));
        }
        write_long(answer_fd, k, "B");
    }
    _exit(0);
}

/* A: one SIGUSR1 to B per byte the parent sends; ends at end-of-file. Every 10 signals it execs
   itself (`--sender ASK_FD B`): the exec'd program must still reach B by the pid it knows. */
static void sender(int ask_fd, pid_t b)
{
    char c;
    ssize_t r;
    for (long sent = 0; (r = read(ask_fd, &c, 1)) != 0;) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            fail("A: read: %s", strerror(errno));
        if (kill(b, SIGUSR1) != 0)
            fail("A: kill(%d): %s", (int)b, strerror(errno));
        if (++sent % 10 == 0) {
            char fd_text[16], b_text[16];
            snprintf(fd_text, sizeof(fd_text), "%d", ask_fd);
            snprintf(b_text, sizeof(b_text), "%d", (int)b);
            execl("/proc/self/exe", PROG, "--sender", fd_text, b_text, (char *)NULL);
            fail("A: exec: %s", strerror(errno));
        }
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--sender") == 0)
        sender(atoi(argv[2]), (pid_t)atoi(argv[3]));
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 1000000), ms = arg(argc, argv, 3, 20, 0, 10000);
    int idle[2], answer[2], ask[2];
    if (pipe(idle) != 0 || pipe(answer) != 0 || pipe(ask) != 0)
        fail("pipe: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_usr1; /* no SA_RESTART: a signal ends B's read() */
    sigemptyset(&sa.sa_mask);
    fflush(stdout);
    pid_t b = fork();
    if (b < 0)
        fail("fork: %s", strerror(errno));
    if (b == 0) {
        if (sigaction(SIGUSR1, &sa, NULL) != 0)
            fail("B: sigaction: %s", strerror(errno));
        close(idle[1]), close(answer[0]), close(ask[0]), close(ask[1]);
        write_long(answer[1], 0, "B");
        receiver(idle[0], answer[1], steps);
    }
    close(idle[0]), close(answer[1]);
    long ready;
    if (read(answer[0], &ready, sizeof(ready)) != (ssize_t)sizeof(ready) || ready != 0)
        fail("B did not start");
    pid_t a = fork();
    if (a < 0)
        fail("fork: %s", strerror(errno));
    if (a == 0) {
        close(idle[1]), close(answer[0]), close(ask[1]);
        sender(ask[0], b);
    }
    close(ask[0]);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        if (k % 2) {
            if (write(ask[1], "s", 1) != 1)
                fail("write to A: %s", strerror(errno));
        } else {
            pid_t c = fork();
            if (c < 0)
                fail("fork: %s", strerror(errno));
            if (c == 0)
                _exit(kill(b, SIGUSR1) == 0 ? 0 : 3);
            reap_ok(c, "a short-lived sender");
        }
        await_answer(answer[0], idle[1], k, b);
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
    }
    close(ask[1]);
    close(idle[1]);
    reap_ok(a, "A");
    reap_ok(b, "B");
    return tag_done_line(tag, h, steps);
}
