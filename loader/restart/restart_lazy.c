/* restart_lazy.c — `crac restart --lazy`: anonymous private regions of W registered with a
 * userfaultfd (MISSING) instead of read; one lower-half thread serves their faults from upper.core
 * and prefetches the rest in address order, checking each region's CRC-32C (docs/DECISIONS.md). */
#include "restart_lazy.h"

#include "crc32c.h"
#include "image_compress.h"
#include "lower_fds.h"
#include "lower_threads.h"
#include "page_zero.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096UL
#define BLOCK (1UL << 20)  /* a prefetch step: one read, then the pending faults */
#define FAULT_PAGES 16     /* a fault in a plain region brings back this aligned run */
#define EXIT_LAZY_FAILED 2 /* EXIT_REFUSED, as any other restart failure */

int restart_lazy_wanted;
volatile int32_t restart_lazy_pending;

struct chunk_ix {
    struct crac_chunk_hdr h;
    uint64_t data_at;
};

struct lazy_region {
    uint64_t start, end, core_offset;
    uint32_t crc32c, saved_pages;
    int compressed;
    unsigned char *removed; /* pages the program dropped (MADV_DONTNEED...): zero, never filled */
    /* Compressed: the chunks indexed so far, in order (the index grows as faults and the
     * prefetcher need it; ix walks the headers). */
    struct chunk_ix *chunks;
    uint64_t n_chunks, cap_chunks;
    struct cz_reader ix;
    int ix_done;
};

static struct lazy_region *regions;
static size_t n_regions, cap_regions;
static int uffd = -1, core_fd = -1;
static uint64_t core_size;
static char image_path[PATH_MAX + 32];
static unsigned char *buf;    /* BLOCK: the prefetcher's and the fault server's pages */
static struct cz_reader data; /* reads a chunk's pages (its scratch buffer) */
static int delay_ms;

static int open_uffd(void)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { /* without CAP_SYS_PTRACE and vm.unprivileged_userfaultfd: the device node */
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev >= 0) {
            fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
            close(dev);
        }
    }
    if (fd < 0)
        return -1;
    /* REMOVE: a page the program drops with madvise must read as zero after, not as the
     * image's (its fault would come back here). The madvise waits until the event is read. */
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_EVENT_REMOVE};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        close(fd);
        return -1;
    }
    return lower_fd_adopt(fd);
}

int restart_lazy_take(const struct crac_region_rec *r, int core, char *err, size_t errlen)
{
    if (!restart_lazy_wanted || r->kind != CRAC_REGION_ANON || !r->core_offset ||
        /* an incremental region is filled from its chain, eagerly (restart_chain.c) */
        (r->flags & (CRAC_REGION_OUTSIDE_W | CRAC_REGION_DONTDUMP | CRAC_REGION_INCREMENTAL)) ||
        (r->prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE))
        return 0;
    if (uffd < 0) {
        if (uffd == -2) /* tried: not on this machine */
            return 0;
        if ((uffd = open_uffd()) < 0) {
            fprintf(stderr,
                    "crac: warning: lazy restart needs a userfaultfd, which this process may not "
                    "open (%s): memory is read now\n",
                    strerror(errno));
            uffd = -2;
            return 0;
        }
        core_fd = lower_fd_adopt(fcntl(core, F_DUPFD_CLOEXEC, 0));
        struct stat st;
        if (core_fd < 0 || fstat(core_fd, &st) != 0 || !(buf = malloc(BLOCK))) {
            snprintf(err, errlen, "lazy restart: %s", strerror(errno));
            return -1;
        }
        core_size = (uint64_t)st.st_size;
    }
    if (n_regions == cap_regions) {
        size_t cap = cap_regions ? 2 * cap_regions : 64;
        struct lazy_region *n = realloc(regions, cap * sizeof(*n));
        if (!n) {
            snprintf(err, errlen, "lazy restart: out of memory");
            return -1;
        }
        regions = n;
        cap_regions = cap;
    }
    struct uffdio_register reg = {.range = {r->start, r->end - r->start},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
        snprintf(err, errlen, "lazy restart: cannot register 0x%lx-0x%lx with the userfaultfd: %s",
                 (unsigned long)r->start, (unsigned long)r->end, strerror(errno));
        return -1;
    }
    struct lazy_region *l = &regions[n_regions++];
    *l = (struct lazy_region){.start = r->start,
                              .end = r->end,
                              .core_offset = r->core_offset,
                              .crc32c = r->crc32c,
                              .saved_pages = r->saved_pages,
                              .compressed = (r->flags & CRAC_REGION_COMPRESSED) != 0};
    if (l->compressed)
        cz_read_begin(&l->ix, core_fd, r->core_offset, (r->end - r->start) / PAGE, NULL);
    __atomic_store_n(&restart_lazy_pending, 1, __ATOMIC_RELEASE);
    return 1;
}

/* ---- the server thread (a lower-half pthread: the lower libc's TLS, never the program's) ---- */

/* The image cannot give what the program needs: it must not go on with memory it does not have,
 * nor leave a thread waiting on a fault forever. */
__attribute__((noreturn, format(printf, 2, 3))) static void fatal(const struct lazy_region *l,
                                                                  const char *fmt, ...)
{
    char why[256], line[PATH_MAX + 512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    struct stat st;
    if (fstat(core_fd, &st) == 0 && (uint64_t)st.st_size < core_size)
        snprintf(why, sizeof(why), "the file was truncated to %lld of its %llu bytes",
                 (long long)st.st_size, (unsigned long long)core_size);
    int n = snprintf(line, sizeof(line),
                     "crac: error: lazy restart: region 0x%lx-0x%lx (anonymous) of %s: %s; the "
                     "restarted program is ended\n",
                     l ? (unsigned long)l->start : 0UL, l ? (unsigned long)l->end : 0UL, image_path,
                     why);
    if (write(2, line, (size_t)n) < 0) {
        /* nothing better to do: the exit status still says it */
    }
    _exit(EXIT_LAZY_FAILED);
}

static int page_removed(const struct lazy_region *l, uint64_t page)
{
    return l->removed && (l->removed[page / 8] >> (page % 8)) & 1;
}

/* UFFDIO_COPY of n pages of src to dst, page index `first` of l: pages already there (the
 * program wrote them, a fault brought them) and pages the program dropped are left as they are;
 * a range no longer registered (unmapped, mapped over) is skipped. */
static void copy_pages(const struct lazy_region *l, uint64_t first, uint64_t n,
                       const unsigned char *src)
{
    uint64_t i = 0;
    while (i < n) {
        if (page_removed(l, first + i)) {
            i++;
            continue;
        }
        uint64_t run = 1;
        while (i + run < n && !page_removed(l, first + i + run))
            run++;
        struct uffdio_copy c = {.dst = l->start + (first + i) * PAGE,
                                .src = (uint64_t)(src + i * PAGE),
                                .len = run * PAGE};
        if (ioctl(uffd, UFFDIO_COPY, &c) == 0) {
            i += run;
            continue;
        }
        int e = errno;
        if (c.copy > 0) {
            i += (uint64_t)c.copy / PAGE;
            continue;
        }
        if (e == EAGAIN || e == EINTR)
            continue;
        if (e == EEXIST) {
            i++;
            continue;
        }
        if (e == ENOENT && run > 1) { /* a VMA boundary inside the run (mprotect): one page */
            struct uffdio_copy one = {.dst = c.dst, .src = c.src, .len = PAGE};
            if (ioctl(uffd, UFFDIO_COPY, &one) != 0 && errno != EEXIST && errno != ENOENT)
                fatal(l, "cannot place its pages: %s", strerror(errno));
            i++;
            continue;
        }
        if (e == ENOENT) {
            i++;
            continue;
        }
        if (e == ESRCH) /* the process is exiting */
            _exit(0);
        fatal(l, "cannot place its pages: %s", strerror(e));
    }
}

static int read_full(unsigned char *dst, uint64_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(core_fd, dst, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        dst += n;
        len -= (uint64_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

/* Index the next chunk header of a compressed region: 1, or 0 at its end marker. */
static int index_one(struct lazy_region *l)
{
    if (l->ix_done)
        return 0;
    struct crac_chunk_hdr h;
    int more = cz_read_next(&l->ix, &h);
    if (more < 0)
        fatal(l, "a compressed chunk header is unreadable or damaged");
    if (more == 0) {
        l->ix_done = 1;
        return 0;
    }
    if (l->n_chunks == l->cap_chunks) {
        uint64_t cap = l->cap_chunks ? 2 * l->cap_chunks : 64;
        struct chunk_ix *n = realloc(l->chunks, cap * sizeof(*n));
        if (!n)
            fatal(l, "out of memory");
        l->chunks = n;
        l->cap_chunks = cap;
    }
    l->chunks[l->n_chunks++] = (struct chunk_ix){h, l->ix.data_at};
    return 1;
}

/* The chunk holding page `page` of a compressed region, indexing headers up to it; -1 when the
 * page is in none (a zero page). */
static int64_t find_chunk(struct lazy_region *l, uint64_t page)
{
    uint64_t lo = 0, hi = l->n_chunks;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        const struct crac_chunk_hdr *h = &l->chunks[mid].h;
        if (page < h->first_page)
            hi = mid;
        else if (page >= h->first_page + h->n_pages)
            lo = mid + 1;
        else
            return (int64_t)mid;
    }
    /* Not among those indexed: only a chunk after the last one can hold it. */
    while (!l->n_chunks ||
           l->chunks[l->n_chunks - 1].h.first_page + l->chunks[l->n_chunks - 1].h.n_pages <= page) {
        if (!index_one(l))
            return -1;
        const struct crac_chunk_hdr *h = &l->chunks[l->n_chunks - 1].h;
        if (page >= h->first_page && page < h->first_page + h->n_pages)
            return (int64_t)(l->n_chunks - 1);
    }
    return -1;
}

/* Chunk i of l decompressed into buf and checked against its CRC-32C. */
static void load_chunk(struct lazy_region *l, uint64_t i)
{
    char err[256] = "";
    data.fd = core_fd;
    data.data_at = l->chunks[i].data_at;
    int c = cz_read_pages(&data, &l->chunks[i].h, buf, err, sizeof(err));
    if (c == -2)
        fatal(l, "%s", err);
    if (c != 0)
        fatal(l, "a compressed chunk is unreadable or fails its CRC-32C");
}

static void serve_fault(uint64_t addr)
{
    addr &= ~(PAGE - 1);
    size_t lo = 0, hi = n_regions;
    struct lazy_region *l = NULL;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (addr < regions[mid].start)
            hi = mid;
        else if (addr >= regions[mid].end)
            lo = mid + 1;
        else {
            l = &regions[mid];
            break;
        }
    }
    uint64_t page = l ? (addr - l->start) / PAGE : 0;
    int64_t ci = -1;
    if (l && !page_removed(l, page) && l->compressed)
        ci = find_chunk(l, page);
    if (!l || page_removed(l, page) || (l->compressed && ci < 0)) {
        /* Not the image's (dropped by the program, or a zero page of a compressed region). */
        struct uffdio_zeropage z = {.range = {addr, PAGE}};
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) != 0 && errno != EEXIST && errno != ENOENT &&
            errno != EAGAIN)
            fatal(l, "cannot place a zero page: %s", strerror(errno));
        return;
    }
    if (l->compressed) {
        load_chunk(l, (uint64_t)ci);
        copy_pages(l, l->chunks[ci].h.first_page, l->chunks[ci].h.n_pages, buf);
        return;
    }
    uint64_t n_pages = (l->end - l->start) / PAGE;
    uint64_t first = page & ~(uint64_t)(FAULT_PAGES - 1);
    uint64_t n = first + FAULT_PAGES > n_pages ? n_pages - first : FAULT_PAGES;
    if (read_full(buf, n * PAGE, l->core_offset + first * PAGE) != 0)
        fatal(l, "cannot read it: %s", strerror(errno));
    copy_pages(l, first, n, buf);
}

static void on_remove(uint64_t start, uint64_t end)
{
    for (size_t i = 0; i < n_regions; i++) {
        struct lazy_region *l = &regions[i];
        if (end <= l->start || start >= l->end)
            continue;
        uint64_t n_pages = (l->end - l->start) / PAGE;
        if (!l->removed && !(l->removed = calloc((n_pages + 7) / 8, 1)))
            fatal(l, "out of memory");
        uint64_t a = (start > l->start ? start : l->start) - l->start;
        uint64_t b = (end < l->end ? end : l->end) - l->start;
        for (uint64_t p = a / PAGE; p < (b + PAGE - 1) / PAGE; p++)
            l->removed[p / 8] |= (unsigned char)(1u << (p % 8));
    }
}

/* Serve what is queued; wait up to timeout_ms for the first message. */
static void serve(int timeout_ms)
{
    struct pollfd p = {uffd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0)
        return;
    struct uffd_msg msg[16];
    for (;;) {
        ssize_t n = read(uffd, msg, sizeof(msg));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
            if (msg[i].event == UFFD_EVENT_PAGEFAULT)
                serve_fault(msg[i].arg.pagefault.address);
            else if (msg[i].event == UFFD_EVENT_REMOVE)
                on_remove(msg[i].arg.remove.start, msg[i].arg.remove.end);
        }
    }
}

/* After n bytes prefetched: the faults queued meanwhile, and the test knob's pause once per
 * BLOCK (not per step: a sparse region has many small extents). */
static void prefetch_step(uint64_t n)
{
    static uint64_t since_pause;
    since_pause += n;
    int pause = since_pause >= BLOCK ? delay_ms : 0;
    if (pause)
        since_pause = 0;
    serve(pause);
}

static void check_crc(const struct lazy_region *l, uint32_t crc, uint32_t pages)
{
    if (crc != l->crc32c || pages != l->saved_pages)
        fatal(l, "it fails its checksum (the program already ran with it)");
}

/* A plain region: its data extents in address order, read BLOCK at a time, their non-zero pages
 * checked as the eager restart checks them (restart_memory.c fill_anon). */
static void prefetch_plain(struct lazy_region *l)
{
    uint64_t len = l->end - l->start, end = l->core_offset + len;
    uint32_t crc = 0, pages = 0;
    for (uint64_t pos = l->core_offset; pos < end;) {
        off_t d = lseek(core_fd, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= end)
            break;
        uint64_t data_at = (uint64_t)d & ~(PAGE - 1);
        off_t h = lseek(core_fd, d, SEEK_HOLE);
        uint64_t stop = h < 0 || (uint64_t)h > end ? end : ((uint64_t)h + PAGE - 1) & ~(PAGE - 1);
        if (stop > end)
            stop = end;
        for (uint64_t at = data_at; at < stop;) {
            uint64_t n = stop - at < BLOCK ? stop - at : BLOCK;
            if (read_full(buf, n, at) != 0)
                fatal(l, "cannot read it: %s", strerror(errno));
            uint64_t first = (at - l->core_offset) / PAGE;
            for (uint64_t p = 0; p < n / PAGE; p++) {
                if (page_is_zero(buf + p * PAGE))
                    continue;
                uint64_t index = first + p;
                crc = crc32c_update(crc, &index, 8);
                crc = crc32c_update(crc, buf + p * PAGE, PAGE);
                pages++;
            }
            copy_pages(l, first, n / PAGE, buf);
            at += n;
            prefetch_step(n);
        }
        pos = stop;
    }
    check_crc(l, crc, pages);
}

static void prefetch_compressed(struct lazy_region *l)
{
    uint32_t crc = 0, pages = 0;
    for (uint64_t i = 0; i < l->n_chunks || index_one(l); i++) {
        load_chunk(l, i);
        const struct crac_chunk_hdr *h = &l->chunks[i].h;
        copy_pages(l, h->first_page, h->n_pages, buf);
        crc = crc32c_update(crc, &h->crc32c, 4);
        pages += h->n_pages;
        prefetch_step((uint64_t)h->n_pages * PAGE);
    }
    check_crc(l, crc, pages);
}

static void *server_main(void *arg)
{
    (void)arg;
    lower_threads_register((pid_t)syscall(SYS_gettid));
    for (size_t i = 0; i < n_regions; i++) {
        serve(0);
        if (regions[i].compressed)
            prefetch_compressed(&regions[i]);
        else
            prefetch_plain(&regions[i]);
    }
    /* Every page is back (or was never saved: a zero page on the next touch, as always once the
     * userfaultfd is closed). */
    close(uffd);
    lower_fd_forget(uffd);
    close(core_fd);
    lower_fd_forget(core_fd);
    uffd = core_fd = -1;
    for (size_t i = 0; i < n_regions; i++) {
        free(regions[i].removed);
        free(regions[i].chunks);
    }
    free(regions);
    free(buf);
    cz_read_end(&data);
    __atomic_store_n(&restart_lazy_pending, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &restart_lazy_pending, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, 0, 0, 0);
    lower_threads_unregister((pid_t)syscall(SYS_gettid));
    return NULL;
}

static int by_start(const void *a, const void *b)
{
    const struct lazy_region *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int restart_lazy_start(const char *gen_dir, char *err, size_t errlen)
{
    if (!n_regions)
        return 0;
    snprintf(image_path, sizeof(image_path), "%s/upper.core", gen_dir);
    /* A test knob (tests/test_lazy_restart.py): the prefetcher waits this long between steps,
     * serving faults meanwhile, so a test can act while pages are still missing. */
    const char *d = getenv("CRAC_LAZY_PREFETCH_DELAY_MS");
    delay_ms = d ? atoi(d) : 0;
    if (delay_ms < 0)
        delay_ms = 0;
    qsort(regions, n_regions, sizeof(*regions), by_start);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, server_main, NULL);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        snprintf(err, errlen, "lazy restart: cannot start its thread: %s", strerror(e));
        return -1;
    }
    return 0;
}
