/* sigsys_spawn: blocks every signal, installs its own SIGSYS handler, runs system(), popen() and
   posix_spawn() with the full mask, then raises SIGSYS itself; checks handler, statuses and masks. */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t hits;
static volatile sig_atomic_t bad_info;

static void on_sigsys(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    if (sig != SIGSYS || info == NULL || info->si_signo != SIGSYS || info->si_code != SI_TKILL ||
        info->si_pid != getpid())
        bad_info = 1;
    hits++;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "sigsys_spawn: " __VA_ARGS__);                                             \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

/* The mask we expect to read back: everything sigfillset() gives us, except what the kernel
   refuses to block (SIGKILL, SIGSTOP), minus `except` (0 for none). */
static void check_mask(const char *when, int except)
{
    sigset_t cur, full;
    if (sigprocmask(0, NULL, &cur) != 0)
        FAIL("sigprocmask(read) failed %s", when);
    sigfillset(&full);
    for (int s = 1; s < NSIG; s++) {
        int want = sigismember(&full, s) == 1 && s != SIGKILL && s != SIGSTOP && s != except;
        int have = sigismember(&cur, s) == 1;
        if (want != have)
            FAIL("%s: signal %d (%s) is %s in the mask, expected %s", when, s, strsignal(s),
                 have ? "set" : "clear", want ? "set" : "clear");
    }
}

static void check_handler(const char *when)
{
    struct sigaction old;
    memset(&old, 0, sizeof old);
    if (sigaction(SIGSYS, NULL, &old) != 0)
        FAIL("sigaction(SIGSYS, NULL, &old) failed %s", when);
    if (!(old.sa_flags & SA_SIGINFO) || old.sa_sigaction != on_sigsys)
        FAIL("%s: SIGSYS handler reads back as %p flags 0x%x, expected %p with SA_SIGINFO", when,
             (void *)old.sa_sigaction, (unsigned)old.sa_flags, (void *)on_sigsys);
}

static void check_status(const char *what, int st)
{
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("%s: bad status 0x%x", what, st);
}

int main(void)
{
    sigset_t all;
    sigfillset(&all);
    if (sigprocmask(SIG_BLOCK, &all, NULL) != 0)
        FAIL("sigprocmask(SIG_BLOCK, full) failed");
    check_mask("after blocking", 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) != 0)
        FAIL("sigaction(SIGSYS) failed");
    check_handler("after install");

    fflush(stdout);
    int st = system("echo sys");
    check_status("system", st);
    check_mask("after system", 0);

    FILE *p = popen("echo pop", "r");
    if (!p)
        FAIL("popen failed");
    char line[64] = {0};
    if (!fgets(line, sizeof line, p) || strcmp(line, "pop\n") != 0)
        FAIL("popen read '%s', expected 'pop'", line);
    check_status("pclose", pclose(p));
    printf("popen read %s", line);
    fflush(stdout);
    check_mask("after popen", 0);

    pid_t pid;
    char *argv[] = {"/bin/echo", "spawn", NULL};
    int rc = posix_spawn(&pid, "/bin/echo", NULL, NULL, argv, environ);
    if (rc != 0)
        FAIL("posix_spawn: %s", strerror(rc));
    if (waitpid(pid, &st, 0) != pid)
        FAIL("waitpid(spawned) failed");
    check_status("posix_spawn", st);
    check_mask("after posix_spawn", 0);
    check_handler("after children");

    if (hits != 0)
        FAIL("SIGSYS handler ran %d times before raise", (int)hits);
    sigset_t sys;
    sigemptyset(&sys);
    sigaddset(&sys, SIGSYS);
    if (sigprocmask(SIG_UNBLOCK, &sys, NULL) != 0)
        FAIL("sigprocmask(SIG_UNBLOCK, SIGSYS) failed");
    check_mask("after unblocking SIGSYS", SIGSYS);
    if (raise(SIGSYS) != 0)
        FAIL("raise(SIGSYS) failed");
    if (hits != 1)
        FAIL("SIGSYS handler ran %d times, expected exactly 1", (int)hits);
    if (bad_info)
        FAIL("SIGSYS handler got unexpected siginfo (not an app-raised SIGSYS)");
    check_mask("after raise", SIGSYS);
    check_handler("after raise");
    printf("sigsys_spawn ok\n");
    return 0;
}
