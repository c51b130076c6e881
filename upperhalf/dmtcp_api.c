/* dmtcp_api.c — each function of DMTCP's include/dmtcp.h with crac's meaning (docs/DMTCP_API.md):
 * a program written against DMTCP's weak symbols finds them all under crac, and none natively. */
#include "crac.h"

#include "upper_runtime.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* DMTCP's return values (the numbers are its ABI). */
#define DMTCP_AFTER_CHECKPOINT 1
#define DMTCP_AFTER_RESTART 2
#define DMTCP_NOT_PRESENT 3
#define DMTCP_IS_PRESENT 4
#define RESTART_ENV_NOTFOUND (-1)
#define RESTART_ENV_NULL_PTR (-5)

/* DMTCP's unique process id, laid out as its header lays it out (returned by value). */
struct dmtcp_upid {
    uint64_t hostid;
    uint64_t time;
    int32_t pid;
    uint32_t generation;
};

/* What dmtcp_register_plugin() is handed (by value), for its name. */
struct dmtcp_plugin_descr {
    const char *api_version, *dmtcp_version, *name, *author, *email, *description;
    void (*event_hook)(int, void *);
};

static const struct crac_registry *reg(void) { return &crac_registry; }

/* When the computation was first launched (seconds since the epoch): upper memory, so it keeps
 * its value through restarts. */
static uint64_t launch_time;

static void sections_at_fork_child(void);

__attribute__((constructor(102))) static void dmtcp_api_init(void)
{
    if (crac_upper.api) {
        launch_time = (uint64_t)time(NULL);
        pthread_atfork(NULL, NULL, sections_at_fork_child);
    }
}

static char proc_dir_cache[PATH_MAX], ckpt_dir_cache[PATH_MAX], program_cache[PATH_MAX];
static int32_t cached_at_restart = -1; /* the restart count the caches were filled under */

/* A string the lower half knows (crac_lh_query), cached: none of them changes while the process
 * runs, but a restart may find the image (and so the directories) moved elsewhere. */
static const char *query_string(int what, char *cache, size_t len)
{
    if (!crac_upper.api)
        return NULL;
    int32_t restarts = __atomic_load_n(&crac_registry.restarts, __ATOMIC_ACQUIRE);
    if (restarts != cached_at_restart) {
        proc_dir_cache[0] = ckpt_dir_cache[0] = program_cache[0] = '\0';
        cached_at_restart = restarts;
    }
    if (cache[0])
        return cache;
    void *q = upper_lookup("crac_lh_query");
    char tmp[PATH_MAX];
    if (!q || (long)cross_call(q, (uint64_t)what, (uint64_t)tmp, sizeof(tmp)) < 0)
        return NULL;
    snprintf(cache, len, "%s", tmp);
    return cache;
}

static long query_number(int what)
{
    void *q = crac_upper.api ? upper_lookup("crac_lh_query") : NULL;
    return q ? (long)cross_call(q, (uint64_t)what, 0, 0) : -1;
}

static const char *proc_dir(void)
{
    return query_string(CRAC_QUERY_PROC_DIR, proc_dir_cache, sizeof(proc_dir_cache));
}

/* ---- presence, checkpoints, critical sections ---- */

int dmtcp_is_enabled(void) { return crac_is_enabled(); }

/* As crac_checkpoint(), whose values are DMTCP's but for "not present" (DMTCP says 3). */
int dmtcp_checkpoint(void) { return crac_upper.api ? crac_checkpoint() : DMTCP_NOT_PRESENT; }

/* The section depth of this thread: only its outermost disable waits and counts. */
static __thread int section_depth __attribute__((tls_model("initial-exec")));

int upper_sections_held(void) { return section_depth > 0; }

/* A forked child has only the forking thread: the count it copied includes the parent's other
 * threads' sections, which nothing here would ever leave, and its checkpoints would wait for
 * them for ever. Until this runs (a checkpoint of the child may already be waiting) the count
 * is only too high, which delays, never overlaps. */
static void sections_at_fork_child(void)
{
    __atomic_store_n(&crac_registry.sections, section_depth > 0 ? 1 : 0, __ATOMIC_SEQ_CST);
}

static long futex(volatile int32_t *addr, int op, int32_t val)
{
    return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* A counted critical section: any number of threads may be inside at once; a checkpoint that
 * is asked for meanwhile waits until the last one leaves (loader/ckpt/ckpt_suspend.c). A thread never
 * enters while a checkpoint holds the door, so the two cannot overlap. */
int dmtcp_disable_ckpt(void)
{
    if (!crac_upper.api)
        return DMTCP_NOT_PRESENT;
    if (section_depth++ > 0)
        return 1;
    struct crac_registry *r = &crac_registry;
    for (;;) {
        __atomic_add_fetch(&r->sections, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&r->holding, __ATOMIC_SEQ_CST))
            return 1;
        if (__atomic_sub_fetch(&r->sections, 1, __ATOMIC_SEQ_CST) == 0)
            futex(&r->sections, FUTEX_WAKE_PRIVATE, 1);
        futex(&r->holding, FUTEX_WAIT_PRIVATE, 1);
    }
}

int dmtcp_enable_ckpt(void)
{
    if (!crac_upper.api)
        return DMTCP_NOT_PRESENT;
    if (section_depth <= 0)
        return -1; /* no section to leave */
    if (--section_depth > 0)
        return 1;
    struct crac_registry *r = &crac_registry;
    if (__atomic_sub_fetch(&r->sections, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&r->holding, __ATOMIC_SEQ_CST))
        futex(&r->sections, FUTEX_WAKE_PRIVATE, 1);
    return 1;
}

int dmtcp_plugin_disable_ckpt(void) { return dmtcp_disable_ckpt() == 1; }

void dmtcp_plugin_enable_ckpt(void) { dmtcp_enable_ckpt(); }

/* The checkpoint signal never reaches a program thread under crac (it stays blocked in all of
 * them and goes to crac's manager thread), so there is nothing to block. */
void dmtcp_block_ckpt_signal(void) {}

void dmtcp_unblock_ckpt_signal(void) {}

/* 1 while a checkpoint waits for sections to close or runs: program threads are then parked,
 * so a running thread sees it only in that first phase. */
int checkpoint_is_pending(void)
{
    return crac_upper.api ? __atomic_load_n(&reg()->holding, __ATOMIC_SEQ_CST) != 0 : 0;
}

int dmtcp_is_running_state(void) { return crac_upper.api ? !checkpoint_is_pending() : 0; }

/* ---- generation, status ---- */

uint32_t dmtcp_get_generation(void) { return (uint32_t)crac_generation(); }

int dmtcp_get_local_status(int *num_checkpoints, int *num_restarts)
{
    if (!crac_upper.api)
        return DMTCP_NOT_PRESENT;
    if (num_checkpoints)
        *num_checkpoints = reg()->generation;
    if (num_restarts)
        *num_restarts = reg()->restarts;
    return DMTCP_IS_PRESENT;
}

/* Under a coordinator, its answer (a request of its own, as `crac command status`); a process
 * on its own is the one peer, running unless a checkpoint is pending. */
int dmtcp_get_coordinator_status(int *num_peers, int *is_running)
{
    if (!crac_upper.api)
        return DMTCP_NOT_PRESENT;
    int peers = 1, running = dmtcp_is_running_state();
    void *q = upper_lookup("crac_lh_coord_status");
    if (q && query_number(CRAC_QUERY_COORDINATED) == 1) {
        int p, r;
        if (cross_call(q, (uint64_t)&p, (uint64_t)&r, 0) == 0)
            peers = p, running = r;
    }
    if (num_peers)
        *num_peers = peers;
    if (is_running)
        *is_running = running;
    return DMTCP_IS_PRESENT;
}

int dmtcp_no_coordinator(void) { return query_number(CRAC_QUERY_COORDINATED) != 1; }

int dmtcp_get_ckpt_signal(void)
{
    long s = query_number(CRAC_QUERY_SIGNAL);
    return s > 0 ? (int)s : -1;
}

/* ---- names and paths ---- */

const char *dmtcp_get_ckpt_dir(void)
{
    return query_string(CRAC_QUERY_CKPT_DIR, ckpt_dir_cache, sizeof(ckpt_dir_cache));
}

/* The checkpoint directory is fixed at launch (-c, or the image's at restart). */
int dmtcp_set_ckpt_dir(const char *dir)
{
    (void)dir;
    return crac_upper.api ? -1 : DMTCP_NOT_PRESENT;
}

const char *dmtcp_get_coord_ckpt_dir(void) { return dmtcp_get_ckpt_dir(); }

int dmtcp_set_coord_ckpt_dir(const char *dir) { return dmtcp_set_ckpt_dir(dir); }

/* The generation the next files belong to: the latest one written, or gen-000001 before any.
 * Each name has its own buffer, rewritten by each call (DMTCP's answers are its own storage too);
 * threads asking at once write the same text. */
static const char *generation_path(char *out, size_t len, const char *leaf)
{
    const char *dir = proc_dir();
    if (!dir)
        return NULL;
    int gen = reg()->generation;
    snprintf(out, len, "%s/gen-%06d/%s", dir, gen > 0 ? gen : 1, leaf);
    return out;
}

const char *dmtcp_get_ckpt_filename(void)
{
    static char path[PATH_MAX + 32];
    return generation_path(path, sizeof(path), "upper.core");
}

const char *dmtcp_get_ckpt_files_subdir(void)
{
    static char path[PATH_MAX + 32];
    return generation_path(path, sizeof(path), "files");
}

/* crac's id of the process, as in its directory name ckpt_<prog>_<hostid>-<pid>. */
const char *dmtcp_get_uniquepid_str(void)
{
    const char *dir = proc_dir();
    const char *id = dir ? strrchr(dir, '_') : NULL;
    return id ? id + 1 : NULL;
}

const char *dmtcp_get_computation_id_str(void) { return dmtcp_get_uniquepid_str(); }

uint64_t dmtcp_get_coordinator_timestamp(void) { return launch_time; }

const char *dmtcp_get_executable_path(void)
{
    return query_string(CRAC_QUERY_PROGRAM, program_cache, sizeof(program_cache));
}

const char *dmtcp_get_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    return t && t[0] ? t : "/tmp";
}

static struct dmtcp_upid upid(void)
{
    struct dmtcp_upid u = {0, launch_time, 0, (uint32_t)crac_generation()};
    const char *id = dmtcp_get_uniquepid_str();
    if (id) {
        char *end;
        u.hostid = strtoull(id, &end, 16);
        if (*end == '-')
            u.pid = (int32_t)strtol(end + 1, NULL, 10);
    }
    return u;
}

struct dmtcp_upid dmtcp_get_uniquepid(void) { return upid(); }

struct dmtcp_upid dmtcp_get_coord_id(void) { return upid(); }

struct dmtcp_upid dmtcp_get_computation_id(void) { return upid(); }

int dmtcp_unique_pids_equal(struct dmtcp_upid a, struct dmtcp_upid b)
{
    return a.hostid == b.hostid && a.time == b.time && a.pid == b.pid &&
           a.generation == b.generation;
}

/* ---- files: crac's own policy applies (docs/DECISIONS.md); nothing is chosen per file ---- */

int dmtcp_should_ckpt_open_files(void) { return 0; }

int dmtcp_allow_overwrite_with_ckpted_files(void) { return 0; }

int dmtcp_skip_truncate_file_at_restart(const char *path)
{
    (void)path;
    return 0;
}

int dmtcp_is_bq_file(const char *path)
{
    (void)path;
    return 0;
}

int dmtcp_bq_should_ckpt_file(const char *path, int *type)
{
    (void)path;
    (void)type;
    return 0;
}

int dmtcp_bq_restore_file(const char *path, const char *saved, int flags, int type)
{
    (void)path;
    (void)saved;
    (void)flags;
    (void)type;
    return 0;
}

int dmtcp_must_ckpt_file(const char *path)
{
    (void)path;
    return 0;
}

int dmtcp_must_overwrite_file(const char *path)
{
    (void)path;
    return 0;
}

int dmtcp_overwrite_ckptfile_on_restart(const char *path)
{
    (void)path;
    return 0;
}

void dmtcp_get_new_file_path(const char *abspath, const char *cwd, char *newpath)
{
    (void)cwd;
    if (abspath && newpath && newpath != abspath)
        memmove(newpath, abspath, strlen(abspath) + 1);
}

/* The environment after a restart is the one the program had (docs/DECISIONS.md), not the
 * restart command's: there is no separate restart environment to read. */
int dmtcp_get_restart_env(const char *name, char *value, size_t maxlen)
{
    (void)maxlen;
    return !name || !value ? RESTART_ENV_NULL_PTR : RESTART_ENV_NOTFOUND;
}

/* ---- descriptors, pids ---- */

/* crac's own descriptors are not visible to the program's fd numbers it chooses; none of the
 * program's is protected, and no DMTCP-private descriptor exists. */
int dmtcp_is_protected_fd(int fd)
{
    (void)fd;
    return 0;
}

void dmtcp_close_protected_fd(int fd) { (void)fd; }

int dmtcp_protected_environ_fd(void) { return -1; }

int dmtcp_get_readlog_fd(void) { return -1; }

int dmtcp_get_ptrace_fd(void) { return -1; }

/* The program already sees its first launch's pids after a restart (docs/DECISIONS.md), and
 * crac translates them in every call that takes one: the program's pid is the virtual one. */
pid_t dmtcp_pid_real_to_virtual(pid_t pid)
{
    void *q = crac_upper.api ? upper_lookup("crac_lh_pid") : NULL;
    return q ? (pid_t)cross_call(q, 0, (uint64_t)pid, 0) : pid;
}

pid_t dmtcp_pid_virtual_to_real(pid_t pid)
{
    void *q = crac_upper.api ? upper_lookup("crac_lh_pid") : NULL;
    return q ? (pid_t)cross_call(q, 1, (uint64_t)pid, 0) : pid;
}

pid_t dmtcp_real_to_virtual_pid(pid_t pid) { return dmtcp_pid_real_to_virtual(pid); }

pid_t dmtcp_virtual_to_real_pid(pid_t pid) { return dmtcp_pid_virtual_to_real(pid); }

void dmtcp_get_local_ip_addr(struct in_addr *in)
{
    if (!in)
        return;
    in->s_addr = htonl(INADDR_LOOPBACK);
    struct ifaddrs *all;
    if (getifaddrs(&all) != 0)
        return;
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if (ntohl(a.s_addr) >> 24 != 127) {
            *in = a;
            break;
        }
    }
    freeifaddrs(all);
}

/* ---- plugins: crac runs none; these answer harmlessly ---- */

void dmtcp_initialize(void) {}

void dmtcp_prepare_wrappers(void) {}

void dmtcp_register_plugin(struct dmtcp_plugin_descr d)
{
    if (crac_upper.api)
        fprintf(stderr,
                "crac: warning: DMTCP plugin %s is not run by crac (its event hook is "
                "never called)\n",
                d.name ? d.name : "(unnamed)");
}

void dmtcp_global_barrier(const char *name) { (void)name; }

void dmtcp_local_barrier(const char *name) { (void)name; }

void dmtcp_add_to_ckpt_header(const char *key, const char *value)
{
    (void)key;
    (void)value;
}

int dmtcp_send_key_val_pair_to_coordinator(const char *id, const void *key, uint32_t key_len,
                                           const void *val, uint32_t val_len)
{
    (void)id, (void)key, (void)key_len, (void)val, (void)val_len;
    return 0;
}

int dmtcp_send_key_val_pair_to_coordinator_sync(const char *id, const void *key, uint32_t key_len,
                                                const void *val, uint32_t val_len)
{
    (void)id, (void)key, (void)key_len, (void)val, (void)val_len;
    return 0;
}

int dmtcp_send_query_to_coordinator(const char *id, const void *key, uint32_t key_len, void *val,
                                    uint32_t *val_len)
{
    (void)id, (void)key, (void)key_len, (void)val;
    if (val_len)
        *val_len = 0;
    return 0;
}

/* ---- symbol lookup, for code written as a DMTCP plugin (NEXT_FNC) ---- */

void *dmtcp_get_libc_dlsym_addr(void) { return (void *)dlsym; }

/* RTLD_NEXT means "after the caller's object"; from here that would be after this library, so
 * walk the link map from the caller's object ourselves. */
static void *next_symbol(const void *caller, const char *symbol, const char *version)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return NULL;
    for (struct link_map *l = lm->l_next; l; l = l->l_next) {
        void *h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        void *s = version ? dlvsym(h, symbol, version) : dlsym(h, symbol);
        dlclose(h);
        if (s)
            return s;
    }
    return NULL;
}

void *dmtcp_dlsym(void *handle, const char *symbol)
{
    if (handle == RTLD_NEXT)
        return next_symbol(__builtin_return_address(0), symbol, NULL);
    return dlsym(handle, symbol);
}

void *dmtcp_dlvsym(void *handle, char *symbol, const char *version)
{
    if (handle == RTLD_NEXT)
        return next_symbol(__builtin_return_address(0), symbol, version);
    return dlvsym(handle, symbol, version);
}

/* The first loaded object whose file name contains libname. */
static struct link_map *find_lib(const char *libname)
{
    struct link_map *lm = NULL;
    void *self = dlopen(NULL, RTLD_LAZY);
    if (!self || dlinfo(self, RTLD_DI_LINKMAP, &lm) != 0)
        lm = NULL;
    for (; lm; lm = lm->l_next)
        if (libname && lm->l_name && strstr(lm->l_name, libname))
            break;
    if (self)
        dlclose(self);
    return lm;
}

void *dmtcp_dlsym_lib(const char *libname, const char *symbol)
{
    struct link_map *lm = find_lib(libname);
    void *h = lm ? dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!h)
        return NULL;
    void *s = dlsym(h, symbol);
    dlclose(h);
    return s;
}

uint64_t dmtcp_dlsym_lib_fnc_offset(const char *libname, const char *symbol)
{
    struct link_map *lm = find_lib(libname);
    void *s = dmtcp_dlsym_lib(libname, symbol);
    return lm && s ? (uint64_t)s - (uint64_t)lm->l_addr : (uint64_t)-1;
}
