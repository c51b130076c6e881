/* tree_exec_spawn MODE TAG [STEPS=60] [MS=50]: each step starts other programs one way and checks
   what comes back, then prints `TAG step N` (at the end `TAG DONE checksum=... steps=STEPS`,
   ckpt_counter's checksum). MODE:
     chain   fork + exec of itself, which forks + execs itself again (three deep); each checks its
             getpid and getppid across the exec, the leaf sleeps MS ms and exits with N % 50, each
             parent passes its child's status on plus one;
     system  system("sleep ...; exit N % 50");
     popen   popen("echo N; sleep ...") read back, pclose status 0;
     spawn   posix_spawn and posix_spawnp of sh -c "sleep ...; exit N % 50", and posix_spawn of a
             missing program (its child exits 127, or posix_spawn says ENOENT);
     vfork   vfork + execl of sh -c "sleep ...; exit N % 50".
   Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "tree_exec_spawn"
#define USAGE "chain|system|popen|spawn|vfork TAG [STEPS] [MS]"
#include "ckpt_common.h"

extern char **environ;

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

static int wait_for(pid_t pid)
{
    int st;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (got != pid)
        fail("waitpid(%d) returned %d (%s)", (int)pid, (int)got, strerror(errno));
    return st;
}

/* A node of the chain: `--node DEPTH K MS MYPID PARENTPID`, exec'd by its parent's child. */
static int node(char **argv)
{
    int depth = atoi(argv[2]);
    long k = atol(argv[3]), ms = atol(argv[4]);
    pid_t me = (pid_t)atol(argv[5]), parent = (pid_t)atol(argv[6]);
    if (getpid() != me || getppid() != parent) {
        fprintf(stderr, PROG ": node %d of step %ld: pid %d ppid %d, expected %d %d\n", depth, k,
                (int)getpid(), (int)getppid(), (int)me, (int)parent);
        return 200;
    }
    if (depth == 0) {
        sleep_ms(ms);
        return (int)(k % 50);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 201;
    if (pid == 0) {
        char d[16], mine[16], par[16];
        snprintf(d, sizeof(d), "%d", depth - 1);
        snprintf(mine, sizeof(mine), "%d", (int)getpid());
        snprintf(par, sizeof(par), "%d", (int)me);
        execl("/proc/self/exe", PROG, "--node", d, argv[3], argv[4], mine, par, (char *)NULL);
        _exit(202);
    }
    int st = wait_for(pid);
    if (!WIFEXITED(st))
        return 203;
    return (WEXITSTATUS(st) + 1) & 0xff;
}

static void check_exit(const char *what, long k, int st, int want)
{
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != want)
        fail("%s at step %ld: status %#x, expected exit %d", what, k, st, want);
}

static void one_step(const char *mode, long k, long ms)
{
    char cmd[128], num[32];
    snprintf(cmd, sizeof(cmd), "sleep %ld.%03ld; exit %ld", ms / 1000, ms % 1000, k % 50);
    if (strcmp(mode, "chain") == 0) {
        fflush(stdout);
        pid_t me = getpid(), pid = fork();
        if (pid < 0)
            fail("fork: %s", strerror(errno));
        if (pid == 0) {
            char kk[32], mm[32], mine[16], par[16];
            snprintf(kk, sizeof(kk), "%ld", k);
            snprintf(mm, sizeof(mm), "%ld", ms);
            snprintf(mine, sizeof(mine), "%d", (int)getpid());
            snprintf(par, sizeof(par), "%d", (int)me);
            execl("/proc/self/exe", PROG, "--node", "1", kk, mm, mine, par, (char *)NULL);
            _exit(210);
        }
        check_exit("chain", k, wait_for(pid), (int)(k % 50 + 1));
    } else if (strcmp(mode, "system") == 0) {
        check_exit("system", k, system(cmd), (int)(k % 50));
    } else if (strcmp(mode, "popen") == 0) {
        snprintf(cmd, sizeof(cmd), "echo %ld; sleep %ld.%03ld", k, ms / 1000, ms % 1000);
        FILE *f = popen(cmd, "r");
        if (!f)
            fail("popen: %s", strerror(errno));
        char line[64] = "";
        if (!fgets(line, sizeof(line), f))
            fail("popen at step %ld: no line", k);
        snprintf(num, sizeof(num), "%ld\n", k);
        if (strcmp(line, num) != 0)
            fail("popen at step %ld: read '%s'", k, line);
        check_exit("pclose", k, pclose(f), 0);
    } else if (strcmp(mode, "spawn") == 0) {
        char *av[] = {"sh", "-c", cmd, NULL};
        pid_t pid;
        int e = posix_spawn(&pid, "/bin/sh", NULL, NULL, av, environ);
        if (e != 0)
            fail("posix_spawn: %s", strerror(e));
        check_exit("posix_spawn", k, wait_for(pid), (int)(k % 50));
        e = posix_spawnp(&pid, "sh", NULL, NULL, av, environ);
        if (e != 0)
            fail("posix_spawnp: %s", strerror(e));
        check_exit("posix_spawnp", k, wait_for(pid), (int)(k % 50));
        char *missing[] = {"missing", NULL};
        e = posix_spawn(&pid, "/nonexistent/tree_exec_spawn", NULL, NULL, missing, environ);
        if (e == 0)
            check_exit("posix_spawn of a missing program", k, wait_for(pid), 127);
        else if (e != ENOENT)
            fail("posix_spawn of a missing program: %s", strerror(e));
    } else if (strcmp(mode, "vfork") == 0) {
        fflush(stdout);
        pid_t pid = vfork();
        if (pid < 0)
            fail("vfork: %s", strerror(errno));
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        check_exit("vfork", k, wait_for(pid), (int)(k % 50));
    } else {
        fail("unknown mode %s", mode);
    }
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--node") == 0)
        return node(argv);
    if (argc < 3) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *mode = argv[1], *tag = argv[2];
    long steps = arg(argc, argv, 3, 60, 1, 1000000);
    long ms = arg(argc, argv, 4, 50, 0, 100000);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        if (k == steps)
            end_gate(); /* before the last step: a checkpoint asked for late still has one after */
        one_step(mode, k, ms);
        h = fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
        fflush(stdout);
    }
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
