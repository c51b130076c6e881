/* main.c — the lower-half executable: reserves W and D, starts the manager and the shadow-TCB
 * pool, maps the program's ld.so into W, confines the upper half and jumps to it (DESIGN §5). */
#include "confine.h"
#include "crac_layout.h"
#include "elf_load.h"
#include "manager.h"
#include "probe.h"
#include "upper_alloc.h"
#include "upper_stack.h"
#include "window.h"

#include "../lowerhalf/backend.h"
#include "../lowerhalf/lh_api.h"
#include "../lowerhalf/shadow_pool.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define SHADOW_INITIAL 8
#define EXIT_REFUSED 2

struct options {
    const char *device;
    int sim_version;
    const char *argv0;
    int ckpt_signal;
    char **program_argv; /* program path, then its arguments */
};

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "crac: error: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(EXIT_REFUSED);
}

static void usage(void)
{
    fprintf(stderr, "usage: crac-loader [--device sim|none] [--sim-version N] [--argv0 NAME] "
                    "[--ckpt-signal N] "
                    "-- PROGRAM [ARGS...]\n       crac-loader --probe\n");
    exit(EXIT_REFUSED);
}

static struct options parse_args(int argc, char **argv)
{
    struct options o = {"sim", 0, NULL, CRAC_SIG_CKPT_DEFAULT, NULL};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(a, "--device") == 0)
            o.device = argv[++i];
        else if (strcmp(a, "--sim-version") == 0)
            o.sim_version = atoi(argv[++i]);
        else if (strcmp(a, "--argv0") == 0)
            o.argv0 = argv[++i];
        else if (strcmp(a, "--ckpt-signal") == 0)
            o.ckpt_signal = atoi(argv[++i]);
        else
            usage();
    }
    if (i >= argc)
        usage();
    if (strcmp(o.device, "sim") != 0 && strcmp(o.device, "none") != 0)
        die("device '%s' is not available in this build; use --device sim", o.device);
    if (o.ckpt_signal < 1 || o.ckpt_signal > 64 || o.ckpt_signal == SIGKILL ||
        o.ckpt_signal == SIGSTOP || o.ckpt_signal == SIGSYS || o.ckpt_signal == CRAC_SIG_SUSPEND ||
        o.ckpt_signal == 32 || o.ckpt_signal == 33)
        die("checkpoint signal %s cannot be used", argv[i - 1]);
    o.program_argv = &argv[i];
    if (!o.argv0)
        o.argv0 = o.program_argv[0];
    return o;
}

/* The directory of this executable: the upper runtime and the backends sit next to it. */
static void native_dir(char *out, size_t outlen)
{
    ssize_t n = readlink("/proc/self/exe", out, outlen - 1);
    if (n <= 0 || (size_t)n > outlen - 64)
        die("cannot find the loader's own path%s", "");
    out[n] = '\0';
    *strrchr(out, '/') = '\0';
}

static void upper_runtime_path(const char *dir, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/libcrac-upper.so", dir);
    if (access(out, R_OK) != 0)
        die("upper runtime %s is missing; reinstall crac-py", out);
}

static void reserved_signal_placeholder(int sig) { (void)sig; }

/* Until the checkpoint machinery takes them over, the reserved signals are caught and dropped:
 * the program can neither take nor block them (DESIGN §7). */
static void claim_reserved_signals(int ckpt_signal)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = reserved_signal_placeholder;
    sa.sa_flags = SA_RESTART;
    sigaction(ckpt_signal, &sa, NULL);
    sigaction(CRAC_SIG_SUSPEND, &sa, NULL);
}

__attribute__((noreturn)) static void jump_to_upper(uint64_t sp, uint64_t entry)
{
    /* rdx = 0: no rtld_fini for the program's libc to register, as after exec. */
    __asm__ volatile("mov %0, %%rsp\n\t"
                     "xor %%ebp, %%ebp\n\t"
                     "xor %%edx, %%edx\n\t"
                     "jmp *%1\n\t"
                     :
                     : "S"(sp), "a"(entry)
                     : "memory");
    __builtin_unreachable();
}

int main(int argc, char **argv, char **envp)
{
    if (argc == 2 && strcmp(argv[1], "--probe") == 0)
        return probe_main();
    char err[512];
    /* Invariant 1: the windows are reserved before anything else is loaded. */
    if (window_reserve("upper window W", CRAC_W_START, CRAC_W_END, err, sizeof(err)) != 0 ||
        window_reserve("device window D", CRAC_D_START, CRAC_D_END, err, sizeof(err)) != 0)
        die("%s", err);
    struct options opt = parse_args(argc, argv);
    if (ctrl_init(opt.ckpt_signal) != 0)
        die("cannot create the control block in the upper window%s", "");

    char interp[PATH_MAX], runtime[PATH_MAX + 32], dir[PATH_MAX];
    if (elf_read_interp(opt.program_argv[0], interp, sizeof(interp), err, sizeof(err)) != 0)
        die("%s", err);
    native_dir(dir, sizeof(dir));
    upper_runtime_path(dir, runtime, sizeof(runtime));

    int fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
    int e = shadow_pool_start(SHADOW_INITIAL);
    if (e == 0)
        e = manager_start();
    if (e != 0)
        die("cannot start lower-half threads: %s", strerror(-e));
    const struct crac_backend_info *backend = NULL;
    if (strcmp(opt.device, "none") != 0 &&
        !(backend = backend_load(dir, opt.device, opt.sim_version, err, sizeof(err))))
        die("%s", err);
    const struct crac_lh_api *api = lh_api_table(backend, fsgsbase);
    if (!api)
        die("out of memory building the lower-half API table%s", "");

    struct loaded_elf ldso;
    if (elf_map_into_w(interp, &ldso, err, sizeof(err)) != 0)
        die("%s", err);

    /* The upper ld.so is run as a program: it maps the application, its libraries and our
     * runtime, and keeps argv[0] and the environment exactly as the caller gave them. */
    int n_prog = 0;
    while (opt.program_argv[n_prog])
        n_prog++;
    char **uargv = calloc((size_t)n_prog + 8, sizeof(char *));
    int k = 0;
    uargv[k++] = interp;
    uargv[k++] = "--argv0";
    uargv[k++] = (char *)opt.argv0;
    uargv[k++] = "--preload";
    uargv[k++] = runtime;
    for (int i = 0; i < n_prog; i++)
        uargv[k++] = opt.program_argv[i];
    uargv[k] = NULL;

    struct upper_start start = {uargv, envp, &ldso, opt.program_argv[0], (uint64_t)api};
    uint64_t sp = upper_stack_build(&start, err, sizeof(err));
    if (!sp)
        die("%s", err);
    free(uargv);

    claim_reserved_signals(opt.ckpt_signal);
    if ((e = confine_install_handler()) != 0 || (e = confine_install_filter()) != 0)
        die("cannot install the seccomp confinement: %s", strerror(-e));
    fflush(NULL); /* the lower stdio is never flushed again: the process exits through the upper */
    jump_to_upper(sp, ldso.entry);
}
