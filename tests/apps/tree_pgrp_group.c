/* tree_pgrp_group TAG [STEPS=100] [MS=20] [tty]: process groups and sessions of a tree. The root (`TAG.r`)
   forks A and B and puts both in a new group led by A (setpgid in parent and child, as a shell
   does), and S, which calls setsid(). Each step the root sends SIGUSR1 to the group
   (kill(-pgid)) and waits for both to answer (A with SIGRTMIN+2, B with SIGRTMIN+3, to its
   getppid(); S says it has its session with SIGRTMIN+4); A and B each take one SIGUSR1 per step. Every process checks at each step that
   getpgrp(), getsid(0) (and the root: getpgid/getsid of its children) are what they were at the
   start, prints `TAG.x step N` and at the end `TAG.x DONE checksum=... steps=STEPS`
   (ckpt_counter's checksum). S counts on its own with MS ms sleeps. Exits non-zero on a
   mismatch; the root also checks every child exited 0. With `tty` (run with a controlling
   terminal), the root also makes A's group the terminal's foreground group at each step and
   its own again (tcsetpgrp, as a shell's job control does), checking tcgetpgrp and tcgetsid. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char tag[256];
static volatile sig_atomic_t got_usr1, ack_a, ack_b, s_ready;

static void fail(long step, const char *what, long a, long b)
{
    fprintf(stderr, "tree_pgrp_group %s: FAIL at step %ld: %s (%ld, %ld)\n", tag, step, what, a, b);
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

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        got_usr1++;
    else if (sig == SIGRTMIN + 2)
        ack_a++;
    else if (sig == SIGRTMIN + 3)
        ack_b++;
    else if (sig == SIGRTMIN + 4)
        s_ready = 1;
}

static void step_out(long k, uint64_t *h)
{
    *h = fnv(*h, (uint64_t)k);
    printf("%s step %ld\n", tag, k);
    if (fflush(stdout) != 0)
        fail(k, "fflush", errno, 0);
}

static int done(uint64_t h, long steps)
{
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* A and B: one SIGUSR1 from the root per step, answered. */
static int member(long steps, pid_t pgid, pid_t sid, int ack)
{
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    uint64_t h = 0xcbf29ce484222325ULL;
    pid_t parent = getppid();
    for (long k = 1; k <= steps; k++) {
        sigprocmask(SIG_BLOCK, &usr1, &old);
        while (got_usr1 < k)
            sigsuspend(&old);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (got_usr1 != k)
            fail(k, "SIGUSR1s received", got_usr1, k);
        if (getpgrp() != pgid)
            fail(k, "getpgrp", getpgrp(), pgid);
        if (getpgid(0) != pgid)
            fail(k, "getpgid(0)", getpgid(0), pgid);
        if (getsid(0) != sid)
            fail(k, "getsid", getsid(0), sid);
        if (getppid() != parent)
            fail(k, "getppid", getppid(), parent);
        step_out(k, &h);
        if (kill(getppid(), ack) != 0)
            fail(k, "kill(parent)", errno, 0);
    }
    return done(h, steps);
}

/* S: its own session and group. */
static int session_leader(long steps, long ms)
{
    pid_t me = getpid();
    if (setsid() != me)
        fail(0, "setsid", errno, me);
    if (kill(getppid(), SIGRTMIN + 4) != 0)
        fail(0, "kill(parent)", errno, 0);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        if (getsid(0) != me || getpgrp() != me || getpgid(me) != me)
            fail(k, "session leader's ids", getsid(0), getpgrp());
        step_out(k, &h);
        sleep_ms(ms);
    }
    return done(h, steps);
}

/* The terminal's foreground group to A's and back, each checked. */
static void job_control(long k, pid_t a, pid_t pgrp0, pid_t sid0)
{
    int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (tty < 0)
        fail(k, "open /dev/tty", errno, 0);
    if (tcsetpgrp(tty, a) != 0)
        fail(k, "tcsetpgrp(A's group)", errno, a);
    if (tcgetpgrp(tty) != a)
        fail(k, "tcgetpgrp after tcsetpgrp(A's group)", tcgetpgrp(tty), a);
    if (tcsetpgrp(tty, pgrp0) != 0)
        fail(k, "tcsetpgrp(own group)", errno, pgrp0);
    if (tcgetpgrp(tty) != pgrp0)
        fail(k, "tcgetpgrp after tcsetpgrp(own group)", tcgetpgrp(tty), pgrp0);
    if (tcgetsid(tty) != sid0)
        fail(k, "tcgetsid", tcgetsid(tty), sid0);
    close(tty);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tree_pgrp_group TAG [STEPS] [MS]\n");
        return 2;
    }
    long steps = argc > 2 ? atol(argv[2]) : 100, ms = argc > 3 ? atol(argv[3]) : 20;
    int tty = argc > 4 && strcmp(argv[4], "tty") == 0;
    if (tty) /* tcsetpgrp from a background group would stop the root */
        signal(SIGTTOU, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGRTMIN + 2, &sa, NULL);
    sigaction(SIGRTMIN + 3, &sa, NULL);
    sigaction(SIGRTMIN + 4, &sa, NULL);
    sigset_t acks, old;
    sigemptyset(&acks);
    sigaddset(&acks, SIGRTMIN + 2);
    sigaddset(&acks, SIGRTMIN + 3);
    sigaddset(&acks, SIGRTMIN + 4);
    pid_t pgrp0 = getpgrp(), sid0 = getsid(0);
    fflush(stdout);
    pid_t a = fork();
    if (a < 0)
        fail(0, "fork", errno, 0);
    if (a == 0) {
        snprintf(tag, sizeof(tag), "%s.a", argv[1]);
        setpgid(0, 0);
        return member(steps, getpid(), sid0, SIGRTMIN + 2);
    }
    if (setpgid(a, a) != 0 && errno != EACCES)
        fail(0, "setpgid(a, a)", errno, a);
    pid_t b = fork();
    if (b < 0)
        fail(0, "fork", errno, 0);
    if (b == 0) {
        snprintf(tag, sizeof(tag), "%s.b", argv[1]);
        if (setpgid(0, a) != 0)
            fail(0, "setpgid(0, a)", errno, a);
        return member(steps, a, sid0, SIGRTMIN + 3);
    }
    if (setpgid(b, a) != 0 && errno != EACCES)
        fail(0, "setpgid(b, a)", errno, a);
    pid_t s = fork();
    if (s < 0)
        fail(0, "fork", errno, 0);
    if (s == 0) {
        snprintf(tag, sizeof(tag), "%s.s", argv[1]);
        return session_leader(steps, ms);
    }
    snprintf(tag, sizeof(tag), "%s.r", argv[1]);
    sigprocmask(SIG_BLOCK, &acks, &old);
    while (!s_ready) /* S has its session */
        sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        if (kill(-a, SIGUSR1) != 0)
            fail(k, "kill(-pgid, SIGUSR1)", errno, a);
        sigprocmask(SIG_BLOCK, &acks, &old);
        while (ack_a < k || ack_b < k)
            sigsuspend(&old);
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (getpgrp() != pgrp0 || getsid(0) != sid0)
            fail(k, "root's getpgrp/getsid", getpgrp(), getsid(0));
        if (getpgid(a) != a || getpgid(b) != a)
            fail(k, "the children's group", getpgid(a), getpgid(b));
        if (getsid(a) != sid0 || getsid(s) != s)
            fail(k, "the children's sessions", getsid(a), getsid(s));
        if (tty)
            job_control(k, a, pgrp0, sid0);
        step_out(k, &h);
        sleep_ms(ms);
    }
    pid_t kids[3] = {a, b, s};
    for (int i = 0; i < 3; i++) {
        int st;
        pid_t got;
        while ((got = waitpid(kids[i], &st, 0)) < 0 && errno == EINTR)
            ;
        if (got != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail(steps, "a child's end", got, st);
    }
    return done(h, steps);
}
