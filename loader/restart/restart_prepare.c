/* restart_prepare.c — `crac restart DIR` of a lone process without Python: the same resolution,
 * trust checks, manifest checks and loader options as crac_py/cli/main.py `restart`. */
#include "restart_prepare.h"

#include "json_read.h"
#include "sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Docs: docs/DECISIONS.md "Restart without Python". Every check below mirrors one of the Python
 * path's (crac_py/image/generation.py, trust.py, launch/tree.py, launch/runner.py); where this
 * code is not sure to reach the same answer (a job, several runs in one directory, a damaged or
 * unusual manifest, a failed check), it does not decide: it declines, and the `crac` command
 * runs the Python CLI, which gives its answer and its one-line error. So the messages are the
 * Python path's by construction, and only the common, valid case skips Python's start-up. */

#define MANIFEST "MANIFEST.json"
#define CORE "upper.core"
#define DEVICE_IMG "device.img"
#define MANIFEST_MAX (64 << 20)

extern char **environ;

static const char *self_cmd; /* the `crac` command that started us */
static int sigint_held;      /* SIGINT was ours to unblock (the caller had not blocked it) */
static char **restart_args;  /* "restart" and its arguments, as the user gave them */
static int n_restart_args;
static int debug_path;

static void restore_sigint(void)
{
    if (!sigint_held)
        return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* The Python path decides: SELF again, told not to try this path (front/crac_front.c removes
 * the variable before Python starts, so the program never sees it). */
__attribute__((noreturn)) static void decline(const char *why)
{
    setenv("CRAC_FAST_RESTART_DECLINED", why, 1);
    char **argv = calloc((size_t)n_restart_args + 2, sizeof(char *));
    if (argv) {
        argv[0] = (char *)self_cmd;
        for (int i = 0; i < n_restart_args; i++)
            argv[i + 1] = restart_args[i];
        restore_sigint(); /* the `crac` command finds the caller's mask again */
        execv(self_cmd, argv);
    }
    fprintf(stderr, "crac: error: cannot run %s: %m; reinstall crac (pip install .)\n", self_cmd);
    _exit(2);
}

static int path_join(char *out, const char *dir, const char *name)
{
    return snprintf(out, PATH_MAX, "%s/%s", dir, name) < PATH_MAX ? 0 : -1;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* generation.py resolve_generation, for the cases that name one process: a generation, a
 * process directory or its latest link, a checkpoint directory with one ckpt_* directory. */
static void resolve_generation(const char *arg, char gen[PATH_MAX], int depth)
{
    char path[PATH_MAX], probe[PATH_MAX];
    if (!is_dir(arg) || !realpath(arg, path))
        decline("not a directory");
    if ((path_join(probe, path, MANIFEST) == 0 && exists(probe)) ||
        (path_join(probe, path, CORE) == 0 && exists(probe))) {
        memcpy(gen, path, PATH_MAX);
        return;
    }
    struct stat st;
    if (path_join(probe, path, "latest") != 0)
        decline("path too long");
    if (lstat(probe, &st) == 0) {
        if (!realpath(probe, gen) || !exists(gen))
            decline("latest link broken");
        return;
    }
    DIR *d = depth > 0 ? NULL : opendir(path);
    if (!d)
        decline("no generation");
    char one[PATH_MAX] = "";
    int count = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "ckpt_", 5) != 0 || path_join(probe, path, e->d_name) != 0 ||
            !is_dir(probe))
            continue;
        count++;
        memcpy(one, probe, PATH_MAX);
    }
    closedir(d);
    if (count != 1) /* none, a job, or several runs: the Python path's rules */
        decline("not one process directory");
    resolve_generation(one, gen, depth + 1);
}

/* trust.py: owned by this user or root, written by no one else; lstat, never a link. */
static int owned(const struct stat *st)
{
    uid_t uid = geteuid();
    return (st->st_uid == uid || st->st_uid == 0) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static void trusted_dir(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || !owned(&st))
        decline("untrusted directory");
}

static void trusted_entries(const char *dir, int allow_files_dir)
{
    DIR *d = opendir(dir);
    if (!d)
        decline("cannot list the image");
    char path[PATH_MAX];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (path_join(path, dir, e->d_name) != 0 || lstat(path, &st) != 0)
            decline("cannot examine the image");
        if (allow_files_dir && strcmp(e->d_name, "files") == 0 && S_ISDIR(st.st_mode)) {
            if (!owned(&st))
                decline("untrusted files directory");
            trusted_entries(path, 0);
            continue;
        }
        if (!S_ISREG(st.st_mode) || !owned(&st))
            decline("untrusted image entry");
    }
    closedir(d);
}

static char *read_manifest(const char *gen, size_t *len)
{
    char path[PATH_MAX];
    if (path_join(path, gen, MANIFEST) != 0)
        decline("path too long");
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MANIFEST_MAX)
        decline("manifest unreadable");
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (buf && n < (size_t)st.st_size) {
        ssize_t got = read(fd, buf + n, (size_t)st.st_size - n);
        if (got <= 0)
            decline("manifest unreadable");
        n += (size_t)got;
    }
    close(fd);
    if (!buf)
        decline("out of memory");
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int is_hex64(const char *s, size_t len)
{
    if (len != 64)
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* generation.py load_manifest's checksum: the first `"manifest_sha256": "<64 hex>"`, zeroed, is
 * the SHA-256 of the whole file. */
static void check_manifest_digest(char *raw, size_t len)
{
    static const char key[] = "\"manifest_sha256\": \"";
    const size_t klen = sizeof(key) - 1;
    for (char *p = raw; (size_t)(p - raw) + klen + 65 <= len; p++) {
        if (memcmp(p, key, klen) != 0 || !is_hex64(p + klen, 64) || p[klen + 64] != '"')
            continue;
        char want[65], got[65];
        memcpy(want, p + klen, 64);
        want[64] = '\0';
        memset(p + klen, '0', 64);
        sha256_buffer(raw, len, got);
        memcpy(p + klen, want, 64);
        if (strcmp(want, got) != 0)
            decline("manifest checksum");
        return;
    }
    decline("manifest without checksum");
}

static const struct json *need(const struct json *o, const char *key, enum json_type type)
{
    const struct json *v = json_get(o, key);
    if (!v || v->type != type)
        decline("manifest field");
    return v;
}

static const struct json *optional(const struct json *o, const char *key, enum json_type type)
{
    const struct json *v = json_get(o, key);
    if (v && v->type != type)
        decline("manifest field");
    return v;
}

static void optional_int(const struct json *o, const char *key, int64_t lo, int64_t hi)
{
    const struct json *v = json_get(o, key);
    if (v && !json_int_in(v, lo, hi, NULL))
        decline("manifest field");
}

/* A path inside the generation (generation.py schema_problem and _check_shapes): relative,
 * no empty, "." or ".." component. */
static int inside_path(const char *rel)
{
    if (!*rel || *rel == '/')
        return 0;
    for (const char *p = rel; *p;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += n + (slash != NULL);
        if (slash && !*p)
            return 0;
    }
    return 1;
}

/* --incremental (docs/IMAGE.md "Incremental generations"): every how many generations one is
 * full (0: off; a restart goes on with it, as main.py reads it), and for an incremental one its
 * parent and the parent's header CRC-32C (0, 0 for a full one), in generation.py's ranges. */
static int64_t incremental_of(const struct json *m, int64_t *parent, int64_t *parent_crc)
{
    const struct json *inc = optional(m, "incremental", JSON_OBJ);
    int64_t full_every = 0;
    *parent = *parent_crc = 0;
    if (!inc)
        return 0;
    const struct json *p = json_get(inc, "parent");
    if (!json_int_in(json_get(inc, "full_every"), 0, 1L << 30, &full_every) ||
        (p && !json_int_in(p, 0, INT32_MAX, parent)) ||
        (*parent && !json_int_in(json_get(inc, "parent_header_crc32c"), 0, UINT32_MAX, parent_crc)))
        decline("manifest incremental");
    optional_int(inc, "base", 0, INT32_MAX);
    return full_every;
}

static void check_fields(const struct json *m);

/* generation.py load_manifest: GEN's MANIFEST.json read, its checksum, JSON (else declines with
 * BAD_JSON) and fields checked, into *m. */
static void load_manifest(const char *gen, struct json *m, const char *bad_json)
{
    size_t len;
    char *raw = read_manifest(gen, &len);
    check_manifest_digest(raw, len);
    if (json_parse(raw, len, m) != 0 || m->type != JSON_OBJ)
        decline(bad_json);
    check_fields(m);
}

/* An incremental generation's chain, as chain.py links() checks it before the Python path runs
 * the loader: each parent's manifest there, whole (its checksum and fields), and the generation
 * its child was built on (the header CRC-32C the child recorded). Anything else declines: the
 * Python path names the broken link. The loader then checks each parent's upper.core itself. */
static void check_chain(const char *gen, const struct json *m)
{
    char dir[PATH_MAX], link[PATH_MAX];
    memcpy(dir, gen, PATH_MAX);
    char *slash = strrchr(dir, '/');
    if (!slash)
        decline("generation path");
    *slash = '\0';
    int64_t generation, parent, crc;
    json_int_in(json_get(m, "generation"), 1, INT32_MAX, &generation);
    incremental_of(m, &parent, &crc);
    for (int links = 0; parent; links++) {
        if (parent >= generation || links > 4096 ||
            snprintf(link, sizeof(link), "%s/gen-%06d", dir, (int)parent) >= (int)sizeof(link))
            decline("chain");
        trusted_dir(link);
        struct json pm;
        load_manifest(link, &pm, "chain");
        int64_t header_crc;
        json_int_in(json_get(json_get(&pm, "upper_core"), "header_crc32c"), 0, UINT32_MAX,
                    &header_crc);
        if (header_crc != crc)
            decline("chain");
        json_int_in(json_get(&pm, "generation"), 1, INT32_MAX, &generation);
        incremental_of(&pm, &parent, &crc);
    }
}

/* Every field the Python path checks (generation.py _FIELDS, schema_problem, _check_shapes), as
 * strictly or more: a manifest this accepts, the Python path accepts. */
static void check_fields(const struct json *m)
{
    const struct json *format = need(m, "format", JSON_STR);
    if (strcmp(format->str, "crac-image") != 0 || format->len != 10)
        decline("not a crac manifest");
    int64_t version, parent, parent_crc;
    if (!json_int_in(json_get(m, "format_version"), 2, 4, &version))
        decline("image format");
    incremental_of(m, &parent, &parent_crc);
    if ((version == 4) != (parent != 0)) /* the loader refuses it: let the Python path say so */
        decline("incremental");
    if (!json_int_in(json_get(m, "generation"), 1, INT32_MAX, NULL))
        decline("manifest field");
    optional(m, "created", JSON_STR);
    optional(m, "crac_version", JSON_STR);
    optional(m, "loader_sha256", JSON_STR);
    optional(m, "host", JSON_OBJ);
    const struct json *proc = need(m, "process", JSON_OBJ);
    optional_int(proc, "pid", 0, INT32_MAX);
    const struct json *program = need(proc, "program", JSON_STR);
    if (!json_plain_str(program) || program->str[0] != '/' || program->len > 4095)
        decline("manifest program");
    need(proc, "program_sha256", JSON_STR);
    const struct json *argv = need(proc, "argv", JSON_ARR);
    if (argv->len == 0 || !json_plain_str(&argv->items[0]) || argv->items[0].len == 0)
        decline("manifest argv");
    for (size_t i = 0; i < argv->len; i++)
        if (!json_plain_str(&argv->items[i]))
            decline("manifest argv");
    optional_int(proc, "threads", 0, 1 << 20);
    if (!json_int_in(json_get(proc, "ckpt_signal"), 1, 64, NULL))
        decline("manifest field");
    optional(proc, "coordinated", JSON_BOOL);
    optional(proc, "ckpt_open_files", JSON_BOOL);
    const struct json *backend = need(m, "backend", JSON_OBJ);
    need(backend, "name", JSON_STR);
    optional(backend, "version", JSON_STR);
    optional_int(backend, "driver_version", INT32_MIN, INT32_MAX);
    const struct json *device = optional(m, "device", JSON_OBJ);
    static const char *const counts[] = {"streams", "events", "modules", "pinned"};
    for (size_t i = 0; device && i < sizeof(counts) / sizeof(counts[0]); i++)
        optional_int(device, counts[i], 0, 1L << 31);
    const struct json *allocs = device ? optional(device, "allocations", JSON_ARR) : NULL;
    for (size_t i = 0; allocs && i < allocs->len; i++) {
        const struct json *a = &allocs->items[i], *addr = json_get(a, "address");
        if (a->type != JSON_OBJ || !addr || addr->type != JSON_INT || addr->negative ||
            !json_int_in(json_get(a, "size"), 0, INT64_MAX, NULL) || !json_get(a, "kind") ||
            json_get(a, "kind")->type != JSON_STR)
            decline("manifest device");
    }
    /* The restarted program would run without them: the Python path says so first. */
    const struct json *lost = optional(m, "not_saved", JSON_ARR);
    if (lost && lost->len)
        decline("not_saved");
    const struct json *core = need(m, "upper_core", JSON_OBJ);
    if (!json_int_in(json_get(core, "size"), 0, 1L << 62, NULL) ||
        !json_int_in(json_get(core, "header_crc32c"), 0, UINT32_MAX, NULL))
        decline("manifest upper_core");
    const struct json *files = need(m, "files", JSON_OBJ);
    int has_core = 0;
    for (size_t i = 0; i < files->len; i++) {
        const char *rel = files->keys[i];
        const struct json *meta = &files->items[i];
        if (!inside_path(rel) || meta->type != JSON_OBJ ||
            !json_int_in(json_get(meta, "size"), 0, 1L << 62, NULL))
            decline("manifest files");
        const struct json *crc = json_get(meta, "crc32c_regions");
        int is_core = strcmp(rel, CORE) == 0;
        has_core |= is_core;
        if (crc && !(is_core && crc->type == JSON_BOOL && crc->boolean))
            decline("manifest files");
        if (crc)
            continue;
        const struct json *sha = json_get(meta, "sha256"), *pages = json_get(meta, "sha256_pages");
        const struct json *digest = pages ? pages : sha;
        if (sha && pages)
            decline("manifest files");
        if (!digest || digest->type != JSON_STR || !is_hex64(digest->str, digest->len))
            decline("manifest files");
    }
    if (!has_core)
        decline("manifest lists no upper.core");
}

/* generation.py verify_files: each listed file is there with its size; the ones the loader
 * does not check itself (not upper.core, not device.img) by their digest. */
static void verify_files(const char *gen, const struct json *files)
{
    char path[PATH_MAX], hex[65];
    for (size_t i = 0; i < files->len; i++) {
        const char *rel = files->keys[i];
        const struct json *meta = &files->items[i];
        struct stat st;
        int64_t size;
        json_int_in(json_get(meta, "size"), 0, 1L << 62, &size);
        if (path_join(path, gen, rel) != 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_size != size)
            decline("image file missing or resized");
        if (strcmp(rel, CORE) == 0 || strcmp(rel, DEVICE_IMG) == 0)
            continue;
        const struct json *pages = json_get(meta, "sha256_pages");
        int rc = pages ? sha256_pages_file(path, hex) : sha256_file(path, hex);
        const struct json *want = pages ? pages : json_get(meta, "sha256");
        if (rc != 0 || strcmp(hex, want->str) != 0)
            decline("image file checksum");
    }
}

static void same_digest(const char *path, const struct json *want)
{
    char hex[65];
    if (!json_plain_str(want) || sha256_file(path, hex) != 0 || strcmp(hex, want->str) != 0)
        decline("program or loader changed");
}

/* shlex.quote, as runner.py crac_command quotes the `crac` command for restart scripts. */
static char *shell_quote(const char *s)
{
    size_t n = strlen(s);
    int plain = n > 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_@%+=:,./-", *p)))
            plain = 0;
    char *out = malloc(4 * n + 3), *o = out;
    if (!out)
        decline("out of memory");
    if (plain)
        return strcpy(out, s);
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\"'\"'", 5);
            o += 5;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

struct list {
    char **v;
    int n, cap;
};

static void add(struct list *l, const char *s)
{
    if (l->n + 1 >= l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, (size_t)l->cap * sizeof(char *));
        if (!l->v)
            decline("out of memory");
    }
    l->v[l->n++] = (char *)s;
    l->v[l->n] = NULL;
}

static char *num(long long v)
{
    char *s = malloc(24);
    if (!s)
        decline("out of memory");
    snprintf(s, 24, "%lld", v);
    return s;
}

/* launch/tree.py fork_tree for a tree of one process: no zombie to recreate (else the Python
 * path), and the group and session ids the program knew mapped to the kernel's now. */
static void tree_args(const struct json *proc, struct list *opts)
{
    if (!json_int_in(json_get(proc, "vpid"), INT32_MIN, INT32_MAX, NULL) ||
        !json_int_in(json_get(proc, "vppid"), INT32_MIN, INT32_MAX, NULL))
        decline("no process ids");
    const struct json *zombies = json_get(proc, "zombies");
    if (zombies && !(zombies->type == JSON_NULL || (zombies->type == JSON_ARR && !zombies->len)))
        decline("zombies");
    const struct json *forked = json_get(proc, "forked");
    if (forked && forked->type == JSON_BOOL && forked->boolean) {
        add(opts, "--forked");
        add(opts, "1");
    }
    const char *names[2] = {"pgid", "sid"}, *flags[2] = {"--group-id", "--session-id"};
    long long real[2] = {getpgid(0), getsid(0)};
    for (int i = 0; i < 2; i++) {
        const struct json *v = json_get(proc, names[i]);
        int64_t vid;
        if (!v || v->type == JSON_NULL)
            continue;
        if (!json_int_in(v, INT32_MIN, INT32_MAX, &vid))
            decline("process ids");
        if (vid != real[i]) {
            add(opts, flags[i]);
            char *pair = malloc(48);
            if (!pair)
                decline("out of memory");
            snprintf(pair, 48, "%lld:%lld", (long long)vid, real[i]);
            add(opts, pair);
        }
    }
}

/* runner.py exec_loader: the options through an inherited memfd, the program's argv as ours,
 * the environment as we were given it (first of each name; no entry without a name) plus
 * CRAC_LOADER_OPTIONS_FD. */
__attribute__((noreturn)) static void exec_loader(const char *loader, struct list *opts,
                                                  const struct json *argv, int ckpt_sig)
{
    int fd = memfd_create("crac-loader-options", 0); /* not CLOEXEC: the loader reads it */
    if (fd < 0)
        decline("memfd");
    for (int i = 0; i < opts->n; i++) {
        size_t len = strlen(opts->v[i]) + 1;
        if (write(fd, opts->v[i], len) != (ssize_t)len)
            decline("memfd write");
    }
    lseek(fd, 0, SEEK_SET);
    struct list shown = {0}, env = {0};
    for (size_t i = 0; i < argv->len; i++)
        add(&shown, argv->items[i].str);
    char fdvar[48];
    snprintf(fdvar, sizeof(fdvar), "CRAC_LOADER_OPTIONS_FD=%d", fd);
    int placed = 0;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            continue;
        size_t klen = (size_t)(eq - *e) + 1;
        int dup = 0;
        for (int j = 0; j < env.n && !dup; j++)
            dup = strncmp(env.v[j], *e, klen) == 0;
        if (dup)
            continue;
        if (strncmp(*e, "CRAC_LOADER_OPTIONS_FD=", klen) == 0) {
            add(&env, fdvar);
            placed = 1;
        } else {
            add(&env, *e);
        }
    }
    if (!placed)
        add(&env, fdvar);
    if (debug_path)
        fprintf(stderr, "crac: debug: restart path: native (crac-loader --fast-restart)\n");
    /* Python ignores SIGPIPE and SIGXFSZ and resets them before the exec; the program starts
     * with the dispositions a shell gives it either way. */
    signal(SIGPIPE, SIG_DFL);
    signal(SIGXFSZ, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, ckpt_sig);
    sigprocmask(SIG_BLOCK, &set, NULL);
    restore_sigint();
    execve(loader, shown.v, env.v);
    fprintf(stderr, "crac: error: cannot exec %s: %m; reinstall crac (pip install .)\n", loader);
    _exit(2);
}

int restart_prepare_main(int argc, char **argv)
{
    /* crac-loader --fast-restart SELF HELD restart [FLAGS] CHECKPOINT */
    if (argc < 6 || strcmp(argv[4], "restart") != 0) {
        fprintf(stderr, "crac: error: crac-loader --fast-restart is started by crac restart\n");
        exit(2);
    }
    self_cmd = argv[2];
    sigint_held = strcmp(argv[3], "1") == 0;
    restart_args = argv + 4;
    n_restart_args = argc - 4;
    const char *dbg = getenv("CRAC_DEBUG_PATH");
    debug_path = dbg && *dbg;
    int force = 0, no_truncate = 0, allow_changed = 0, verbose = 0, no_fork = 0, exit_after = 0;
    int lazy = 0;
    const char *arg = NULL;
    int options_ended = 0; /* after `--` (crac_restart_script.sh's), the checkpoint alone */
    for (int i = 5; i < argc; i++) {
        const char *a = argv[i];
        if (options_ended || (a[0] != '-' && !arg)) {
            if (arg || !a[0])
                decline("options");
            arg = a;
        } else if (strcmp(a, "--") == 0)
            options_ended = 1;
        else if (strcmp(a, "--force") == 0)
            force = 1;
        else if (strcmp(a, "--no-truncate") == 0)
            no_truncate = 1;
        else if (strcmp(a, "--allow-changed-files") == 0)
            allow_changed = 1;
        else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0)
            verbose = 1;
        else if (strcmp(a, "--no-fork-writer") == 0)
            no_fork = 1;
        else if (strcmp(a, "--exit-after-checkpoint") == 0)
            exit_after = 1;
        else if (strcmp(a, "--lazy") == 0)
            lazy = 1;
        else
            decline("options");
    }
    if (!arg)
        decline("options");

    char gen[PATH_MAX], loader[PATH_MAX], parent[PATH_MAX];
    resolve_generation(arg, gen, 0);
    ssize_t n = readlink("/proc/self/exe", loader, sizeof(loader) - 1);
    if (n <= 0)
        decline("loader path");
    loader[n] = '\0';
    memcpy(parent, gen, PATH_MAX);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent)
        decline("generation path");
    *slash = '\0';
    /* trust.check, before a byte of the image is read (docs/TRUST.md). */
    trusted_dir(gen);
    trusted_dir(parent);
    trusted_entries(gen, 1);
    struct json m;
    load_manifest(gen, &m, "manifest JSON");
    check_chain(gen, &m);
    int64_t parent_gen, parent_crc, full_every = incremental_of(&m, &parent_gen, &parent_crc);
    const struct json *proc = json_get(&m, "process"), *files = json_get(&m, "files");
    verify_files(gen, files);
    struct list opts = {0};
    /* The program, the loader, the directory the next checkpoints go to (generation.py
     * check_program, check_loader, check_writable). */
    const char *program = json_get(proc, "program")->str;
    struct stat st;
    if (stat(program, &st) != 0 || !S_ISREG(st.st_mode))
        decline("program missing");
    if (!force) {
        same_digest(program, json_get(proc, "program_sha256"));
        const struct json *lsha = json_get(&m, "loader_sha256");
        if (!lsha)
            decline("loader changed");
        same_digest(loader, lsha);
        if (access(parent, W_OK | X_OK) != 0)
            decline("not writable");
    }
    /* The image's backend (no --device given): sim or none here; CUDA finds its runtime on the
     * Python path. */
    const char *dev = json_get(json_get(&m, "backend"), "name")->str;
    dev = *dev ? dev : "none";
    if (strcmp(dev, "sim") != 0 && strcmp(dev, "none") != 0)
        decline("device");
    int64_t sig, core_size, header_crc;
    const struct json *core = json_get(&m, "upper_core");
    json_int_in(json_get(proc, "ckpt_signal"), 1, 64, &sig);
    json_int_in(json_get(core, "size"), 0, 1L << 62, &core_size);
    json_int_in(json_get(core, "header_crc32c"), 0, UINT32_MAX, &header_crc);
    const char *base = strrchr(self_cmd, '/');
    if (!base || strcmp(base + 1, "crac") != 0 || access(self_cmd, F_OK) != 0)
        decline("crac command path");

    add(&opts, "--device");
    add(&opts, dev);
    add(&opts, "--restart");
    add(&opts, gen);
    add(&opts, "--core-size");
    add(&opts, num(core_size));
    add(&opts, "--header-crc");
    add(&opts, num(header_crc));
    add(&opts, "--interval");
    add(&opts, "0");
    add(&opts, "--ckpt-signal");
    add(&opts, num(sig));
    add(&opts, "--keep");
    add(&opts, "2");
    add(&opts, "--crac-cmd");
    add(&opts, shell_quote(self_cmd));
    if (exit_after)
        add(&opts, "--exit-after-checkpoint");
    if (verbose)
        add(&opts, "--verbose");
    if (no_fork)
        add(&opts, "--no-fork-writer");
    const struct json *open_files = json_get(proc, "ckpt_open_files");
    if (open_files && open_files->boolean) /* a restart goes on with it, as main.py does */
        add(&opts, "--ckpt-open-files");
    if (full_every) {
        add(&opts, "--incremental");
        add(&opts, num(full_every));
    }
    if (no_truncate)
        add(&opts, "--no-truncate");
    if (allow_changed)
        add(&opts, "--allow-changed-files");
    if (lazy)
        add(&opts, "--lazy");
    tree_args(proc, &opts);
    const struct json *pargv = json_get(proc, "argv");
    add(&opts, "--");
    add(&opts, pargv->items[0].str);
    exec_loader(loader, &opts, pargv, (int)sig);
}
