/* image_commit.c — makes a written generation official: MANIFEST.json with versions and SHA-256
 * checksums, fsync, rename to gen-NNNNNN, the `latest` link, rotation of old generations and the
 * restart script. Until the rename, the previous generation is the one a restart finds. */
#include "ckpt.h"
#include "lower_fds.h"
#include "tree.h"
#include "upper_alloc.h"
#include "state.h"

#include "crac_version.h"
#include "image_device.h"
#include "page_digest.h"
#include "sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <gnu/libc-version.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

struct json {
    char *data;
    size_t len, cap;
};

/* Which of fds 0-2 is this session leader's controlling terminal (-1: not a leader, no terminal,
 * or not one of those), and the terminal's foreground group as the program knows it: the tree's
 * restart makes the pseudo-terminal it gives that fd the leader's terminal again, with that
 * group in the foreground (crac_py/launch/tree.py). */
static int ctty_fd(int32_t *foreground)
{
    long long tty_tpgid[2]; /* fields 7 and 8: the terminal and its foreground group */
    if (getsid(0) != getpid() || proc_stat_fields(0, 7, 2, tty_tpgid) != 0 || !tty_tpgid[0])
        return -1;
    long long tty = tty_tpgid[0], tpgid = tty_tpgid[1];
    dev_t dev = makedev((tty >> 8) & 0xfff, (tty & 0xff) | ((tty >> 12) & 0xfff00));
    *foreground = tpgid > 0 ? tree_program_group(tpgid) : -1;
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (fstat(i, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == dev)
            return i;
    }
    return -1;
}

static void jraw(struct json *j, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n =
            vsnprintf(j->data ? j->data + j->len : NULL, j->data ? j->cap - j->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (j->data && j->len + (size_t)n < j->cap) {
            j->len += (size_t)n;
            return;
        }
        size_t cap = j->cap ? j->cap * 2 : 4096;
        while (cap < j->len + (size_t)n + 1)
            cap *= 2;
        char *d = realloc(j->data, cap);
        if (!d)
            return;
        j->data = d;
        j->cap = cap;
    }
}

/* Length of the well-formed UTF-8 sequence at s (1-4), or 0 when s does not start one. */
static int utf8_len(const unsigned char *s)
{
    int n = s[0] < 0x80                    ? 1
            : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
            : s[0] >= 0xe0 && s[0] <= 0xef ? 3
            : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                           : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
        (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
        return 0; /* overlong, a surrogate, or past U+10FFFF */
    return n;
}

/* A JSON string holding the bytes of s faithfully: UTF-8 as it is, and each byte that is not
 * part of well-formed UTF-8 as the escape \udcXX (Python's surrogateescape, which
 * os.fsencode() turns back into the byte). Paths and arguments are bytes, not text
 * (docs/IMAGE.md, "MANIFEST.json"). */
static void jstr(struct json *j, const char *s)
{
    jraw(j, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        int n = utf8_len(c);
        if (n == 0)
            jraw(j, "\\udc%02x", *c++);
        else if (*c == '"' || *c == '\\')
            jraw(j, "\\%c", *c++);
        else if (*c < 0x20 || *c == 0x7f)
            jraw(j, "\\u%04x", *c++);
        else {
            jraw(j, "%.*s", n, (const char *)c);
            c += n;
        }
    }
    jraw(j, "\"");
}

/* s as one shell word: single quotes, each ' written as '\'' (no expansion of anything). */
static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* Everything under parent's entry name, depth first, then the entry; never following a link.
 * Not nftw: its directory descriptors would be at the low numbers a program's close-everything
 * loop closes while this runs (lower_fds.h). */
static int remove_at(int parent, const char *name, int depth)
{
    if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    int fd = depth < 64 ? lower_openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            remove_at(dirfd(d), de->d_name, depth + 1) != 0)
            rc = -1;
    closedir(d);
    return unlinkat(parent, name, AT_REMOVEDIR) == 0 ? rc : -1;
}

int remove_tree(const char *path) { return remove_at(AT_FDCWD, path, 0); }

static int fsync_path(const char *path)
{
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

void image_digests_cancel(struct image_digests *d)
{
    page_digest_cancel(d->core);
    page_digest_cancel(d->device);
    d->core = d->device = NULL;
}

/* Every regular file under dir (one level of subdirectories: files/), with its SHA-256. */
static int manifest_files(struct json *j, const char *dir, const char *sub, int *first,
                          struct image_digests *digests)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s%s%s", dir, sub[0] ? "/" : "", sub);
    DIR *d = lower_opendir(path);
    if (!d)
        return -1;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) && rc == 0) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "MANIFEST.json") == 0)
            continue;
        char rel[PATH_MAX], full[PATH_MAX * 2];
        snprintf(rel, sizeof(rel), "%s%s%s", sub, sub[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof(full), "%s/%s", dir, rel);
        struct stat st;
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            rc = manifest_files(j, dir, rel, first, digests);
            if (rc == 0 && fsync_path(full) != 0) /* the names of what it holds */
                rc = -1;
            continue;
        }
        /* What the kinds saved beside upper.core (files/) is written in the pause without a
         * sync, which would hold the program for each file: made durable here, once it runs. */
        if (sub[0] && fsync_path(full) != 0) {
            rc = -1;
            break;
        }
        /* upper.core: no digest of the whole file. Its header CRC-32C (upper_core, below) and
         * each region's CRC-32C, computed as the pages are written, cover every byte; `crac
         * verify` checks them as a restart does (docs/IMAGE.md "Checksums"). A SHA-256 of it
         * cost more CPU than writing it. */
        if (strcmp(rel, "upper.core") == 0) {
            jraw(j, "%s\n    ", *first ? "" : ",");
            *first = 0;
            jstr(j, rel);
            jraw(j, ": {\"size\": %lld, \"crc32c_regions\": true}", (long long)st.st_size);
            continue;
        }
        /* device.img is sparse: its digest skips the holes instead of hashing them as zeros.
         * Mostly computed already, beside the writer; hashed here if that thread could not
         * run. So is a sparse copy of a written file (files/fd-N: LMDB's map-sized file). */
        struct page_digest **beside = strcmp(rel, "upper.core") == 0        ? &digests->core
                                      : strcmp(rel, CRAC_DEVICE_IMAGE) == 0 ? &digests->device
                                                                            : NULL;
        int pages = beside != NULL || (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size;
        char hex[65];
        int hashed = -1;
        if (beside && *beside) {
            hashed = page_digest_finish(*beside, hex);
            *beside = NULL;
        }
        if (hashed != 0 && (pages ? sha256_pages_file(full, hex) : sha256_file(full, hex)) != 0) {
            rc = -1;
            break;
        }
        jraw(j, "%s\n    ", *first ? "" : ",");
        *first = 0;
        jstr(j, rel);
        jraw(j, ": {\"size\": %lld, \"%s\": \"%s\"}", (long long)st.st_size,
             pages ? "sha256_pages" : "sha256", hex);
    }
    closedir(d);
    return rc;
}

/* Flushing upper.core to disk is I/O-bound and hashing it is CPU-bound: do both at once. */
static void *flush_core(void *arg)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/upper.core", (const char *)arg);
    return (void *)(intptr_t)fsync_path(path);
}

/* What device state the image holds: device.img's allocations and the object counts, as the
 * checkpoint saw them (device_image_summary): the program has resumed by now. */
static void manifest_device(struct json *j)
{
    const struct device_summary *s = device_image_summary();
    jraw(j, "  \"device\": {\"allocations\": [");
    for (uint32_t i = 0; s->v && i < s->n; i++)
        jraw(j, "%s{\"address\": %llu, \"size\": %llu, \"kind\": \"%s\"}", i ? ", " : "",
             (unsigned long long)s->v[i].addr, (unsigned long long)s->v[i].size,
             s->v[i].kind == CRAC_DEV_MANAGED ? "managed" : "device");
    jraw(j, "], \"streams\": %d, \"events\": %d, \"modules\": %d, \"pinned\": %d},\n", s->streams,
         s->events, s->modules, s->pinned);
}

/* `crac compact` (ckpt_compact.c): the source generation's manifest, whose lines about the
 * program the compacted generation carries: this loader never ran the program, so what it would
 * write of it says nothing. NULL: a checkpoint. */
static const char *carried_manifest;
static const char *const carried_keys[] = {"host", "process", "backend", "device", "not_saved"};

void image_commit_carry(const char *manifest_text) { carried_manifest = manifest_text; }

/* The line of top-level KEY in text (each is one line: jstr escapes newlines), without its
 * newline; NULL when there is none. */
static const char *manifest_line(const char *text, const char *key, size_t *len)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "\n  \"%s\": ", key);
    const char *at = strstr(text, needle);
    const char *end = at ? strchr(at + 1, '\n') : NULL;
    if (!end)
        return NULL;
    *len = (size_t)(end - at - 1);
    return at + 1;
}

/* Replaces j's lines of carried_keys by the carried manifest's. 0, or -1 when either lacks one. */
static int carry_lines(struct json *j)
{
    for (size_t k = 0; k < sizeof(carried_keys) / sizeof(carried_keys[0]); k++) {
        size_t have_len, want_len;
        const char *have = manifest_line(j->data, carried_keys[k], &have_len);
        const char *want = manifest_line(carried_manifest, carried_keys[k], &want_len);
        if (!have || !want)
            return -1;
        struct json out = {0};
        jraw(&out, "%.*s%.*s%s", (int)(have - j->data), j->data, (int)want_len, want,
             have + have_len);
        if (!out.data)
            return -1;
        free(j->data);
        *j = out;
    }
    return 0;
}

static int write_manifest(const char *dir, int generation, uint32_t header_crc, uint64_t core_size,
                          int n_threads, struct image_digests digests)
{
    pthread_t flusher;
    int flushing = pthread_create(&flusher, NULL, flush_core, (void *)dir) == 0;
    struct json j = {0};
    struct utsname u;
    uname(&u);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    char prog_hash[65] = "", loader_hash[65] = "", created[64];
    /* Hashed at every checkpoint, read only when the file changed (1.7 MB of loader: ~1.3 ms
     * of CPU each time). */
    static struct sha256_memo prog_memo, loader_memo;
    sha256_file_memo(&prog_memo, ckpt_cfg.program, prog_hash);
    sha256_file_memo(&loader_memo, "/proc/self/exe", loader_hash);
    time_t now = time(NULL);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    jraw(&j, "{\n  \"format\": \"crac-image\",\n  \"format_version\": %d,\n", CKPT_IMAGE_FORMAT());
    jraw(&j, "  \"crac_version\": \"%s\",\n  \"generation\": %d,\n  \"created\": \"%s\",\n",
         CRAC_VERSION, generation, created);
    jraw(&j, "  \"host\": {\"hostname\": ");
    jstr(&j, host);
    jraw(&j, ", \"hostid\": \"%08lx\", \"kernel\": ", (unsigned long)gethostid() & 0xffffffffUL);
    jstr(&j, u.release);
    jraw(&j, ", \"glibc\": \"%s\"},\n", gnu_get_libc_version());
    /* vpid, vppid: the process and its parent as the program knows them (crac restart rebuilds
     * a tree from them: crac_py/launch/tree.py). */
    jraw(&j,
         "  \"process\": {\"pid\": %d, \"vpid\": %d, \"vppid\": %d, \"pgid\": %d, \"sid\": %d, "
         "\"program\": ",
         getpid(), (int)vid_from_real(crac_ctrl(), getpid()), (int)tree_program_ppid(),
         (int)tree_program_pgid(), (int)tree_program_sid());
    jstr(&j, ckpt_cfg.program);
    jraw(&j, ", \"program_sha256\": \"%s\", \"argv\": [", prog_hash);
    for (int i = 0; i < ckpt_cfg.argc; i++) {
        jraw(&j, "%s", i ? ", " : "");
        jstr(&j, ckpt_cfg.argv[i]);
    }
    /* "coordinated": one process of a job (crac restart of its directory restarts them all);
     * otherwise a run of its own, one of possibly several lineages in one directory. */
    /* "forked": made by a fork in the job, not by crac launch (a restart script does not wait
     * for such a process whose parent is gone: loader/ckpt/tree.h). */
    /* "ckpt_open_files": --ckpt-open-files, which a restart goes on with. */
    jraw(&j,
         "], \"threads\": %d, \"ckpt_signal\": %d, \"coordinated\": %s, \"forked\": %s, "
         "\"ckpt_open_files\": %s, ",
         n_threads, ckpt_cfg.ckpt_signal, ckpt_run_coordinated ? "true" : "false",
         tree_forked ? "true" : "false", ckpt_cfg.ckpt_open_files ? "true" : "false");
    int32_t foreground = -1;
    int ctty = ctty_fd(&foreground);
    if (ctty >= 0)
        jraw(&j, "\"ctty\": {\"fd\": %d, \"foreground\": %d}, ", ctty, (int)foreground);
    else
        jraw(&j, "\"ctty\": null, ");
    jraw(&j, "\"zombies\": [");
    const struct tree_zombie *zs;
    int n_zombies = tree_zombies(&zs);
    for (int i = 0; i < n_zombies; i++)
        jraw(&j, "%s{\"vpid\": %d, \"status\": %d}", i ? ", " : "", (int)zs[i].vpid, zs[i].wstatus);
    /* the children checkpointed with it: `crac verify` refuses a tree image that lacks one */
    const int32_t *kids;
    int n_kids = tree_members(&kids);
    jraw(&j, "], \"children\": [");
    for (int i = 0; i < n_kids; i++)
        jraw(&j, "%s%d", i ? ", " : "", (int)kids[i]);
    jraw(&j, "]},\n");
    jraw(&j, "  \"backend\": {\"name\": ");
    jstr(&j, ckpt_cfg.backend_name);
    jraw(&j, ", \"version\": ");
    jstr(&j, ckpt_cfg.backend_version);
    jraw(&j, ", \"driver_version\": %d},\n", ckpt_cfg.backend_driver_version);
    jraw(&j, "  \"loader_sha256\": \"%s\",\n", loader_hash);
    manifest_device(&j);
    /* What this checkpoint could not save (loader/state/losses.c), for crac inspect and verify. */
    const char *const *lost;
    int n_lost = state_losses(&lost);
    jraw(&j, "  \"not_saved\": [");
    for (int i = 0; i < n_lost; i++) {
        jraw(&j, "%s", i ? ", " : "");
        jstr(&j, lost[i]);
    }
    jraw(&j, "],\n");
    { /* --incremental (ckpt_incr.c; full_every 0: off): a restart goes on with it */
        const struct crac_parent_rec *p = incr_parent();
        jraw(&j,
             "  \"incremental\": {\"full_every\": %d, \"parent\": %d, \"base\": %d, "
             "\"parent_header_crc32c\": %u},\n",
             incr_full_every(), p ? p->generation : 0,
             p                   ? p->base
             : incr_full_every() ? generation
                                 : 0,
             p ? p->header_crc32c : 0);
    }
    jraw(&j, "  \"upper_core\": {\"size\": %llu, \"header_crc32c\": %u},\n",
         (unsigned long long)core_size, header_crc);
    jraw(&j, "  \"files\": {");
    int first = 1;
    int hashed = manifest_files(&j, dir, "", &first, &digests);
    image_digests_cancel(&digests); /* those not taken: their file was not there to list */
    void *flushed = (void *)(intptr_t)-1;
    if (flushing)
        pthread_join(flusher, &flushed);
    else
        flushed = flush_core((void *)dir);
    if (hashed != 0 || flushed != NULL || (carried_manifest && carry_lines(&j) != 0)) {
        free(j.data);
        return -1;
    }
    /* The manifest's own checksum: SHA-256 of the file with this digest written as zeros. */
    jraw(&j, "\n  },\n  \"manifest_sha256\": \"");
    size_t digest_at = j.len;
    jraw(&j, "%064d\"\n}\n", 0);
    char self[65];
    sha256_buffer(j.data, j.len, self);
    memcpy(j.data + digest_at, self, 64);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/MANIFEST.json", dir);
    int fd = lower_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0) {
        rc = write(fd, j.data, j.len) == (ssize_t)j.len && fsync(fd) == 0 ? 0 : -1;
        close(fd);
    }
    free(j.data);
    return rc;
}

/* The parent an incremental generation's manifest names ("incremental": {"parent": N}); 0 for
 * a full one or one that cannot be read. */
static int manifest_parent(int gen)
{
    char path[PATH_MAX + 48];
    snprintf(path, sizeof(path), "%s/gen-%06d/MANIFEST.json", ckpt_cfg.proc_dir, gen);
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    /* Whole: argv, lost things and files come before or after the key, any length. */
    char *text = malloc((size_t)st.st_size + 1);
    ssize_t n = text ? pread(fd, text, (size_t)st.st_size, 0) : -1;
    close(fd);
    if (n <= 0) {
        free(text);
        return 0;
    }
    text[n] = '\0';
    const char *inc = strstr(text, "\n  \"incremental\": {");
    const char *p = inc ? strstr(inc, "\"parent\": ") : NULL;
    int parent = p ? atoi(p + strlen("\"parent\": ")) : 0;
    free(text);
    return parent;
}

static void rotate(int keep)
{
    DIR *d = lower_opendir(ckpt_cfg.proc_dir);
    if (!d)
        return;
    int gens[4096], n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 4096) {
        int g;
        char tail;
        if (sscanf(de->d_name, "gen-%d%c", &g, &tail) == 1)
            gens[n++] = g;
    }
    closedir(d);
    /* Never a generation a kept one builds on (--incremental): the oldest generation of the
     * kept ones' chains bounds what goes. */
    int oldest_needed = 0;
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int k = 0; k < n; k++)
            newer += gens[k] > gens[i];
        if (newer >= keep)
            continue;
        int g = gens[i], depth = 0;
        for (int p; depth < 4096 && (p = manifest_parent(g)) > 0 && p < g; depth++)
            g = p;
        if (!oldest_needed || g < oldest_needed)
            oldest_needed = g;
    }
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int k = 0; k < n; k++)
            newer += gens[k] > gens[i];
        if (newer >= keep && gens[i] < oldest_needed) {
            /* Renamed first, so a kill in the middle never leaves a half-deleted generation
             * that looks complete. */
            char path[PATH_MAX + 32], doomed[PATH_MAX + 32];
            snprintf(path, sizeof(path), "%s/gen-%06d", ckpt_cfg.proc_dir, gens[i]);
            snprintf(doomed, sizeof(doomed), "%s/.deleting-gen-%06d", ckpt_cfg.proc_dir, gens[i]);
            remove_tree(doomed);
            if (rename(path, doomed) == 0)
                remove_tree(doomed);
        }
    }
}

/* Writes crac_restart_script.sh without ever following a planted link: the checkpoint directory
 * must be the user's own (in another's, such as /tmp, the owner could swap the script), the
 * script is created under a fresh random name with O_EXCL|O_NOFOLLOW, then renamed over the old
 * one (rename replaces a link planted at the final name, never writes through it). */
static int write_restart_script(void)
{
    static const char name[] = "crac_restart_script.sh";
    int dfd = lower_open(ckpt_cfg.ckpt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    struct stat st;
    if (fstat(dfd, &st) != 0 || st.st_uid != geteuid()) {
        close(dfd);
        return -2; /* not the user's own directory: others could plant or swap files */
    }
    char tmp[64];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ (uint64_t)tries;
        snprintf(tmp, sizeof(tmp), ".%.24s.tmp-%016llx", name, (unsigned long long)r);
        fd = lower_openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlinkat(dfd, tmp, 0);
        }
        close(dfd);
        errno = e;
        return -1;
    }
    const char *proc = strrchr(ckpt_cfg.proc_dir, '/') + 1;
    fprintf(f, "#!/bin/sh\n"
               "# Written by crac after each checkpoint: restarts the job from its latest images.\n"
               "# --ckptdir DIR restarts from a copy of this directory; other options go to\n"
               "# `crac restart`.\n"
               "dir=");
    sh_quote(f, ckpt_cfg.ckpt_dir);
    /* `--` before the image: a --ckptdir starting with '-' stays a path. */
    fprintf(f,
            "\n"
            "while [ $# -gt 0 ]; do\n"
            "  case \"$1\" in\n"
            "    --ckptdir) dir=\"$2\"; shift 2 ;;\n"
            "    --ckptdir=*) dir=\"${1#--ckptdir=}\"; shift ;;\n"
            "    --) shift; break ;;\n"
            "    *) break ;;\n"
            "  esac\n"
            "done\n"
            "exec %s restart \"$@\" -- \"$dir\"/",
            ckpt_cfg.crac_cmd); /* crac_cmd is shell words already (crac_py/launch/runner.py) */
    sh_quote(f, proc);
    fputc('\n', f);
    int ok = fflush(f) == 0 && fchmod(fd, 0700) == 0 && fsync(fd) == 0;
    fclose(f);
    if (!ok || renameat(dfd, tmp, dfd, name) != 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        close(dfd);
        errno = e;
        return -1;
    }
    close(dfd);
    return 0;
}

int prepare_generation(const char *tmp_dir, int generation, uint32_t header_crc, uint64_t core_size,
                       int n_threads, struct image_digests digests)
{
    if (write_manifest(tmp_dir, generation, header_crc, core_size, n_threads, digests) != 0 ||
        fsync_path(tmp_dir) != 0) {
        fprintf(stderr, "crac: error: cannot write the manifest of generation %d: %s\n", generation,
                strerror(errno));
        return -1;
    }
    return 0;
}

int commit_generation(const char *tmp_dir, int generation, uint32_t header_crc, uint64_t core_size,
                      int n_threads, struct image_digests digests)
{
    if (prepare_generation(tmp_dir, generation, header_crc, core_size, n_threads, digests) != 0)
        return -1;
    return publish_generation(tmp_dir, generation);
}

int publish_generation(const char *tmp_dir, int generation)
{
    char final[PATH_MAX + 32], link_tmp[PATH_MAX + 32], link[PATH_MAX + 32], name[32];
    snprintf(name, sizeof(name), "gen-%06d", generation);
    snprintf(final, sizeof(final), "%s/%s", ckpt_cfg.proc_dir, name);
    remove_tree(final); /* a leftover of an earlier run with the same number */
    if (rename(tmp_dir, final) != 0) {
        fprintf(stderr, "crac: error: cannot publish generation %d: %s\n", generation,
                strerror(errno));
        return -1;
    }
    snprintf(link_tmp, sizeof(link_tmp), "%s/.latest.tmp", ckpt_cfg.proc_dir);
    snprintf(link, sizeof(link), "%s/latest", ckpt_cfg.proc_dir);
    unlink(link_tmp);
    if (symlink(name, link_tmp) != 0 || rename(link_tmp, link) != 0 ||
        fsync_path(ckpt_cfg.proc_dir) != 0) {
        fprintf(stderr, "crac: error: cannot update %s: %s\n", link, strerror(errno));
        return -1;
    }
    rotate(ckpt_cfg.keep);
    /* Under a coordinator, the coordinator writes the job's restart script. */
    static int warned_owner;
    int script = ckpt_run_coordinated ? 0 : write_restart_script();
    if (script == -2 && !warned_owner++)
        fprintf(stderr, "crac: warning: no crac_restart_script.sh: %s belongs to another user\n",
                ckpt_cfg.ckpt_dir);
    else if (script == -1)
        fprintf(stderr, "crac: warning: cannot write %s/crac_restart_script.sh: %s\n",
                ckpt_cfg.ckpt_dir, strerror(errno));
    return 0;
}
