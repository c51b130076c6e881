/* ckpt_incr.c — incremental checkpoints: the upper half's private anonymous writable regions are
 * registered with an async write-protect userfaultfd, and PAGEMAP_SCAN lists (and protects again)
 * the pages written since the last checkpoint (docs/DECISIONS.md "Incremental images"). */

/* Runs in the manager with every thread of the program parked (ckpt_run.c), before the forked
 * writer is made: the writer inherits the bitmaps copy-on-write and only reads them. Nothing here
 * runs in the SIGSYS handler. A region counts as tracked only when its boundaries are those it had
 * at the previous checkpoint and it is still registered (the scan succeeds): a region mapped, moved,
 * split or merged since is saved whole, and tracked from this checkpoint on. */
#include "incr.h"

#include "ckpt.h"
#include "crac_layout.h"
#include "crac_pagemap_scan.h"
#include "lower_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The uapi of kernels 6.7 and later (linux/userfaultfd.h; PAGEMAP_SCAN: crac_pagemap_scan.h);
 * the build host's headers may be older. */
#define UFFD_API_ 0xAAULL
#define UFFD_FEATURE_WP_ASYNC_ (1ULL << 15)
#define UFFD_USER_MODE_ONLY_ 1
struct uffdio_api_ {
    uint64_t api, features, ioctls;
};
struct uffdio_range_ {
    uint64_t start, len;
};
struct uffdio_register_ {
    struct uffdio_range_ range;
    uint64_t mode, ioctls;
};
struct uffdio_writeprotect_ {
    struct uffdio_range_ range;
    uint64_t mode;
};
#define UFFDIO_API_ _IOWR(0xAA, 0x3F, struct uffdio_api_)
#define UFFDIO_REGISTER_ _IOWR(0xAA, 0x00, struct uffdio_register_)
#define UFFDIO_WRITEPROTECT_ _IOWR(0xAA, 0x06, struct uffdio_writeprotect_)
#define UFFDIO_REGISTER_MODE_WP_ 2ULL
#define UFFDIO_WRITEPROTECT_MODE_WP_ 1ULL

#define PAGE 4096UL
#define MAX_TRACKED 8192
#define SCAN_VEC 1024

struct tracked {
    uint64_t start, end;
    uint64_t *written; /* incremental this time: bit i, page i written since the parent */
};

static int full_every;              /* 0: off */
static pid_t owner;                 /* the process the state below belongs to (fork resets it) */
static int uffd = -1, pagemap = -1; /* the lower half's (lower_fds.c) */
static struct tracked prev[MAX_TRACKED], cur[MAX_TRACKED];
static int n_prev, n_cur;
static int prev_generation, base_generation, prev_valid;
static uint32_t prev_crc;
static uint64_t prev_size;
static struct crac_parent_rec parent_link;
static int is_incremental;

void incr_configure(int k) { full_every = k; }
int incr_full_every(void) { return full_every; }
const struct crac_parent_rec *incr_parent(void) { return is_incremental ? &parent_link : NULL; }
int incr_base(void) { return full_every ? base_generation : 0; }

static void disable(const char *why)
{
    fprintf(stderr, "crac: warning: --incremental is off: %s: %s; every checkpoint is full\n", why,
            strerror(errno));
    full_every = 0;
}

/* A forked child of the program (a process of the tree) inherits this state, but not the
 * registrations (no UFFD_FEATURE_EVENT_FORK): it starts over with a full checkpoint. */
static int ensure_open(void)
{
    if (owner != getpid()) {
        if (uffd >= 0)
            close(uffd);
        if (pagemap >= 0)
            close(pagemap);
        uffd = pagemap = -1;
        n_prev = prev_valid = 0;
        owner = getpid();
    }
    if (uffd >= 0)
        return 0;
    /* User-mode only: allowed without privilege (vm.unprivileged_userfaultfd 0), and an async
     * write-protect fault is resolved by the kernel before that matters (kernel writes too). */
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY_);
    if (fd < 0) {
        disable("no userfaultfd");
        return -1;
    }
    struct uffdio_api_ api = {UFFD_API_, UFFD_FEATURE_WP_ASYNC_, 0};
    if (ioctl(fd, UFFDIO_API_, &api) != 0) {
        close(fd);
        disable("the kernel has no asynchronous write-protect userfaultfd (6.7 or later)");
        return -1;
    }
    int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0) {
        close(fd);
        disable("cannot open /proc/self/pagemap");
        return -1;
    }
    uffd = lower_fd_adopt(fd);
    pagemap = lower_fd_adopt(pm);
    if (uffd < 0 || pagemap < 0) {
        disable("cannot keep its descriptors");
        return -1;
    }
    return 0;
}

/* The private anonymous writable mappings inside W, from /proc/self/maps: smaps would say
 * which are registered ("uw") and excluded from images ("dd"), but it walks every page table
 * entry of every mapping to count them, which at 2 GiB cost 80-300 ms of the pause, twice
 * (docs/PERFORMANCE.md, branch incr2). Whether a mapping is registered is what the scan says
 * (PM_SCAN_CHECK_WPASYNC refuses one that is not), so uw means "try the scan"; a mapping
 * excluded from images is tracked too (cheap: a write fault each page, once a checkpoint),
 * and image_core.c saves none of its pages anyway. */
struct vma {
    uint64_t start, end;
    int uw, dd, ok;
};

static int list_vmas(struct vma *v, int max)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[PATH_MAX + 256];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long s, e, off, ino;
        unsigned dmaj, dmin;
        char perms[8];
        int used = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &s, &e, perms, &off, &dmaj, &dmin, &ino,
                   &used) < 7)
            continue;
        const char *path = line + used;
        /* As image_core.c classifies them: no path, or a [bracketed] one, is anonymous. */
        int anon = path[0] == '\n' || path[0] == '\0' || path[0] == '[';
        if (s < CRAC_W_START || e > CRAC_W_END || !anon || perms[1] != 'w' || perms[3] != 'p' ||
            ino != 0)
            continue;
        if (n == max)
            break;
        v[n++] = (struct vma){s, e, 1, 0, 1};
    }
    fclose(f);
    return n;
}

/* The pages of [start, end) written since they were protected, protected again; -1 when the
 * range is not (all) tracked. */
static int scan(uint64_t start, uint64_t end, uint64_t *bits)
{
    static struct page_region_ vec[SCAN_VEC];
    for (uint64_t at = start; at < end;) {
        struct pm_scan_arg_ a = {sizeof(a), PM_SCAN_WP_MATCHING_ | PM_SCAN_CHECK_WPASYNC_,
                                 at,        end,
                                 0,         (uint64_t)(uintptr_t)vec,
                                 SCAN_VEC,  0,
                                 0,         PAGE_IS_WRITTEN_,
                                 0,         PAGE_IS_WRITTEN_};
        long n = ioctl(pagemap, PAGEMAP_SCAN_, &a);
        if (n < 0 || a.walk_end <= at || a.walk_end > end)
            return -1;
        for (long i = 0; bits && i < n; i++)
            for (uint64_t p = (vec[i].start - start) / PAGE; p < (vec[i].end - start) / PAGE; p++)
                bits[p / 64] |= 1ULL << (p % 64);
        at = a.walk_end;
    }
    return 0;
}

static int arm(uint64_t start, uint64_t end)
{
    struct uffdio_register_ reg = {{start, end - start}, UFFDIO_REGISTER_MODE_WP_, 0};
    struct uffdio_writeprotect_ wp = {{start, end - start}, UFFDIO_WRITEPROTECT_MODE_WP_};
    return ioctl(uffd, UFFDIO_REGISTER_, &reg) == 0 && ioctl(uffd, UFFDIO_WRITEPROTECT_, &wp) == 0
               ? 0
               : -1;
}

static const struct tracked *find(const struct tracked *t, int n, uint64_t start, uint64_t end)
{
    for (int i = 0; i < n; i++)
        if (t[i].start == start && t[i].end == end)
            return &t[i];
    return NULL;
}

static void clear_cur(void)
{
    for (int i = 0; i < n_cur; i++)
        free(cur[i].written);
    n_cur = 0;
}

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int incr_prepare(int generation)
{
    static struct vma v[MAX_TRACKED];
    static int timing = -1;
    if (timing < 0)
        timing = getenv("CRAC_TIMING") != NULL;
    double t0 = timing ? ms_now() : 0, t_list = 0, t_scan = 0;
    uint64_t scanned_bytes = 0;
    is_incremental = 0;
    clear_cur();
    if (!full_every || ensure_open() != 0)
        return 0;
    int incremental = prev_valid && prev_generation == generation - 1 &&
                      generation - base_generation < full_every;
    int n = list_vmas(v, MAX_TRACKED);
    if (n < 0)
        return 0;
    if (timing)
        t_list = ms_now();
    for (int i = 0; i < n; i++) {
        if (v[i].dd)
            continue;
        uint64_t pages = (v[i].end - v[i].start) / PAGE;
        const struct tracked *p = incremental ? find(prev, n_prev, v[i].start, v[i].end) : NULL;
        uint64_t *bits = p && v[i].uw ? calloc((pages + 63) / 64, 8) : NULL;
        /* Registered: its written pages protected again (listed when it was tracked). */
        int scanned = v[i].uw && scan(v[i].start, v[i].end, bits) == 0;
        scanned_bytes += scanned ? v[i].end - v[i].start : 0;
        if (!scanned) {
            free(bits);
            bits = NULL;
            if (arm(v[i].start, v[i].end) != 0)
                continue; /* cannot be tracked (a special mapping): saved whole each time */
        }
        if (bits && n_cur < MAX_TRACKED)
            cur[n_cur++] = (struct tracked){v[i].start, v[i].end, bits};
        else
            free(bits);
    }
    /* The regions as the image records them: registering may have merged neighbours. */
    if (timing)
        t_scan = ms_now();
    n = list_vmas(v, MAX_TRACKED);
    n_prev = 0;
    for (int i = 0; i < n; i++)
        if (v[i].uw && !v[i].dd)
            prev[n_prev++] = (struct tracked){v[i].start, v[i].end, NULL};
    if (incremental) {
        parent_link =
            (struct crac_parent_rec){prev_generation, base_generation, prev_crc, 0, prev_size};
        is_incremental = 1;
    }
    if (timing) /* CRAC_TIMING=1: the part of the pause this takes (docs/PERFORMANCE.md) */
        fprintf(stderr,
                "crac: timing (incremental): generation %d: list %.2f ms, scan %.2f ms (%llu "
                "MiB), list again %.2f ms\n",
                generation, t_list - t0, t_scan - t_list, (unsigned long long)(scanned_bytes >> 20),
                ms_now() - t_scan);
    return is_incremental;
}

const uint64_t *incr_written(uint64_t start, uint64_t end)
{
    if (!is_incremental)
        return NULL;
    const struct tracked *t = find(cur, n_cur, start, end);
    return t ? t->written : NULL;
}

void incr_published(int generation, uint32_t header_crc, uint64_t core_size)
{
    if (!full_every)
        return;
    if (!is_incremental)
        base_generation = generation;
    prev_generation = generation;
    prev_crc = header_crc;
    prev_size = core_size;
    prev_valid = 1;
    is_incremental = 0;
    clear_cur();
}

/* The pages were protected again for a generation that is not there: the next one is full. */
void incr_abandoned(void)
{
    prev_valid = 0;
    is_incremental = 0;
    clear_cur();
}
