/* crac_front.c — the `crac` command: blocks the checkpoint signal at its very first instruction
 * (before the C library and long before Python start), then execs the Python CLI. */
#include "crac_launcher.h"
#include "crac_rawsys.h"

#include <limits.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A checkpoint signal sent while `crac launch`/`crac restart` is still starting must neither
 * kill it nor be lost (docs/DECISIONS.md). A blocked signal stays blocked and pending across
 * execve, so it is blocked here, in the executable's entry point: crac_py/_entry.py and the
 * loader keep it blocked, and the loader turns a pending one into a checkpoint. Python's own
 * start-up takes tens of milliseconds; the console script pip would generate cannot do this. */

/* Runs before the C library is initialised (static executable, nothing relocated yet): no libc
 * calls, and nothing the compiler could turn into one. */
static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

static const char *after_prefix(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return s;
}

static int signal_number(const char *s)
{
    int v = 0;
    if (!s || !*s)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 64)
            return 0;
        v = v * 10 + (*s - '0');
    }
    return v >= 1 && v <= 64 && v != SIGKILL && v != SIGSTOP ? v : 0;
}

/* The same guess as crac_py/_entry.py: --ckpt-signal > CRAC_SIGCKPT > DMTCP_SIGCKPT > 12. */
/* SIGINT is held too until Python's own handler is in place (main's code unblocks it there): a
 * Ctrl-C during the interpreter's start-up would otherwise end it with a "Fatal Python error"
 * traceback instead of quietly. Whether the caller had it blocked already is kept. */
static int sigint_was_blocked;

__attribute__((used)) static void crac_front_hold(long *sp)
{
    long argc = sp[0];
    char **argv = (char **)(sp + 1), **envp = argv + argc + 1;
    uint64_t intset = 1UL << (SIGINT - 1), old = 0;
    raw_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, &intset, &old, 8);
    sigint_was_blocked = (old & intset) != 0;
    if (argc < 2 || !(same(argv[1], "launch") || same(argv[1], "restart")))
        return;
    int sig = 0;
    for (long i = 2; i < argc && !same(argv[i], "--") && !sig; i++) {
        const char *v = after_prefix(argv[i], "--ckpt-signal=");
        if (!v && same(argv[i], "--ckpt-signal") && i + 1 < argc)
            v = argv[i + 1];
        sig = signal_number(v);
    }
    for (const char *const *name = (const char *const[]){"CRAC_SIGCKPT=", "DMTCP_SIGCKPT=", 0};
         *name && !sig; name++)
        for (char **e = envp; *e; e++) {
            const char *v = after_prefix(*e, *name);
            if (v && *v) {
                sig = signal_number(v);
                sig = sig ? sig : SIGUSR2;
                break;
            }
        }
    uint64_t set = 1UL << ((sig ? sig : SIGUSR2) - 1);
    raw_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, &set, 0, 8);
}

/* The entry point (-e crac_front_entry): hold the signal, then the C library's _start with the
 * process's initial stack and rdx untouched. */
__asm__(".text\n"
        ".globl crac_front_entry\n"
        ".type crac_front_entry, @function\n"
        "crac_front_entry:\n"
        "    mov %rdx, %r12\n"
        "    mov %rsp, %r13\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call crac_front_hold\n"
        "    mov %r13, %rsp\n"
        "    mov %r12, %rdx\n"
        "    jmp _start\n");

extern char **environ;

#ifndef CRAC_PYTHON
#define CRAC_PYTHON "python3"
#endif

/* `crac restart CHECKPOINT` of one process needs nothing of Python's (docs/DECISIONS.md "Restart
 * without Python"): the loader's --fast-restart mode (loader/restart/restart_prepare.c) makes
 * the Python CLI's checks and execs the loader as it would, or, when it cannot be sure to reach
 * the same answer, runs this command again with CRAC_FAST_RESTART_DECLINED set, and the Python
 * CLI decides. Here, before that: what only the Python path handles, seen in the arguments and
 * the environment. Returns why not, or NULL. */
static const char *fast_restart_blocker(int argc, char **argv)
{
    static const char *const flags[] = {
        "--force", "--no-truncate",    "--allow-changed-files",   "--verbose",
        "-v",      "--no-fork-writer", "--exit-after-checkpoint", "--lazy"};
    /* `--` ends the options, as crac_restart_script.sh writes it before the checkpoint. */
    int positional = 0, options_ended = 0;
    for (int i = 2; i < argc; i++) {
        if (!options_ended && strcmp(argv[i], "--") == 0) {
            options_ended = 1;
            continue;
        }
        int known = 0;
        for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]) && !options_ended; f++)
            known |= strcmp(argv[i], flags[f]) == 0;
        if (!known && ((argv[i][0] == '-' && !options_ended) || argv[i][0] == '\0' || positional++))
            return "an option only the Python CLI handles";
    }
    if (!positional)
        return "no checkpoint named";
    /* Every variable that can change what `crac restart` does (a coordinator, an interval, the
     * compression, an MPI launcher's rank) is the Python CLI's; these few cannot. */
    static const char *const harmless[] = {
        "CRAC_SIGCKPT=",
        "DMTCP_SIGCKPT=",
        "CRAC_DEVICE=",
        "CRAC_DEBUG_PATH=",
        "CRAC_TIMING=",       /* the loader's phase timings: bench/peers.py restarts with it */
        "CRAC_DIRECT_WRITE=", /* the loader's writer, at the program's next checkpoints */
        "CRAC_NATIVE_DIR=",
        "CRAC_LAZY_PREFETCH_DELAY_MS=", /* the loader's test knob (restart_lazy.c) */
        "CRAC_LAZY_PREFETCH_THREADS=" /* its number of prefetch threads (restart_lazy.c) */};
    for (char **e = environ; *e; e++) {
        int ok = strncmp(*e, "CRAC_", 5) != 0 && strncmp(*e, "DMTCP_", 6) != 0;
        for (size_t h = 0; !ok && h < sizeof(harmless) / sizeof(harmless[0]); h++)
            ok = strncmp(*e, harmless[h], strlen(harmless[h])) == 0;
        ok = ok && !crac_launcher_rank_entry(*e);
        if (!ok)
            return "the environment names crac or MPI settings";
    }
    return NULL;
}

/* The loader the Python CLI would run (crac_py/paths.py): $CRAC_NATIVE_DIR's, else the one
 * installed with this command (CRAC_NATIVE_DIR_BUILT, set by build_native.py). */
static int find_loader(char *out, size_t len)
{
    const char *dir = getenv("CRAC_NATIVE_DIR");
#ifdef CRAC_NATIVE_DIR_BUILT
    if (!dir || !*dir)
        dir = CRAC_NATIVE_DIR_BUILT;
#endif
    if (!dir || !*dir || snprintf(out, len, "%s/crac-loader", dir) >= (int)len)
        return -1;
    struct stat st;
    return stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    /* The interpreter crac was installed with; else the python3 beside this executable. */
    char python[PATH_MAX] = CRAC_PYTHON, self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[n > 0 ? n : 0] = '\0';
    if (access(python, X_OK) != 0 && n > 0) {
        char *slash = strrchr(self, '/');
        snprintf(python, sizeof(python), "%.*s/python3", (int)(slash - self), self);
    }
    /* -P: the working directory is not put on sys.path (a ./crac_py there must not shadow
     * crac). sys.argv[0] becomes this command's path, as with a console script. */
    char **args = calloc((size_t)argc + 6, sizeof(char *));
    if (!args)
        return 2;
    const char *debug = getenv("CRAC_DEBUG_PATH"), *declined = getenv("CRAC_FAST_RESTART_DECLINED");
    const char *blocker = declined;
    if (declined) {
        blocker = strdup(declined);
        unsetenv("CRAC_FAST_RESTART_DECLINED"); /* never the program's */
    } else if (argc >= 2 && strcmp(argv[1], "restart") == 0) {
        char loader[PATH_MAX];
        blocker = n <= 0 ? "this command's path is unknown" : fast_restart_blocker(argc, argv);
        if (!blocker && find_loader(loader, sizeof(loader)) != 0)
            blocker = "the loader is not where this command was built for";
        if (!blocker) {
            int j = 0;
            args[j++] = loader;
            args[j++] = "--fast-restart";
            args[j++] = self;
            args[j++] = sigint_was_blocked ? "0" : "1";
            for (int i = 1; i < argc; i++)
                args[j++] = argv[i];
            execv(loader, args);
            blocker = "the loader cannot be run";
        }
    }
    if (debug && *debug && blocker)
        fprintf(stderr, "crac: debug: restart path: Python (%s)\n", blocker);
    int k = 0;
    args[k++] = python;
    args[k++] = "-P";
    args[k++] = "-c";
    /* Ctrl-C while Python starts or imports the CLI ends quietly (status 130): SIGINT, held since
     * the entry point, is unblocked once a handler exists. For launch and restart that handler
     * exits at once (a KeyboardInterrupt can land where Python only prints and ignores it); the
     * exec of the loader resets it, so the program gets the disposition crac was given. */
    args[k++] = "import sys\nsys.argv[0] = sys.argv.pop(1)\nheld = sys.argv.pop(1) == '1'\n"
                "try:\n"
                "    import signal\n"
                "    if sys.argv[1:2] in (['launch'], ['restart']) and "
                "signal.getsignal(signal.SIGINT) is signal.default_int_handler:\n"
                "        import os\n"
                "        signal.signal(signal.SIGINT, lambda n, f: os._exit(130))\n"
                "    if held:\n"
                "        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
                "    from crac_py._entry import main\n    sys.exit(main())\n"
                "except KeyboardInterrupt:\n    sys.exit(130)\n";
    args[k++] = n > 0 ? self : argv[0];
    args[k++] = sigint_was_blocked ? "0" : "1";
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    execvp(python, args);
    fprintf(stderr, "crac: error: cannot run %s: %m; reinstall crac (pip install .)\n", python);
    return 2;
}
