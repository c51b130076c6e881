/* main.c — the lower-half executable: reserves W and D, starts the manager and the shadow-TCB
 * pool, loads the device backend, then either launches the program (ld.so mapped into W, the
 * upper half confined, jump) or restarts it from an image (restart.c). docs/ARCHITECTURE.md "Launch", "Restart". */
#include "native_dir.h"
#include "ckpt.h"
#include "coord_client.h"
#include "confine.h"
#include "crac_layout.h"
#include "elf_load.h"
#include "fds.h"
#include "image_device.h"
#include "image_check.h"
#include "image_compress.h"
#include "launch.h"
#include "manager.h"
#include "probe.h"
#include "vdso_proxy.h"
#include "restart.h"
#include "restart_lazy.h"
#include "restart_prepare.h"
#include "state.h"
#include "tree.h"
#include "upper_alloc.h"
#include "window.h"

#include "backend.h"
#include "lh_api.h"
#include "lower_fds.h"
#include "shadow_pool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>

#define SHADOW_INITIAL 8

/* A restart under a coordinator: its failure stops the other processes of the restart. */
static const struct options *restarting;

void die(const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    fprintf(stderr, "crac: error: %s\n", why);
    if (restarting)
        coord_restart_failed(restarting->coord_host,
                             restarting->coord_port ? restarting->coord_port : "7779",
                             restarting->coord_token, why);
    exit(EXIT_REFUSED);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: crac-loader [--device sim|cuda|none] [--sim-version N] [--cuda-runtime PATH]\n"
            "                   [--argv0 NAME]\n"
            "                   [--ckpt-signal N] [--ckpt-dir DIR] [--keep N] [--interval S]\n"
            "                   [--exit-after-checkpoint] [--no-fork-writer] [--crac-cmd CMD]\n"
            "                   [--ckpt-open-files]\n"
            "                   [--child-pid VPID:PID ...] [--parent-pid VPID]\n"
            "                   [--group-id VPGID:PGID] [--session-id VSID:SID]\n"
            "                   [--shared-fd FD:INHERITED_FD ...] [--shared-mem DEV:INO:FD ...]\n"
            "                   [--coord-host H --coord-port P [--coord-token T]]\n"
            "                   [--mpi-shim SONAME] [--compress none|lz4|zstd[:LEVEL]]\n"
            "                   [--incremental FULL_EVERY]\n"
            "                   [--cudart-shim SONAME] -- PROGRAM [ARGS...]\n"
            "       (an exec from the program adds --exec-vpid, --exec-signals, --exec-filter,\n"
            "        --exec-lineage, --coord-old-fd, and an exec or restart of a process a fork\n"
            "        in the job made --forked 1: loader/ckpt/tree_exec.c)\n"
            "       crac-loader --restart GEN_DIR --core-size N --header-crc X [--no-truncate]\n"
            "                   [--allow-changed-files]\n"
            "                   [options above] -- PROGRAM [ARGS...]\n"
            "       crac-loader --check-image GEN_DIR CORE_SIZE HEADER_CRC\n"
            "       crac-loader --check-core PATH HEADER_CRC CORE_SIZE\n"
            "       crac-loader --compact GEN_DIR CORE_SIZE HEADER_CRC KEEP CRAC_CMD\n"
            "       crac-loader --probe\n");
    exit(EXIT_REFUSED);
}

static int int_arg(const char *name, const char *v, int lo, int hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi)
        die("%s: '%s' is not a number in [%d, %d]", name, v, lo, hi);
    return (int)x;
}

/* Which build of the backend: the sim's version, or the CUDA runtime's major version read from
 * its soname (libcudart.so.13 -> libcrac-cuda13.so). */
static int device_version(const struct options *o)
{
    if (strcmp(o->device, "cuda") != 0)
        return o->sim_version;
    const char *so = strstr(o->cuda_runtime, ".so.");
    int major = so ? atoi(so + 4) : 0;
    return major > 0 ? major : 13;
}

static struct options parse_args(int argc, char **argv)
{
    struct options o;
    memset(&o, 0, sizeof(o));
    o.device = "sim";
    o.ckpt_signal = CRAC_SIG_CKPT_DEFAULT;
    o.ckpt_dir = ".";
    o.keep = 2;
    o.crac_cmd = "crac";
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--exit-after-checkpoint") == 0) {
            o.exit_after = 1;
            continue;
        }
        if (strcmp(a, "--verbose") == 0) {
            o.verbose = 1;
            continue;
        }
        if (strcmp(a, "--no-fork-writer") == 0) {
            o.no_fork_writer = 1;
            continue;
        }
        if (strcmp(a, "--ckpt-open-files") == 0) {
            o.ckpt_open_files = 1;
            continue;
        }
        if (strcmp(a, "--no-truncate") == 0) {
            o.no_truncate = 1;
            continue;
        }
        if (strcmp(a, "--lazy") == 0) { /* restart: memory on first touch (restart_lazy.c) */
            restart_lazy_wanted = 1;
            continue;
        }
        if (strcmp(a, "--allow-changed-files") == 0) {
            o.allow_changed_files = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(a, "--device") == 0)
            o.device = v;
        else if (strcmp(a, "--sim-version") == 0)
            o.sim_version = int_arg(a, v, 1, 99);
        else if (strcmp(a, "--cuda-runtime") == 0)
            o.cuda_runtime = v;
        else if (strcmp(a, "--argv0") == 0)
            o.argv0 = v;
        else if (strcmp(a, "--ckpt-signal") == 0)
            o.ckpt_signal = int_arg(a, v, 1, 64);
        else if (strcmp(a, "--ckpt-dir") == 0)
            o.ckpt_dir = v;
        else if (strcmp(a, "--keep") == 0)
            o.keep = int_arg(a, v, 1, 100000);
        else if (strcmp(a, "--interval") == 0)
            o.interval = int_arg(a, v, 0, 1 << 30);
        else if (strcmp(a, "--crac-cmd") == 0)
            o.crac_cmd = v;
        else if (strcmp(a, "--coord-host") == 0)
            o.coord_host = v;
        else if (strcmp(a, "--coord-port") == 0)
            o.coord_port = v;
        else if (strcmp(a, "--coord-token") == 0)
            o.coord_token = v;
        else if (strcmp(a, "--restart") == 0)
            o.restart_dir = v;
        else if (strcmp(a, "--core-size") == 0)
            o.core_size = strtoull(v, NULL, 10);
        else if (strcmp(a, "--mpi-shim") == 0)
            o.mpi_shim = v;
        else if (strcmp(a, "--compress") == 0)
            o.compress = v;
        else if (strcmp(a, "--incremental") == 0)
            o.incremental = int_arg(a, v, 0, 1 << 20);
        else if (strcmp(a, "--cudart-shim") == 0)
            o.cudart_shim = v;
        else if (strcmp(a, "--child-pid") == 0) {
            if (tree_restart_child(v) != 0)
                die("--child-pid: '%s' is not VPID:PID", v);
        } else if (strcmp(a, "--parent-pid") == 0) {
            if (tree_restart_parent(v) != 0)
                die("--parent-pid: '%s' is not a pid", v);
        } else if (strcmp(a, "--group-id") == 0) {
            if (tree_restart_group_id(v, 0) != 0)
                die("--group-id: '%s' is not VPGID:PGID", v);
        } else if (strcmp(a, "--session-id") == 0) {
            if (tree_restart_group_id(v, 1) != 0)
                die("--session-id: '%s' is not VSID:SID", v);
        } else if (strcmp(a, "--shared-fd") == 0) {
            if (fd_shared_add(v) != 0)
                die("--shared-fd: '%s' is not FD:INHERITED_FD", v);
        } else if (strcmp(a, "--shared-mem") == 0) {
            if (restart_shared_mem_add(v) != 0)
                die("--shared-mem: '%s' is not DEV:INO:INHERITED_FD", v);
        } else if (strcmp(a, "--header-crc") == 0)
            o.header_crc = (uint32_t)strtoul(v, NULL, 10);
        else if (tree_exec_option(a, v) < 0)
            die("%s: malformed value '%s'", a, v);
        else if (tree_exec_option(a, v) == 0)
            usage();
    }
    if (i >= argc)
        usage();
    if (strcmp(o.device, "sim") != 0 && strcmp(o.device, "cuda") != 0 &&
        strcmp(o.device, "none") != 0)
        die("unknown device '%s'; use --device sim, cuda or none", o.device);
    if (strcmp(o.device, "cuda") == 0 && !o.cuda_runtime)
        die("--device cuda needs --cuda-runtime PATH (NVIDIA's libcudart.so.12 or .13)");
    int s = o.ckpt_signal;
    if (s == SIGKILL || s == SIGSTOP || s == SIGSYS || s == CRAC_SIG_SUSPEND || s == 32 || s == 33)
        die("signal %d cannot be the checkpoint signal", s);
    o.program_argv = &argv[i];
    o.program_argc = argc - i;
    if (!o.argv0)
        o.argv0 = o.program_argv[0];
    return o;
}

static void fill_ckpt_config(const struct options *o, const struct crac_backend_info *backend)
{
    struct ckpt_config *c = &ckpt_cfg;
    char host[64];
    if (!realpath(o->program_argv[0], c->program))
        snprintf(c->program, sizeof(c->program), "%s", o->program_argv[0]);
    if (o->restart_dir) {
        /* Generations continue in the directory the image came from. */
        char gen[PATH_MAX];
        if (!realpath(o->restart_dir, gen))
            die("cannot resolve %s", o->restart_dir);
        *strrchr(gen, '/') = '\0';
        snprintf(c->proc_dir, sizeof(c->proc_dir), "%s", gen);
        *strrchr(gen, '/') = '\0';
        snprintf(c->ckpt_dir, sizeof(c->ckpt_dir), "%s", gen[0] ? gen : "/");
    } else {
        if (!realpath(o->ckpt_dir, c->ckpt_dir))
            snprintf(c->ckpt_dir, sizeof(c->ckpt_dir), "%s", o->ckpt_dir);
        snprintf(host, sizeof(host), "%08lx", (unsigned long)gethostid() & 0xffffffffUL);
        const char *base = strrchr(c->program, '/');
        int n = snprintf(c->proc_dir, sizeof(c->proc_dir), "%s/ckpt_%.64s_%s-%d", c->ckpt_dir,
                         base ? base + 1 : c->program, host, getpid());
        if (n < 0 || (size_t)n >= sizeof(c->proc_dir))
            die("checkpoint directory path too long");
    }
    snprintf(c->crac_cmd, sizeof(c->crac_cmd), "%s", o->crac_cmd);
    snprintf(c->backend_name, sizeof(c->backend_name), "%s", backend ? backend->name : "none");
    snprintf(c->backend_version, sizeof(c->backend_version), "%s", backend ? backend->version : "");
    c->backend_driver_version = backend ? backend->driver_version : 0;
    c->keep = o->keep;
    c->interval = o->interval;
    c->exit_after = o->exit_after;
    c->verbose = o->verbose;
    /* CRAC_NO_FORK_WRITER=1 too: a job's processes are launched by scripts crac does not own. */
    c->no_fork_writer = o->no_fork_writer || (getenv("CRAC_NO_FORK_WRITER") &&
                                              strcmp(getenv("CRAC_NO_FORK_WRITER"), "0") != 0);
    c->ckpt_open_files = o->ckpt_open_files;
    c->ckpt_signal = o->ckpt_signal;
    /* Loaded now: a library that is missing is said at launch, not at the first checkpoint, and
     * the forked writer finds it loaded. */
    if (o->compress) {
        char err[256];
        if (compress_parse(o->compress, &c->compress, &c->compress_level) != 0)
            die("--compress: '%s' is not none, lz4, zstd or zstd:LEVEL (1..19)", o->compress);
        if (compress_load(c->compress, err, sizeof(err)) != 0)
            die("--compress %s: %s", o->compress, err);
    }
    incr_configure(o->incremental > 1 ? o->incremental : 0);
    c->argc = o->program_argc;
    c->argv = o->program_argv;
}

/* `crac launch`/`crac restart` give the loader its options through an inherited descriptor named
 * by CRAC_LOADER_OPTIONS_FD (NUL-terminated strings: the options, "--", the program's path), and
 * exec it with the program's own argv, so that ps, pgrep -f and /proc/PID/cmdline show the
 * program, and no option (the coordinator token included) is on the command line
 * (crac_py/launch/runner.py). Rebuilds the command line the options would have made:
 * [loader, options..., "--", path, program argv[1..]]. Without the variable (the loader run by
 * hand), argv is used as it is. */
static void options_from_fd(int *argc, char ***argv)
{
    const char *var = getenv("CRAC_LOADER_OPTIONS_FD");
    if (!var)
        return;
    char *end;
    long fd = strtol(var, &end, 10);
    if (*var == '\0' || *end != '\0' || fd < 0 || fd > 1 << 20)
        die("CRAC_LOADER_OPTIONS_FD is not a descriptor number: '%s'", var);
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            die("out of memory reading the loader's options");
        ssize_t n = read((int)fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("cannot read the loader's options from descriptor %ld: %s", fd, strerror(errno));
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    close((int)fd);
    unsetenv("CRAC_LOADER_OPTIONS_FD");
    if (len == 0 || buf[len - 1] != '\0')
        die("the loader's options (descriptor %ld) are malformed", fd);
    size_t items = 0;
    for (size_t i = 0; i < len; i++)
        items += buf[i] == '\0';
    char **v = calloc(items + (size_t)*argc + 1, sizeof(char *));
    if (!v)
        die("out of memory reading the loader's options");
    int n = 0;
    v[n++] = "crac-loader";
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        v[n++] = buf + i;
    for (int i = 1; i < *argc; i++)
        v[n++] = (*argv)[i];
    *argc = n;
    *argv = v;
}

/* The process's name (comm: ps, top, pidof, pgrep) is the program's, as the kernel would have
 * named it from the path it executed, not "crac-loader". */
static void take_program_name(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    prctl(PR_SET_NAME, (unsigned long)(slash ? slash + 1 : argv0), 0, 0, 0);
}

/* The checkpoint signal named on the command line, before anything checks it (parse_args does). */
static int early_ckpt_signal(int argc, char **argv)
{
    int sig = CRAC_SIG_CKPT_DEFAULT;
    for (int i = 1; i + 1 < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--ckpt-signal") == 0) {
            long v = strtol(argv[i + 1], NULL, 10);
            sig = v >= 1 && v <= 64 ? (int)v : sig;
        }
    return sig;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--probe") == 0)
        return probe_main();
    if (argc >= 2 && strcmp(argv[1], "--check-image") == 0)
        return restart_check_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--check-core") == 0)
        return image_check_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--compact") == 0)
        return compact_main(argc, argv); /* `crac compact` (ckpt_compact.c) */
    if (argc >= 2 && strcmp(argv[1], "--fast-restart") == 0)
        restart_prepare_main(argc, argv); /* `crac restart` without Python: never returns */
    options_from_fd(&argc, &argv);
    /* `crac launch`/`crac restart` exec us with the checkpoint signal blocked (the `crac` command
     * blocks it at its entry point, front/crac_front.c); block it here too for a loader started
     * by hand. It stays blocked in every thread, the
     * program's included: one sent now stays pending and is taken once the program can be
     * checkpointed (ckpt_trigger.c). */
    int early_sig = early_ckpt_signal(argc, argv);
    ckpt_block_signal(early_sig);
    char err[512];
    /* Invariant 1: the windows are reserved before anything else is loaded. */
    if (window_reserve("upper window W", CRAC_W_START, CRAC_W_END, err, sizeof(err)) != 0 ||
        window_reserve("device window D", CRAC_D_START, CRAC_D_END, err, sizeof(err)) != 0)
        die("%s", err);
    lower_fds_size_table(); /* while this is the only thread */
    vdso_proxy_bind();      /* before any upper code runs: launch, restart, exec */
    stdio_given_note();     /* an exec'ing loader's --exec-stdio replaces it (parse_args) */
    struct options opt = parse_args(argc, argv);
    if (opt.restart_dir && opt.coord_host)
        restarting = &opt;
    take_program_name(opt.argv0);
    struct restart_image img;
    if (opt.restart_dir) {
        /* Read and check the image, and hold the program's fd numbers, before anything else
         * (the backend included) can open files. */
        if (restart_open_image(&opt, &img, err, sizeof(err)) != 0)
            die("%s", err);
    } else if (ctrl_init(opt.ckpt_signal) != 0) {
        die("cannot create the control block in the upper window");
    } else {
        boot_read(&crac_ctrl()->host_boot); /* a restart reads it again (start_time.c) */
    }
    tree_exec_device(opt.device, opt.sim_version, opt.cuda_runtime);
    if (native_dir(opt.native_dir, sizeof(opt.native_dir)) != 0)
        die("cannot find the loader's own path");

    /* A restart keeps the signal of the image (crac restart passes it; a hand-made command line
     * may not). */
    int ckpt_sig = opt.restart_dir ? (int)img.proc.ckpt_signal : opt.ckpt_signal;
    if (ckpt_sig < 1 || ckpt_sig > 64 || ckpt_sig == SIGKILL || ckpt_sig == SIGSTOP)
        die("image corrupted: checkpoint signal %d", ckpt_sig);
    ckpt_block_signal(ckpt_sig);
    int e = ckpt_install_trigger(ckpt_sig);
    if (e != 0)
        die("cannot install the checkpoint signal handler: %s", strerror(-e));

    int fsgsbase = (getauxval(AT_HWCAP2) & 2) != 0;
    /* The lower-half threads are made with every signal blocked (they inherit this mask): a
     * signal sent to the process that all the program's threads block would otherwise go to one
     * of them and kill the process, instead of staying pending for the program's sigwait or
     * signalfd. */
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    e = shadow_pool_start(SHADOW_INITIAL);
    if (e == 0)
        e = manager_start(ckpt_sig);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (e != 0)
        die("cannot start lower-half threads: %s", strerror(-e));
    const struct crac_backend_info *backend = NULL;
    if (strcmp(opt.device, "none") != 0 &&
        !(backend = backend_load(opt.native_dir, opt.device, device_version(&opt), opt.cuda_runtime,
                                 err, sizeof(err))))
        die("%s", err);
    ckpt_backend = backend;
    const struct crac_lh_api *api = lh_api_table(backend, fsgsbase);
    if (!api)
        die("out of memory building the lower-half API table");
    fill_ckpt_config(&opt, backend);
    if (!opt.restart_dir)
        tree_exec_apply(); /* an exec'd process keeps its ids, children and image directory */
    /* A restart continues its image's lineage unless a running process writes it (the original
     * still running, or another restart of the same image): then one of its own, before the
     * coordinator hears where this process writes. */
    if (opt.restart_dir && image_lineage_claim(0) != 0)
        die("cannot lock %s: %s", ckpt_cfg.proc_dir, strerror(errno));
    ckpt_cfg.coord_fd = -1;
    if (opt.coord_host) {
        int vpid = opt.restart_dir ? (int)img.proc.pid : tree_exec_vpid();
        int image_gen = 0;
        if (opt.restart_dir) {
            const char *base = strrchr(opt.restart_dir, '/');
            if (sscanf(base ? base + 1 : opt.restart_dir, "gen-%d", &image_gen) != 1 ||
                image_gen < 1)
                image_gen = 1;
        }
        int fd = coord_connect(opt.coord_host, opt.coord_port ? opt.coord_port : "7779",
                               opt.coord_token, image_gen, vpid, err, sizeof(err));
        if (fd < 0)
            die("%s", err);
        ckpt_cfg.coord_fd = lower_fd_adopt(fd);
        tree_exec_joined();
        snprintf(ckpt_cfg.coord_host, sizeof(ckpt_cfg.coord_host), "%s", opt.coord_host);
        snprintf(ckpt_cfg.coord_port, sizeof(ckpt_cfg.coord_port), "%s",
                 opt.coord_port ? opt.coord_port : "7779");
        snprintf(ckpt_cfg.coord_token, sizeof(ckpt_cfg.coord_token), "%s",
                 opt.coord_token ? opt.coord_token : "");
    }
    ckpt_config_done();
    confine_lower_fork = tree_fork_lower; /* every forked child is a split process too */
    confine_fork_gate = tree_coord_gate;
    confine_lower_exec = (long (*)(const void *))tree_exec_lower; /* and every exec'd program */
    if (opt.restart_dir)
        restart_run(&opt, &img, api);
    launch_run(&opt, api, environ);
}
