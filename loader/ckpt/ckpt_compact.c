/* ckpt_compact.c — `crac compact`: an incremental chain's memory read back into this loader's
 * window, written as one full upper.core and published as the next generation (docs/IMAGE.md). */
#include "ckpt.h"

#include "crac_layout.h"
#include "launch.h"
#include "region_walk.h"
#include "restart.h"
#include "upper_alloc.h"
#include "window.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define COPY_BUF (1UL << 20)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The gen-N.tmp this compaction made, removed when it fails: the chain is left as it was. */
static char tmp_made[PATH_MAX + 32];

static int refuse(const char *fmt, ...)
{
    if (tmp_made[0])
        remove_tree(tmp_made);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "crac: error: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_REFUSED;
}

/* The whole of a small file, NUL-terminated; NULL when unreadable. */
static char *read_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *text = malloc((size_t)st.st_size + 1);
    ssize_t n = text ? pread(fd, text, (size_t)st.st_size, 0) : -1;
    close(fd);
    if (n != st.st_size) {
        free(text);
        return NULL;
    }
    text[n] = '\0';
    return text;
}

/* The integer after "KEY": inside the manifest's top-level object OBJECT's line; dflt if none. */
static long manifest_int(const char *text, const char *object, const char *key, long dflt)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "\n  \"%s\": ", object);
    const char *line = strstr(text, needle);
    if (!line)
        return dflt;
    const char *end = strchr(line + 1, '\n');
    snprintf(needle, sizeof(needle), "\"%s\": ", key);
    const char *at = strstr(line, needle);
    return at && (!end || at < end) ? strtol(at + strlen(needle), NULL, 10) : dflt;
}

/* The highest N of the gen-N directories in dir (a gen-N.tmp is not one); 0 when none. */
static int newest_generation(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int newest = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int g;
        char tail;
        if (sscanf(de->d_name, "gen-%d%c", &g, &tail) == 1 && g > newest)
            newest = g;
    }
    closedir(d);
    return newest;
}

/* Copies src to dst, holes kept as holes (device.img is sparse), and flushes it. */
static int copy_file(const char *src, const char *dst, unsigned char *buf)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (in < 0 || fstat(in, &st) != 0) {
        if (in >= 0)
            close(in);
        return -1;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = out < 0 ? -1 : 0;
    for (off_t pos = 0; rc == 0 && pos < st.st_size;) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0)
            break; /* the rest is a hole */
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0)
            hole = st.st_size;
        for (off_t at = data; rc == 0 && at < hole;) {
            size_t want = (size_t)(hole - at) < COPY_BUF ? (size_t)(hole - at) : COPY_BUF;
            ssize_t n = pread(in, buf, want, at);
            if (n <= 0 || pwrite(out, buf, (size_t)n, at) != n)
                rc = -1;
            at += n > 0 ? n : 0;
        }
        pos = hole;
    }
    if (rc == 0 && (ftruncate(out, st.st_size) != 0 || fsync(out) != 0))
        rc = -1;
    close(in);
    if (out >= 0)
        close(out);
    return rc;
}

/* Every file of the source generation but upper.core and MANIFEST.json (device.img, files/):
 * the state beside memory is the newest generation's, as it is. */
static int copy_tree(const char *src, const char *dst, int top, unsigned char *buf)
{
    DIR *d = opendir(src);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.' || (top && (strcmp(de->d_name, "upper.core") == 0 ||
                                             strcmp(de->d_name, "MANIFEST.json") == 0)))
            continue;
        char from[PATH_MAX], to[PATH_MAX];
        if (snprintf(from, sizeof(from), "%s/%s", src, de->d_name) >= (int)sizeof(from) ||
            snprintf(to, sizeof(to), "%s/%s", dst, de->d_name) >= (int)sizeof(to)) {
            rc = -1;
            break;
        }
        struct stat st;
        if (lstat(from, &st) != 0)
            rc = -1;
        else if (S_ISDIR(st.st_mode)) {
            if (mkdir(to, 0700) != 0 || copy_tree(from, to, 0, buf) != 0)
                rc = -1;
            int fd = rc == 0 ? open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
            if (fd >= 0) {
                rc = fsync(fd);
                close(fd);
            }
        } else if (S_ISREG(st.st_mode))
            rc = copy_file(from, to, buf);
        else
            rc = -1; /* an image holds files and directories only (docs/TRUST.md) */
    }
    closedir(d);
    return rc;
}

int compact_main(int argc, char **argv)
{
    if (argc != 7)
        return refuse("usage: crac-loader --compact GEN_DIR CORE_SIZE HEADER_CRC KEEP CRAC_CMD");
    char *end1, *end2, *end3;
    uint64_t core_size = strtoull(argv[3], &end1, 10);
    unsigned long header_crc = strtoul(argv[4], &end2, 10);
    long keep = strtol(argv[5], &end3, 10);
    if (*end1 || *end2 || *end3 || !argv[3][0] || !argv[4][0] || header_crc > 0xffffffffUL ||
        keep < 1)
        return refuse("--compact: bad size, checksum or --keep");
    char err[1024];
    /* The chain's memory goes back where the program had it: the windows first, as a restart's. */
    if (window_reserve("upper window W", CRAC_W_START, CRAC_W_END, err, sizeof(err)) != 0 ||
        window_reserve("device window D", CRAC_D_START, CRAC_D_END, err, sizeof(err)) != 0)
        return refuse("%s", err);
    struct ckpt_config *c = &ckpt_cfg;
    char gen_dir[PATH_MAX];
    if (!realpath(argv[2], gen_dir))
        return refuse("cannot resolve %s: %s", argv[2], strerror(errno));
    snprintf(c->proc_dir, sizeof(c->proc_dir), "%s", gen_dir);
    *strrchr(c->proc_dir, '/') = '\0';
    snprintf(c->ckpt_dir, sizeof(c->ckpt_dir), "%.4000s", c->proc_dir);
    *strrchr(c->ckpt_dir, '/') = '\0';
    if (!c->ckpt_dir[0])
        snprintf(c->ckpt_dir, sizeof(c->ckpt_dir), "/");
    snprintf(c->crac_cmd, sizeof(c->crac_cmd), "%s", argv[6]);
    c->keep = (int)keep;
    c->coord_fd = -1;
    c->compress = CRAC_CHUNK_RAW;
    /* One writer per process directory (image_lineage.c): a running program, or another
     * compaction, holds its lock; its generation numbers are its own (docs/DECISIONS.md). */
    int lock = open(c->proc_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (lock < 0)
        return refuse("cannot open %s: %s", c->proc_dir, strerror(errno));
    if (flock(lock, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        return refuse("%s is being written by a running process (the program, a restart of it, "
                      "or another compaction): compact it once that has ended",
                      c->proc_dir);
    int newest = newest_generation(c->proc_dir);
    int source = 0;
    const char *base = strrchr(gen_dir, '/') + 1;
    char tail;
    if (sscanf(base, "gen-%d%c", &source, &tail) != 1 || source < 1)
        return refuse("%s is not a generation directory (gen-NNNNNN)", gen_dir);
    if (source != newest)
        return refuse("gen-%06d is not the newest generation of %s (gen-%06d is): only the newest "
                      "is compacted, so `latest` never goes back",
                      source, c->proc_dir, newest);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/MANIFEST.json", gen_dir);
    char *manifest = read_text(path);
    if (!manifest)
        return refuse("cannot read %s", path);
    struct restart_image img;
    if (restart_read_image(gen_dir, core_size, (uint32_t)header_crc, &img, err, sizeof(err)) != 0)
        return refuse("%s", err);
    fcntl(img.core_fd, F_SETFL, 0); /* the FIFO guard was for the open */
    /* Mapping a file in memory here would write the checkpoint's pages back into it (that is
     * for a restart), and what this loader maps is saved by the compacted image as it is. */
    struct region_walk w = region_walk_start(img.regions, img.regions_len);
    struct crac_region_rec o;
    const char *mapped;
    while (region_walk_next(&w, &o, &mapped, NULL) > 0)
        if (o.flags & CRAC_REGION_SHMEM_FILE)
            return refuse("gen-%06d cannot be compacted: the program maps %s shared (a file in "
                          "memory, which only a restart puts back)",
                          source, mapped);
    /* The PROCESS note records the program's working directory and umask as getcwd/umask say. */
    if (img.cwd[0] && chdir(img.cwd) != 0)
        return refuse("cannot enter the program's working directory %s: %s", img.cwd,
                      strerror(errno));
    umask(img.proc.umask);
    double t0 = now_ms();
    /* Every region filled from its chain and checked, by the restart's own code; a file the
     * program mapped is left as it is (compacting is no restart). */
    img.keep_files = 1;
    if (restart_map_regions(&img, err, sizeof(err)) != 0)
        return refuse("%s", err);
    restart_note_excluded(&img);
    double t1 = now_ms();
    struct crac_registry *r = (struct crac_registry *)img.proc.registry;
    if (!restart_addr_ok(&img, img.proc.registry, sizeof(*r), PROT_READ) ||
        r->magic != CRAC_REGISTRY_MAGIC || r->version != CRAC_REGISTRY_VERSION)
        return refuse("image corrupted: the upper runtime's registry is not where the image says");
    ckpt_registry = r;
    c->ckpt_signal = (int)img.proc.ckpt_signal;
    /* The threads as the checkpoint parked them: their records are in the memory just mapped. */
    struct parked_thread *ts = calloc((size_t)img.n_threads + 1, sizeof(*ts));
    if (!ts)
        return refuse("out of memory");
    for (int i = 0; i < img.n_threads; i++) {
        struct crac_thread_rec *rec = (struct crac_thread_rec *)img.threads[i].rec;
        if (restart_check_thread_rec(&img, rec, img.threads[i].tid, err, sizeof(err)) != 0)
            return refuse("%s", err);
        ts[i] = (struct parked_thread){rec, img.threads[i].real_tid, -1, 0};
        if (img.threads[i].is_main)
            core_owner_pid = img.threads[i].real_tid;
    }
    if (!core_owner_pid || vid_from_real(crac_ctrl(), core_owner_pid) != (int32_t)img.proc.pid)
        return refuse("image corrupted: its main thread is not the process it names");
    /* The compacted generation is full; a chain goes on from it as it would from any full one. */
    incr_configure((int)manifest_int(manifest, "incremental", "full_every", 0));
    int generation = newest + 1;
    /* The program numbers its next checkpoint from its registry's count: a restart from the
     * compacted generation must write N+2, not N+1 over it. */
    if (!restart_addr_ok(&img, (uint64_t)&r->generation, sizeof(r->generation),
                         PROT_READ | PROT_WRITE))
        return refuse("image corrupted: the upper runtime's registry is not writable");
    r->generation = generation;
    char tmp[PATH_MAX + 32], core[PATH_MAX + 64];
    snprintf(tmp, sizeof(tmp), "%.4000s/gen-%06d.tmp", c->proc_dir, generation);
    snprintf(core, sizeof(core), "%s/upper.core", tmp);
    remove_tree(tmp); /* a compaction or checkpoint killed before it published */
    if (mkdir(tmp, 0700) != 0)
        return refuse("cannot create %s: %s", tmp, strerror(errno));
    snprintf(tmp_made, sizeof(tmp_made), "%s", tmp);
    uint32_t new_crc = 0;
    uint64_t new_size = 0;
    unsigned char *buf = malloc(COPY_BUF);
    if (!buf ||
        core_write(core, ts, img.n_threads, generation, img.notes, &new_crc, &new_size, NULL) != 0)
        return refuse("cannot write %s", core);
    double t2 = now_ms();
    snprintf(path, sizeof(path), "%s", gen_dir);
    if (copy_tree(path, tmp, 1, buf) != 0)
        return refuse("cannot copy the files of %s into %s: %s", gen_dir, tmp, strerror(errno));
    ckpt_test_writer_hold(); /* CRAC_TEST_WRITER_HOLD: a test kills the compaction here */
    image_commit_carry(manifest);
    if (commit_generation(tmp, generation, new_crc, new_size, img.n_threads,
                          (struct image_digests){NULL, NULL}) != 0) {
        remove_tree(tmp); /* said on stderr; a failed rename left it as gen-N.tmp */
        return EXIT_REFUSED;
    }
    if (getenv("CRAC_TIMING")) /* the phases apart, for bench/compact.py */
        fprintf(stderr,
                "crac: timing: compact: read %.1f ms, write %.1f ms, files and publish %.1f ms\n",
                t1 - t0, t2 - t1, now_ms() - t2);
    printf("compacted gen-%06d into gen-%06d (full, %llu bytes)\n", source, generation,
           (unsigned long long)new_size);
    return 0;
}
