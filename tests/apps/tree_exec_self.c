/* tree_exec_self [STEPS=60] [MS=40] [EVERY=5]: counts to STEPS like ckpt_counter (`step N`, then
   `DONE checksum=... steps=STEPS`), exec'ing itself in place every EVERY steps with its state in
   argv. Across each exec it checks what exec keeps: getpid and getppid, an ignored signal
   (SIGHUP) and a blocked one (SIGUSR1), a descriptor without close-on-exec (a pipe holding a
   byte), the working directory; and before it, that exec of a missing file, a file without
   execute permission and one that is no program fail with ENOENT, EACCES and ENOEXEC and the
   program goes on. Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "tree_exec_self"
#define USAGE "[STEPS] [MS] [EVERY]"
#include "ckpt_common.h"

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

/* exec of PATH fails with WANT, and nothing of this process changed. */
static void exec_fails(const char *path, int want)
{
    char *av[] = {(char *)path, NULL};
    execv(path, av);
    if (errno != want)
        fail("exec of %s: errno %d (%s), expected %d", path, errno, strerror(errno), want);
}

static void failing_execs(void)
{
    static char dir[64];
    if (!dir[0])
        snprintf(dir, sizeof(dir), "/tmp/tree_exec_self.%d", (int)getpid());
    mkdir(dir, 0700);
    char noexec[128], junk[128];
    snprintf(noexec, sizeof(noexec), "%s/noexec", dir);
    snprintf(junk, sizeof(junk), "%s/junk", dir);
    int fd = open(noexec, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "#!/bin/sh\n", 10) != 10 || close(fd) != 0)
        fail("cannot write %s", noexec);
    fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0 || write(fd, "\x01\x02junk", 6) != 6 || close(fd) != 0)
        fail("cannot write %s", junk);
    exec_fails("/nonexistent/tree_exec_self", ENOENT);
    exec_fails(noexec, EACCES);
    exec_fails(junk, ENOEXEC);
    unlink(noexec);
    unlink(junk);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long ms = arg(argc, argv, 2, 40, 0, 100000);
    long every = arg(argc, argv, 3, 5, 1, 1000000);
    long k = 1;
    uint64_t h = 0xcbf29ce484222325ULL;
    if (argc > 4) {
        /* After an exec: where we were, and what the exec must have kept. */
        long pid, ppid, fd;
        unsigned long long hh;
        char cwd[4096], *was = argv[8];
        if (argc != 9 || sscanf(argv[4], "%ld", &k) != 1 || sscanf(argv[5], "%llx", &hh) != 1 ||
            sscanf(argv[6], "%ld:%ld", &pid, &ppid) != 2 || sscanf(argv[7], "%ld", &fd) != 1)
            fail("bad exec arguments");
        h = hh;
        if (getpid() != pid || getppid() != ppid)
            fail("after exec at step %ld: pid %d ppid %d, were %ld %ld", k, (int)getpid(),
                 (int)getppid(), pid, ppid);
        struct sigaction sa;
        sigset_t m;
        if (sigaction(SIGHUP, NULL, &sa) != 0 || sa.sa_handler != SIG_IGN)
            fail("after exec: SIGHUP is no longer ignored");
        if (sigprocmask(SIG_BLOCK, NULL, &m) != 0 || !sigismember(&m, SIGUSR1))
            fail("after exec: SIGUSR1 is no longer blocked");
        if (sigismember(&m, SIGUSR2))
            fail("after exec: SIGUSR2 is blocked");
        char b = 0;
        if (read((int)fd, &b, 1) != 1 || b != (char)('a' + k % 26))
            fail("after exec: the pipe (fd %ld) lost its byte", fd);
        close((int)fd);
        if (!getcwd(cwd, sizeof(cwd)) || strcmp(cwd, was) != 0)
            fail("after exec: cwd %s, was %s", cwd, was);
    }
    signal(SIGHUP, SIG_IGN);
    sigset_t u1;
    sigemptyset(&u1);
    sigaddset(&u1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &u1, NULL);
    for (; k <= steps; k++) {
        h = fnv(h, (uint64_t)k);
        step_line(k);
        sleep_ms(ms);
        if (k % every == 0 && k < steps) {
            failing_execs();
            int p[2];
            char b = (char)('a' + (k + 1) % 26);
            if (pipe(p) != 0 || write(p[1], &b, 1) != 1)
                fail("pipe");
            close(p[1]);
            char a4[32], a5[32], a6[64], a7[32], cwd[4096];
            snprintf(a4, sizeof(a4), "%ld", k + 1);
            snprintf(a5, sizeof(a5), "%llx", (unsigned long long)h);
            snprintf(a6, sizeof(a6), "%d:%d", (int)getpid(), (int)getppid());
            snprintf(a7, sizeof(a7), "%d", p[0]);
            if (!getcwd(cwd, sizeof(cwd)))
                fail("getcwd");
            char s1[32], s2[32], s3[32];
            snprintf(s1, sizeof(s1), "%ld", steps);
            snprintf(s2, sizeof(s2), "%ld", ms);
            snprintf(s3, sizeof(s3), "%ld", every);
            char *av[] = {argv[0], s1, s2, s3, a4, a5, a6, a7, cwd, NULL};
            fflush(stdout);
            execv("/proc/self/exe", av);
            fail("exec of itself: %s", strerror(errno));
        }
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
