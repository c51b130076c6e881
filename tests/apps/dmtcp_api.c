/* dmtcp_api MODE LOG [STEPS]: a program written against DMTCP's dmtcp.h (its functions declared
   weak, as that header declares them), checking every answer; it appends what it saw to LOG.
   MODE cycles: `step N` lines for the checkpoint harness, the whole API checked at every step.
   MODE defer: a checkpoint asked for inside dmtcp_disable_ckpt() waits for dmtcp_enable_ckpt().
   MODE exit: the same, but the program ends right after dmtcp_enable_ckpt(): the checkpoint is
   taken (and published) before it ends.
   MODE coord (under a coordinator): waits until dmtcp_get_coordinator_status() counts STEPS
   peers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#define PROG "dmtcp_api"
#define USAGE "cycles|defer|exit|coord LOG [STEPS]"
#include "ckpt_common.h"

#define DMTCP_AFTER_CHECKPOINT 1
#define DMTCP_AFTER_RESTART 2
#define DMTCP_NOT_PRESENT 3
#define DMTCP_IS_PRESENT 4

typedef struct {
    uint64_t hostid, time;
    pid_t pid;
    uint32_t generation;
} upid_t;

#define W __attribute__((weak))
int dmtcp_is_enabled(void) W;
int dmtcp_checkpoint(void) W;
int dmtcp_disable_ckpt(void) W;
int dmtcp_enable_ckpt(void) W;
int dmtcp_plugin_disable_ckpt(void) W;
void dmtcp_plugin_enable_ckpt(void) W;
void dmtcp_global_barrier(const char *) W;
void dmtcp_local_barrier(const char *) W;
void dmtcp_get_local_ip_addr(struct in_addr *) W;
const char *dmtcp_get_tmpdir(void) W;
const char *dmtcp_get_ckpt_dir(void) W;
int dmtcp_set_ckpt_dir(const char *) W;
const char *dmtcp_get_coord_ckpt_dir(void) W;
int dmtcp_set_coord_ckpt_dir(const char *) W;
const char *dmtcp_get_ckpt_filename(void) W;
const char *dmtcp_get_ckpt_files_subdir(void) W;
int dmtcp_should_ckpt_open_files(void) W;
int dmtcp_allow_overwrite_with_ckpted_files(void) W;
int dmtcp_skip_truncate_file_at_restart(const char *) W;
int dmtcp_get_ckpt_signal(void) W;
const char *dmtcp_get_uniquepid_str(void) W;
const char *dmtcp_get_computation_id_str(void) W;
uint64_t dmtcp_get_coordinator_timestamp(void) W;
uint32_t dmtcp_get_generation(void) W;
int checkpoint_is_pending(void) W;
int dmtcp_get_coordinator_status(int *, int *) W;
int dmtcp_get_local_status(int *, int *) W;
int dmtcp_is_running_state(void) W;
int dmtcp_get_restart_env(const char *, char *, size_t) W;
const char *dmtcp_get_executable_path(void) W;
int dmtcp_no_coordinator(void) W;
void dmtcp_initialize(void) W;
void dmtcp_prepare_wrappers(void) W;
int dmtcp_is_protected_fd(int) W;
upid_t dmtcp_get_uniquepid(void) W;
upid_t dmtcp_get_coord_id(void) W;
upid_t dmtcp_get_computation_id(void) W;
int dmtcp_unique_pids_equal(upid_t, upid_t) W;
int dmtcp_get_ptrace_fd(void) W;
int dmtcp_get_readlog_fd(void) W;
void dmtcp_block_ckpt_signal(void) W;
void dmtcp_unblock_ckpt_signal(void) W;
void *dmtcp_get_libc_dlsym_addr(void) W;
void dmtcp_close_protected_fd(int) W;
int dmtcp_protected_environ_fd(void) W;
pid_t dmtcp_real_to_virtual_pid(pid_t) W;
pid_t dmtcp_virtual_to_real_pid(pid_t) W;
pid_t dmtcp_pid_real_to_virtual(pid_t) W;
pid_t dmtcp_pid_virtual_to_real(pid_t) W;
int dmtcp_is_bq_file(const char *) W;
int dmtcp_bq_should_ckpt_file(const char *, int *) W;
int dmtcp_bq_restore_file(const char *, const char *, int, int) W;
int dmtcp_must_ckpt_file(const char *) W;
void dmtcp_get_new_file_path(const char *, const char *, char *) W;
int dmtcp_must_overwrite_file(const char *) W;
int dmtcp_overwrite_ckptfile_on_restart(const char *) W;
int dmtcp_send_key_val_pair_to_coordinator(const char *, const void *, uint32_t, const void *,
                                           uint32_t) W;
int dmtcp_send_key_val_pair_to_coordinator_sync(const char *, const void *, uint32_t, const void *,
                                                uint32_t) W;
int dmtcp_send_query_to_coordinator(const char *, const void *, uint32_t, void *, uint32_t *) W;
void dmtcp_add_to_ckpt_header(const char *, const char *) W;
void *dmtcp_dlsym(void *, const char *) W;
void *dmtcp_dlvsym(void *, char *, const char *) W;
void *dmtcp_dlsym_lib(const char *, const char *) W;
uint64_t dmtcp_dlsym_lib_fnc_offset(const char *, const char *) W;
typedef struct {
    uint32_t futex, owner, count;
    int type;
} DmtcpMutex;
void DmtcpMutexInit(DmtcpMutex *, int) W;
int DmtcpMutexLock(DmtcpMutex *) W;
int DmtcpMutexTryLock(DmtcpMutex *) W;
int DmtcpMutexUnlock(DmtcpMutex *) W;
typedef struct {
    int32_t status, writer_tid;
    uint32_t readers, writers;
} DmtcpRWLock;
void DmtcpRWLockInit(DmtcpRWLock *) W;
int DmtcpRWLockRdLock(DmtcpRWLock *) W;
int DmtcpRWLockRdLockIgnoreQueuedWriter(DmtcpRWLock *) W;
int DmtcpRWLockTryRdLock(DmtcpRWLock *) W;
int DmtcpRWLockWrLock(DmtcpRWLock *) W;
int DmtcpRWLockUnlock(DmtcpRWLock *) W;

static const char *log_path;

__attribute__((format(printf, 1, 2))) static void logf_(const char *fmt, ...)
{
    FILE *f = fopen(log_path, "a");
    if (!f)
        fail("cannot open %s: %s", log_path, strerror(errno));
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* Natively every symbol is NULL, and the dmtcp.h idiom `f ? f() : DMTCP_NOT_PRESENT` says so. */
static struct {
    const char *name;
    void *addr;
} api[80];
static size_t N_API;
#define NOTE(f) (api[N_API].name = #f, api[N_API++].addr = (void *)(f))

static int check_presence(void)
{
    /* Each address is taken in code (through the GOT, as `if (dmtcp_f)` takes it); an
       initialised table would let the linker settle unused weak symbols to 0. */
    NOTE(dmtcp_is_enabled);
    NOTE(dmtcp_checkpoint);
    NOTE(dmtcp_disable_ckpt);
    NOTE(dmtcp_enable_ckpt);
    NOTE(dmtcp_plugin_disable_ckpt);
    NOTE(dmtcp_plugin_enable_ckpt);
    NOTE(dmtcp_global_barrier);
    NOTE(dmtcp_local_barrier);
    NOTE(dmtcp_get_local_ip_addr);
    NOTE(dmtcp_get_tmpdir);
    NOTE(dmtcp_get_ckpt_dir);
    NOTE(dmtcp_set_ckpt_dir);
    NOTE(dmtcp_get_coord_ckpt_dir);
    NOTE(dmtcp_set_coord_ckpt_dir);
    NOTE(dmtcp_get_ckpt_filename);
    NOTE(dmtcp_get_ckpt_files_subdir);
    NOTE(dmtcp_should_ckpt_open_files);
    NOTE(dmtcp_allow_overwrite_with_ckpted_files);
    NOTE(dmtcp_skip_truncate_file_at_restart);
    NOTE(dmtcp_get_ckpt_signal);
    NOTE(dmtcp_get_uniquepid_str);
    NOTE(dmtcp_get_computation_id_str);
    NOTE(dmtcp_get_coordinator_timestamp);
    NOTE(dmtcp_get_generation);
    NOTE(checkpoint_is_pending);
    NOTE(dmtcp_get_coordinator_status);
    NOTE(dmtcp_get_local_status);
    NOTE(dmtcp_is_running_state);
    NOTE(dmtcp_get_restart_env);
    NOTE(dmtcp_get_executable_path);
    NOTE(dmtcp_no_coordinator);
    NOTE(dmtcp_initialize);
    NOTE(dmtcp_prepare_wrappers);
    NOTE(dmtcp_is_protected_fd);
    NOTE(dmtcp_get_uniquepid);
    NOTE(dmtcp_get_coord_id);
    NOTE(dmtcp_get_computation_id);
    NOTE(dmtcp_unique_pids_equal);
    NOTE(dmtcp_get_ptrace_fd);
    NOTE(dmtcp_get_readlog_fd);
    NOTE(dmtcp_block_ckpt_signal);
    NOTE(dmtcp_unblock_ckpt_signal);
    NOTE(dmtcp_get_libc_dlsym_addr);
    NOTE(dmtcp_close_protected_fd);
    NOTE(dmtcp_protected_environ_fd);
    NOTE(dmtcp_real_to_virtual_pid);
    NOTE(dmtcp_virtual_to_real_pid);
    NOTE(dmtcp_pid_real_to_virtual);
    NOTE(dmtcp_pid_virtual_to_real);
    NOTE(dmtcp_is_bq_file);
    NOTE(dmtcp_bq_should_ckpt_file);
    NOTE(dmtcp_bq_restore_file);
    NOTE(dmtcp_must_ckpt_file);
    NOTE(dmtcp_get_new_file_path);
    NOTE(dmtcp_must_overwrite_file);
    NOTE(dmtcp_overwrite_ckptfile_on_restart);
    NOTE(dmtcp_send_key_val_pair_to_coordinator);
    NOTE(dmtcp_send_key_val_pair_to_coordinator_sync);
    NOTE(dmtcp_send_query_to_coordinator);
    NOTE(dmtcp_add_to_ckpt_header);
    NOTE(dmtcp_dlsym);
    NOTE(dmtcp_dlvsym);
    NOTE(dmtcp_dlsym_lib);
    NOTE(dmtcp_dlsym_lib_fnc_offset);
    NOTE(DmtcpMutexInit);
    NOTE(DmtcpMutexLock);
    NOTE(DmtcpMutexTryLock);
    NOTE(DmtcpMutexUnlock);
    NOTE(DmtcpRWLockInit);
    NOTE(DmtcpRWLockRdLock);
    NOTE(DmtcpRWLockRdLockIgnoreQueuedWriter);
    NOTE(DmtcpRWLockTryRdLock);
    NOTE(DmtcpRWLockWrLock);
    NOTE(DmtcpRWLockUnlock);
    size_t present = 0;
    for (size_t i = 0; i < N_API; i++)
        present += api[i].addr != NULL;
    if (present == 0) {
        int r = dmtcp_checkpoint ? dmtcp_checkpoint() : DMTCP_NOT_PRESENT;
        if (r != DMTCP_NOT_PRESENT)
            fail("natively dmtcp_checkpoint answered %d", r);
        return 0;
    }
    for (size_t i = 0; i < N_API; i++)
        if (!api[i].addr)
            fail("%s is missing (%zu of %zu functions present)", api[i].name, present, N_API);
    if (!dmtcp_is_enabled())
        fail("dmtcp_is_enabled() says 0 with the functions present");
    return 1;
}

static uint32_t last_gen;
static int last_restarts;
static char prev_file[PATH_MAX];

static void check_api(const char *argv0)
{
    uint32_t gen = dmtcp_get_generation();
    int ckpts = -1, restarts = -1, peers = -1, running = -1;
    if (dmtcp_get_local_status(&ckpts, &restarts) != DMTCP_IS_PRESENT)
        fail("dmtcp_get_local_status did not answer DMTCP_IS_PRESENT");
    if (gen < last_gen || restarts < last_restarts)
        fail("generation %u/restarts %d went back from %u/%d", gen, restarts, last_gen,
             last_restarts);
    if ((uint32_t)ckpts != gen)
        fail("dmtcp_get_local_status counts %d checkpoints, generation is %u", ckpts, gen);
    if (dmtcp_get_coordinator_status(&peers, &running) != DMTCP_IS_PRESENT || peers != 1 ||
        (running != 0 && running != 1))
        fail("dmtcp_get_coordinator_status: peers %d running %d", peers, running);
    if (dmtcp_get_ckpt_signal() != SIGUSR2)
        fail("dmtcp_get_ckpt_signal() = %d", dmtcp_get_ckpt_signal());
    if (!dmtcp_no_coordinator())
        fail("dmtcp_no_coordinator() = 0 without a coordinator");

    /* <ckptdir>/ckpt_<prog>_<uniquepid>/gen-<max(gen,1)>/upper.core */
    const char *dir = dmtcp_get_ckpt_dir(), *id = dmtcp_get_uniquepid_str();
    const char *file = dmtcp_get_ckpt_filename(), *files = dmtcp_get_ckpt_files_subdir();
    if (!dir || !id || !file || !files || dir[0] != '/')
        fail("a path is missing: dir %s id %s file %s", dir, id, file);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof(want), "%s/ckpt_" PROG "_%s/gen-%06u/upper.core", dir, id, gen ? gen : 1);
    if (strcmp(file, want) != 0)
        fail("dmtcp_get_ckpt_filename() = %s, expected %s", file, want);
    snprintf(want + strlen(want) - strlen("upper.core"), 8, "files");
    if (strcmp(files, want) != 0)
        fail("dmtcp_get_ckpt_files_subdir() = %s, expected %s", files, want);
    if (strcmp(dmtcp_get_coord_ckpt_dir(), dir) != 0 ||
        strcmp(dmtcp_get_computation_id_str(), id) != 0)
        fail("coordinator directory or computation id differ");
    /* The previous generation's image, now published, is where its filename said. */
    if (gen > last_gen && prev_file[0] && last_gen > 0 && access(prev_file, R_OK) != 0)
        fail("%s does not exist", prev_file);
    snprintf(prev_file, sizeof(prev_file), "%s", file);

    char real[PATH_MAX];
    if (!realpath(argv0, real) || strcmp(dmtcp_get_executable_path(), real) != 0)
        fail("dmtcp_get_executable_path() = %s, not %s", dmtcp_get_executable_path(), real);
    upid_t u = dmtcp_get_uniquepid(), c = dmtcp_get_computation_id();
    if (!dmtcp_unique_pids_equal(u, c) || u.generation != gen || u.time == 0 ||
        u.time != dmtcp_get_coordinator_timestamp())
        fail("unique pid: gen %u time %llu", u.generation, (unsigned long long)u.time);
    if (dmtcp_pid_virtual_to_real(dmtcp_pid_real_to_virtual(123456)) != 123456 ||
        dmtcp_real_to_virtual_pid(dmtcp_virtual_to_real_pid(getpid())) != getpid())
        fail("pid translation is not a round trip");

    /* Counted, nested sections. */
    if (dmtcp_disable_ckpt() != 1 || dmtcp_disable_ckpt() != 1 || dmtcp_enable_ckpt() != 1 ||
        dmtcp_enable_ckpt() != 1 || dmtcp_enable_ckpt() > 0)
        fail("disable/enable nesting");
    if (dmtcp_plugin_disable_ckpt() != 1)
        fail("dmtcp_plugin_disable_ckpt");
    dmtcp_plugin_enable_ckpt();

    /* The harmless answers. */
    char buf[64];
    struct in_addr ip = {0};
    dmtcp_get_local_ip_addr(&ip);
    uint32_t vlen = 5;
    if (dmtcp_set_ckpt_dir("/elsewhere") > 0 ||
        dmtcp_get_restart_env("HOME", buf, sizeof(buf)) != -1 ||
        dmtcp_get_restart_env(NULL, buf, 1) != -5 || dmtcp_is_protected_fd(1) ||
        dmtcp_should_ckpt_open_files() || dmtcp_get_ptrace_fd() != -1 || ip.s_addr == 0 ||
        dmtcp_send_query_to_coordinator("x", "k", 1, buf, &vlen) != 0 || vlen != 0 ||
        dmtcp_get_libc_dlsym_addr() == NULL || !dmtcp_get_tmpdir())
        fail("a harmless answer is wrong");
    dmtcp_global_barrier("b");
    dmtcp_block_ckpt_signal();
    dmtcp_unblock_ckpt_signal();
    dmtcp_get_new_file_path("/a/b", "/", buf);
    if (strcmp(buf, "/a/b") != 0)
        fail("dmtcp_get_new_file_path");
    if (dmtcp_dlsym(RTLD_DEFAULT, "printf") != (void *)printf ||
        dmtcp_dlsym_lib("libc.so", "getpid") != (void *)getpid)
        fail("dmtcp_dlsym");

    DmtcpMutex m = {0, 0, 0, 1};
    DmtcpRWLock rw;
    DmtcpRWLockInit(&rw);
    if (DmtcpMutexLock(&m) || DmtcpMutexTryLock(&m) || DmtcpMutexUnlock(&m) ||
        DmtcpMutexUnlock(&m) || DmtcpRWLockRdLock(&rw) || DmtcpRWLockTryRdLock(&rw) ||
        DmtcpRWLockUnlock(&rw) || DmtcpRWLockUnlock(&rw) || DmtcpRWLockWrLock(&rw) ||
        DmtcpRWLockTryRdLock(&rw) == 0 || DmtcpRWLockUnlock(&rw))
        fail("DMTCP locks");

    if (gen != last_gen || restarts != last_restarts)
        logf_("generation %u restarts %d", gen, restarts);
    last_gen = gen;
    last_restarts = restarts;
}

static void wait_until(int (*cond)(uint32_t), uint32_t arg, const char *what)
{
    struct watchdog wd;
    wd_start(&wd);
    while (!cond(arg)) {
        if (wd_expired(&wd, 60))
            fail("timed out waiting until %s", what);
        usleep(2000);
    }
}

static int is_pending(uint32_t unused) { return (void)unused, checkpoint_is_pending(); }
static int gen_reached(uint32_t g) { return dmtcp_get_generation() >= g; }

/* Inside a section, ask for a checkpoint from outside (the signal) and from inside
   (dmtcp_checkpoint: not taken yet, answer 0); it starts only once the section ends. */
static void defer(void)
{
    uint32_t g0 = dmtcp_get_generation();
    if (dmtcp_disable_ckpt() != 1)
        fail("dmtcp_disable_ckpt");
    if (kill(getpid(), dmtcp_get_ckpt_signal()) != 0)
        fail("kill: %s", strerror(errno));
    wait_until(is_pending, 0, "the checkpoint asked for is pending");
    if (dmtcp_is_running_state())
        fail("dmtcp_is_running_state() = 1 with a checkpoint pending");
    if (dmtcp_checkpoint() != 0)
        fail("dmtcp_checkpoint() inside a section did not answer 0");
    for (int i = 0; i < 50; i++) {
        usleep(2000);
        if (dmtcp_get_generation() != g0)
            fail("a checkpoint was taken inside the section");
    }
    logf_("deferred at generation %u", g0);
    if (dmtcp_enable_ckpt() != 1)
        fail("dmtcp_enable_ckpt");
    wait_until(gen_reached, g0 + 1, "the deferred checkpoint is written");
    if (dmtcp_checkpoint() != DMTCP_AFTER_CHECKPOINT)
        fail("dmtcp_checkpoint() after the section");
    logf_("after the section: generation %u", dmtcp_get_generation());
}

/* A checkpoint waiting for the section, and the program's end at once after it: the end waits
   for the checkpoint. */
static void exit_after_section(void)
{
    if (dmtcp_disable_ckpt() != 1)
        fail("dmtcp_disable_ckpt");
    if (kill(getpid(), dmtcp_get_ckpt_signal()) != 0)
        fail("kill: %s", strerror(errno));
    wait_until(is_pending, 0, "the checkpoint asked for is pending");
    logf_("leaving the section at generation %u", dmtcp_get_generation());
    if (dmtcp_enable_ckpt() != 1)
        fail("dmtcp_enable_ckpt");
}

int main(int argc, char **argv)
{
    if (argc < 3)
        fail("usage: " PROG " " USAGE);
    log_path = argv[2];
    long steps = arg(argc, argv, 3, 60, 1, 100000);
    int present = check_presence();
    if (!present)
        logf_("not under DMTCP");
    if (strcmp(argv[1], "coord") == 0 && present) {
        struct watchdog wd;
        wd_start(&wd);
        int peers = 0, running = 0;
        while (dmtcp_get_coordinator_status(&peers, &running) == DMTCP_IS_PRESENT &&
               peers != steps) {
            if (wd_expired(&wd, 60))
                fail("the coordinator counts %d peers, not %ld", peers, steps);
            usleep(10000);
        }
        if (dmtcp_no_coordinator())
            fail("dmtcp_no_coordinator() = 1 under a coordinator");
        logf_("peers %d running %d", peers, running);
        /* Stay until every peer has seen them all (the last to see leaves first). */
        while (dmtcp_get_coordinator_status(&peers, &running) == DMTCP_IS_PRESENT &&
               peers == steps && !wd_expired(&wd, 60)) {
            FILE *f = fopen(log_path, "r");
            int seen = 0;
            for (char line[64]; f && fgets(line, sizeof(line), f);)
                seen += strncmp(line, "peers ", 6) == 0;
            if (f)
                fclose(f);
            if (seen >= steps)
                break;
            usleep(10000);
        }
        return 0;
    }
    if (strcmp(argv[1], "defer") == 0) {
        if (present)
            defer();
        return 0;
    }
    if (strcmp(argv[1], "exit") == 0) {
        if (present)
            exit_after_section();
        return 0;
    }
    for (long k = 1; k <= steps; k++) {
        if (present)
            check_api(argv[0]);
        step_line(k);
        struct timespec req = {0, 40 * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0)
            req = rem;
    }
    if (present)
        logf_("final generation %u restarts %d", last_gen, last_restarts);
    printf("DONE steps=%ld\n", steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
