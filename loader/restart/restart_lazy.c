/* restart_lazy.c — `crac restart --lazy`: anonymous private regions of W registered with a
 * userfaultfd (MISSING) instead of read; one lower-half thread serves their faults from upper.core
 * while prefetch threads bring back the rest, each region's CRC-32C checked (docs/DECISIONS.md). */
#include "restart_lazy.h"
#include "image_read.h"

#include "crc32c.h"
#include "crc32c_combine.h"
#include "image_compress.h"
#include "lower_fds.h"
#include "lower_threads.h"
#include "page_zero.h"
#include "restart_stage.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define BLOCK STAGE_PIECE  /* a prefetch step: one read, its CRC, one UFFDIO_MOVE */
#define AHEAD (8 * BLOCK)  /* readahead asked this far ahead of a prefetch step (a cold cache) */
#define FAULT_PAGES 16     /* a fault in a plain region brings back this aligned run */
#define MAX_WORKERS 8      /* prefetch threads at most (CRAC_LAZY_PREFETCH_THREADS) */
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
    /* Pages the program dropped (MADV_DONTNEED...): zero, never filled. Written by the server
     * with events_lock held for writing, read by the copiers with it held for reading. */
    unsigned char *removed;
    /* Plain: BLOCK-sized steps aligned in the address space (a step's pieces move as huge
     * pages; the first and last may be shorter), claimed in order by the prefetch threads (next_block), each
     * step's CRC-32C of its (index, page) pairs and its page count kept until the last step is
     * done (blocks_done), which combines them in order and checks the region. */
    uint64_t n_blocks, next_block, blocks_done;
    uint32_t *block_crc, *block_pages;
    /* Compressed (all under ix_lock): the chunks indexed so far, in order (the index grows as
     * faults and the prefetchers need it; ix walks the headers); next_chunk the next one to
     * prefetch; the CRC of the chunks' CRCs folded in as they are claimed (in order). */
    struct chunk_ix *chunks;
    uint64_t n_chunks, cap_chunks, next_chunk;
    struct cz_reader ix;
    int ix_done, checked;
    uint32_t z_crc, z_pages;
};

/* What one thread reads and decompresses into: the server has one, each prefetcher one. */
struct pagebuf {
    unsigned char *buf; /* BLOCK */
    struct cz_reader data;
    struct stage stage; /* a prefetcher's: plain regions are read into it and moved */
};

static struct lazy_region *regions;
static size_t n_regions, cap_regions;
static int uffd = -1, core_fd = -1, done_fd = -1;
static int can_move; /* the kernel has UFFDIO_MOVE (Linux 6.8) */
static uint64_t core_size;
static char image_path[PATH_MAX + 32];
static int delay_ms, n_workers;
static int workers_left;
static int failing;
static int32_t fault_seq;            /* +1 each time the server served faults (prefetch_pause) */
static pthread_rwlock_t events_lock; /* see struct lazy_region's removed */
static pthread_mutex_t ix_lock = PTHREAD_MUTEX_INITIALIZER;

static int open_uffd(void)
{
    /* REMOVE: a page the program drops with madvise must read as zero after, not as the
     * image's (its fault would come back here). The madvise waits until the event is read. */
    int fd = stage_uffd_open(UFFD_FEATURE_EVENT_REMOVE, &can_move);
    can_move = can_move && stage_wanted(); /* else the staged pieces are copied (UFFDIO_COPY) */
    return fd < 0 ? -1 : lower_fd_adopt(fd);
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
        if (core_fd < 0 || fstat(core_fd, &st) != 0) {
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
    uint64_t n_blocks = (((r->end + BLOCK - 1) & ~(BLOCK - 1)) - (r->start & ~(BLOCK - 1))) / BLOCK;
    uint32_t *block_crc = NULL, *block_pages = NULL;
    if (!(r->flags & CRAC_REGION_COMPRESSED) &&
        (!(block_crc = calloc(n_blocks, sizeof(uint32_t))) ||
         !(block_pages = calloc(n_blocks, sizeof(uint32_t))))) {
        free(block_crc);
        snprintf(err, errlen, "lazy restart: out of memory");
        return -1;
    }
    struct uffdio_register reg = {.range = {r->start, r->end - r->start},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
        snprintf(err, errlen, "lazy restart: cannot register 0x%lx-0x%lx with the userfaultfd: %s",
                 (unsigned long)r->start, (unsigned long)r->end, strerror(errno));
        free(block_crc);
        free(block_pages);
        return -1;
    }
    struct lazy_region *l = &regions[n_regions++];
    *l = (struct lazy_region){.start = r->start,
                              .end = r->end,
                              .core_offset = r->core_offset,
                              .crc32c = r->crc32c,
                              .saved_pages = r->saved_pages,
                              .compressed = (r->flags & CRAC_REGION_COMPRESSED) != 0,
                              .n_blocks = n_blocks,
                              .block_crc = block_crc,
                              .block_pages = block_pages};
    if (l->compressed)
        cz_read_begin(&l->ix, core_fd, r->core_offset, (r->end - r->start) / PAGE, NULL);
    __atomic_store_n(&restart_lazy_pending, 1, __ATOMIC_RELEASE);
    return 1;
}

/* ---- the threads (lower-half pthreads: the lower libc's TLS, never the program's) ---- */

/* The image cannot give what the program needs: it must not go on with memory it does not have,
 * nor leave a thread waiting on a fault forever. Once per process: a second thread that finds
 * the same fault waits for the first one's exit (one line on stderr). */
__attribute__((noreturn, format(printf, 2, 3))) static void fatal(const struct lazy_region *l,
                                                                  const char *fmt, ...)
{
    if (__atomic_exchange_n(&failing, 1, __ATOMIC_ACQ_REL))
        for (;;)
            pause();
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
 * a range no longer registered (unmapped, mapped over) is skipped. While an madvise's REMOVE
 * event is not yet read every copy fails with EAGAIN: a prefetcher (server == 0) waits for the
 * server to read it; the server itself answers 1 (serve what it reads, then try again). Each
 * copy is made with events_lock held for reading, so a page whose REMOVE was read is marked
 * before a copy can see it (the server marks it with the lock held for writing). 0: done. */
static int copy_pages(const struct lazy_region *l, uint64_t first, uint64_t n,
                      const unsigned char *src, int server)
{
    uint64_t i = 0;
    while (i < n) {
        if (!server)
            pthread_rwlock_rdlock(&events_lock);
        uint64_t run = 0;
        while (i < n && page_removed(l, first + i))
            i++;
        while (i + run < n && !page_removed(l, first + i + run))
            run++;
        if (!run) {
            if (!server)
                pthread_rwlock_unlock(&events_lock);
            break;
        }
        struct uffdio_copy c = {.dst = l->start + (first + i) * PAGE,
                                .src = (uint64_t)(src + i * PAGE),
                                .len = run * PAGE};
        int e = ioctl(uffd, UFFDIO_COPY, &c) == 0 ? 0 : errno;
        uint64_t done = !e ? run : c.copy > 0 ? (uint64_t)c.copy / PAGE : 0;
        if (!done && e == ENOENT && run > 1) { /* a VMA boundary inside the run (mprotect) */
            struct uffdio_copy one = {.dst = c.dst, .src = c.src, .len = PAGE};
            e = ioctl(uffd, UFFDIO_COPY, &one) == 0 ? 0 : errno;
            if (!e)
                done = 1;
        }
        if (!server)
            pthread_rwlock_unlock(&events_lock);
        if (done) {
            i += done;
            continue;
        }
        if (e == EAGAIN) {
            if (server)
                return 1;
            struct timespec ts = {0, 100000}; /* the server reads the event at once */
            nanosleep(&ts, NULL);
            continue;
        }
        if (e == EINTR)
            continue;
        if (e == EEXIST || e == ENOENT) {
            i++;
            continue;
        }
        if (e == ESRCH) /* the process is exiting */
            _exit(0);
        fatal(l, "cannot place its pages: %s", strerror(e));
    }
    return 0;
}

/* Index the next chunk header of a compressed region (ix_lock held): 1, or 0 at its end. */
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

/* The chunk holding page `page` of a compressed region, indexing headers up to it (ix_lock
 * held); -1 when the page is in none (a zero page). */
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

/* Chunk c of l decompressed into pb's buffer and checked against its CRC-32C. */
static void load_chunk(const struct lazy_region *l, const struct chunk_ix *c, struct pagebuf *pb)
{
    char err[256] = "";
    pb->data.fd = core_fd;
    pb->data.data_at = c->data_at;
    int rc = cz_read_pages(&pb->data, &c->h, pb->buf, err, sizeof(err));
    if (rc == -2)
        fatal(l, "%s", err);
    if (rc != 0)
        fatal(l, "a compressed chunk is unreadable or fails its CRC-32C");
}

/* The server's fault: 0 served, 1 to be tried again once the events queued are read. */
static int serve_fault(uint64_t addr, struct pagebuf *pb)
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
    struct chunk_ix c = {.data_at = 0};
    int64_t ci = -1;
    if (l && !page_removed(l, page) && l->compressed) {
        pthread_mutex_lock(&ix_lock);
        if ((ci = find_chunk(l, page)) >= 0)
            c = l->chunks[ci];
        pthread_mutex_unlock(&ix_lock);
    }
    if (!l || page_removed(l, page) || (l->compressed && ci < 0)) {
        /* Not the image's (dropped by the program, or a zero page of a compressed region). */
        struct uffdio_zeropage z = {.range = {addr, PAGE}};
        if (ioctl(uffd, UFFDIO_ZEROPAGE, &z) == 0 || errno == EEXIST || errno == ENOENT)
            return 0;
        if (errno == EAGAIN)
            return 1;
        fatal(l, "cannot place a zero page: %s", strerror(errno));
    }
    if (l->compressed) {
        load_chunk(l, &c, pb);
        return copy_pages(l, c.h.first_page, c.h.n_pages, pb->buf, 1);
    }
    uint64_t n_pages = (l->end - l->start) / PAGE;
    uint64_t first = page & ~(uint64_t)(FAULT_PAGES - 1);
    uint64_t n = first + FAULT_PAGES > n_pages ? n_pages - first : FAULT_PAGES;
    if (image_pread_full(core_fd, pb->buf, n * PAGE, l->core_offset + first * PAGE) != 0)
        fatal(l, "cannot read it: %s", strerror(errno));
    return copy_pages(l, first, n, pb->buf, 1);
}

/* events_lock held for writing. */
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

/* Faults read but not served yet (a REMOVE event was pending), oldest first. */
static uint64_t *backlog;
static size_t backlog_n, backlog_cap;

/* Read every queued message (events_lock held for writing: the REMOVE marks are in place before
 * a prefetcher's copy can succeed again); faults go to the backlog. */
static void read_messages(void)
{
    struct uffd_msg msg[16];
    pthread_rwlock_wrlock(&events_lock);
    for (;;) {
        ssize_t n = read(uffd, msg, sizeof(msg));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
            if (msg[i].event == UFFD_EVENT_REMOVE) {
                on_remove(msg[i].arg.remove.start, msg[i].arg.remove.end);
                continue;
            }
            if (msg[i].event != UFFD_EVENT_PAGEFAULT)
                continue;
            if (backlog_n == backlog_cap) {
                size_t cap = backlog_cap ? 2 * backlog_cap : 64;
                uint64_t *b = realloc(backlog, cap * sizeof(*b));
                if (!b)
                    fatal(NULL, "out of memory");
                backlog = b;
                backlog_cap = cap;
            }
            backlog[backlog_n++] = msg[i].arg.pagefault.address;
        }
    }
    pthread_rwlock_unlock(&events_lock);
}

/* The server: faults as they come (never behind a prefetch step), and the program's REMOVE
 * events; ends when the prefetchers are done (done_fd), then closes the userfaultfd. */
static void *server_main(void *arg)
{
    struct pagebuf *pb = arg;
    lower_threads_register((pid_t)syscall(SYS_gettid));
    for (;;) {
        struct pollfd p[2] = {{uffd, POLLIN, 0}, {done_fd, POLLIN, 0}};
        /* With faults left over (an event was on its way), look again soon. */
        if (poll(p, 2, backlog_n ? 1 : -1) < 0 && errno != EINTR)
            fatal(NULL, "cannot wait for faults: %s", strerror(errno));
        read_messages();
        size_t done = 0;
        while (done < backlog_n && serve_fault(backlog[done], pb) == 0)
            done++;
        if (done && delay_ms) {
            __atomic_add_fetch(&fault_seq, 1, __ATOMIC_RELEASE);
            syscall(SYS_futex, &fault_seq, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, 0, 0, 0);
        }
        memmove(backlog, backlog + done, (backlog_n - done) * sizeof(*backlog));
        backlog_n -= done;
        if (!backlog_n && (p[1].revents & POLLIN))
            break;
    }
    /* Every page is back (or was never saved: a zero page on the next touch, as always once the
     * userfaultfd is closed; a thread still waiting on a fault is woken by the close). */
    close(uffd);
    lower_fd_forget(uffd);
    close(core_fd);
    lower_fd_forget(core_fd);
    close(done_fd);
    lower_fd_forget(done_fd);
    uffd = core_fd = done_fd = -1;
    for (size_t i = 0; i < n_regions; i++) {
        free(regions[i].removed);
        free(regions[i].chunks);
        free(regions[i].block_crc);
        free(regions[i].block_pages);
    }
    free(regions);
    free(backlog);
    free(pb->buf);
    cz_read_end(&pb->data);
    free(pb);
    __atomic_store_n(&restart_lazy_pending, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &restart_lazy_pending, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, 0, 0, 0);
    lower_threads_unregister((pid_t)syscall(SYS_gettid));
    return NULL;
}

/* The test knob: a pause per MiB of the whole prefetch (each of the n_workers threads pauses
 * n_workers times as long, once for each MiB it read), each cut short by a fault served
 * meanwhile (fault_seq), as the single thread's pause was: a program that keeps faulting gets
 * its memory sooner. Per MiB, not per step: the tests' delays were set for 1 MiB steps. */
#define PAUSE_STEP (1UL << 20)
static void prefetch_pause(uint64_t *since, uint64_t n)
{
    if (!delay_ms)
        return;
    long ms = (long)delay_ms * n_workers;
    for (*since += n; *since >= PAUSE_STEP; *since -= PAUSE_STEP) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        int32_t seq = __atomic_load_n(&fault_seq, __ATOMIC_ACQUIRE);
        syscall(SYS_futex, &fault_seq, 128 /* FUTEX_WAIT_PRIVATE */, seq, &ts, 0, 0);
    }
}

static void check_crc(const struct lazy_region *l, uint32_t crc, uint32_t pages)
{
    if (crc != l->crc32c || pages != l->saved_pages)
        fatal(l, "it fails its checksum (the program already ran with it)");
}

/* n_pages from page `first` of l, read into st: moved into place with UFFDIO_MOVE (no copy;
 * a whole huge page at once where the piece is one), and what the kernel refuses to move (a page
 * already there, one the program dropped, an event not yet read) copied as copy_pages does. */
static void place_staged(const struct lazy_region *l, uint64_t first, uint64_t n_pages,
                         const struct stage *st)
{
    uint64_t dst = l->start + first * PAGE, moved = 0;
    if (can_move) {
        pthread_rwlock_rdlock(&events_lock); /* as copy_pages: see struct lazy_region */
        int e = 0;
        if (!l->removed) {
            moved = stage_move(st, uffd, dst, n_pages * PAGE) / PAGE;
            e = errno;
        }
        pthread_rwlock_unlock(&events_lock);
        if (moved < n_pages && e == ESRCH) /* the process is exiting */
            _exit(0);
    }
    if (moved < n_pages)
        copy_pages(l, first + moved, n_pages - moved, stage_at(st, dst + moved * PAGE), 0);
}

/* Step b of a plain region (the part of it in the b-th huge page from the region's first): its
 * data extents read into the staging buffer, their non-zero pages checked as the eager restart
 * checks them (restart_memory.c fill_anon), from CRC 0, then moved in place; the last step done
 * combines the steps' CRCs in address order into the region's. The bytes read (holes are not). */
static uint64_t prefetch_block(struct lazy_region *l, uint64_t b, struct pagebuf *pb)
{
    uint64_t base = (l->start & ~(BLOCK - 1)) + b * BLOCK;
    uint64_t from = base > l->start ? base : l->start;
    uint64_t to = base + BLOCK < l->end ? base + BLOCK : l->end;
    uint64_t end = l->core_offset + (l->end - l->start);
    uint64_t lo = l->core_offset + (from - l->start), hi = l->core_offset + (to - l->start);
    if (hi + AHEAD < end) /* no-op with the image in the page cache; overlaps I/O without */
        posix_fadvise(core_fd, (off_t)(hi + AHEAD - BLOCK), (off_t)BLOCK, POSIX_FADV_WILLNEED);
    uint32_t crc = 0, pages = 0;
    uint64_t read = 0;
    for (uint64_t pos = lo; pos < hi;) {
        off_t d = lseek(core_fd, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= hi)
            break;
        uint64_t data_at = (uint64_t)d & ~(PAGE - 1);
        off_t h = lseek(core_fd, d, SEEK_HOLE);
        uint64_t stop = h < 0 || (uint64_t)h > hi ? hi : ((uint64_t)h + PAGE - 1) & ~(PAGE - 1);
        if (stop > hi)
            stop = hi;
        uint64_t n = stop - data_at;
        uint64_t first = (data_at - l->core_offset) / PAGE;
        if (stage_read(&pb->stage, core_fd, data_at, l->start + first * PAGE, n, first, &crc,
                       &pages) != 0)
            fatal(l, "cannot read it: %s", strerror(errno));
        place_staged(l, first, n / PAGE, &pb->stage);
        read += n;
        pos = stop;
    }
    l->block_crc[b] = crc;
    l->block_pages[b] = pages;
    if (__atomic_add_fetch(&l->blocks_done, 1, __ATOMIC_ACQ_REL) != l->n_blocks)
        return read;
    uint32_t all = 0, all_pages = 0;
    for (uint64_t i = 0; i < l->n_blocks; i++) {
        all = crc32c_combine(all, l->block_crc[i], (uint64_t)l->block_pages[i] * (PAGE + 8));
        all_pages += l->block_pages[i];
    }
    check_crc(l, all, all_pages);
    return read;
}

/* The next chunk of a compressed region to prefetch (its CRC folded into the region's in chunk
 * order), 0 when none is left; the region is checked when its end marker is reached. */
static int claim_chunk(struct lazy_region *l, struct chunk_ix *c)
{
    pthread_mutex_lock(&ix_lock);
    int got = l->next_chunk < l->n_chunks || index_one(l);
    if (got) {
        *c = l->chunks[l->next_chunk++];
        l->z_crc = crc32c_update(l->z_crc, &c->h.crc32c, 4);
        l->z_pages += c->h.n_pages;
    } else if (!l->checked) {
        l->checked = 1;
        check_crc(l, l->z_crc, l->z_pages);
    }
    pthread_mutex_unlock(&ix_lock);
    return got;
}

/* A prefetcher: the regions in address order, each thread taking the next step of the region
 * (plain: BLOCK; compressed: a chunk) until none is left. The last one to finish wakes the
 * server. A chunk's pages are checked when it is loaded; the region's CRC of the chunk CRCs
 * when its end marker is claimed, so every region is checked before the last prefetcher ends. */
static void *worker_main(void *arg)
{
    struct pagebuf *pb = arg;
    lower_threads_register((pid_t)syscall(SYS_gettid));
    uint64_t since = 0;
    for (size_t i = 0; i < n_regions; i++) {
        struct lazy_region *l = &regions[i];
        if (l->compressed) {
            struct chunk_ix c;
            while (claim_chunk(l, &c)) {
                load_chunk(l, &c, pb);
                copy_pages(l, c.h.first_page, c.h.n_pages, pb->buf, 0);
                prefetch_pause(&since, (uint64_t)c.h.n_pages * PAGE);
            }
            continue;
        }
        uint64_t b;
        while ((b = __atomic_fetch_add(&l->next_block, 1, __ATOMIC_RELAXED)) < l->n_blocks) {
            prefetch_pause(&since, prefetch_block(l, b, pb));
        }
    }
    free(pb->buf);
    cz_read_end(&pb->data);
    stage_end(&pb->stage);
    free(pb);
    if (__atomic_sub_fetch(&workers_left, 1, __ATOMIC_ACQ_REL) == 0) {
        uint64_t one = 1;
        if (write(done_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
            fatal(NULL, "cannot wake the fault server: %s", strerror(errno));
    }
    lower_threads_unregister((pid_t)syscall(SYS_gettid));
    return NULL;
}

static int by_start(const void *a, const void *b)
{
    const struct lazy_region *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int start_thread(void *(*fn)(void *), int staged, char *err, size_t errlen)
{
    struct pagebuf *pb = calloc(1, sizeof(*pb));
    if (!pb || !(pb->buf = malloc(BLOCK)) || (staged && stage_init(&pb->stage) != 0)) {
        if (pb)
            free(pb->buf);
        free(pb);
        snprintf(err, errlen, "lazy restart: out of memory");
        return -1;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, fn, pb);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        free(pb->buf);
        stage_end(&pb->stage);
        free(pb);
        snprintf(err, errlen, "lazy restart: cannot start its thread: %s", strerror(e));
        return -1;
    }
    return 0;
}

int restart_lazy_start(const char *gen_dir, char *err, size_t errlen)
{
    if (!n_regions)
        return 0;
    snprintf(image_path, sizeof(image_path), "%s/upper.core", gen_dir);
    /* A test knob (tests/test_lazy_restart.py): the prefetch waits this long per MiB, faults
     * served meanwhile, so a test can act while pages are still missing. */
    const char *d = getenv("CRAC_LAZY_PREFETCH_DELAY_MS");
    delay_ms = d ? atoi(d) : 0;
    if (delay_ms < 0)
        delay_ms = 0;
    /* One prefetcher per CPU (up to 4): the copy into new pages is most of the time, and the
     * server thread waits for faults. CRAC_LAZY_PREFETCH_THREADS sets the number (tests). */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *w = getenv("CRAC_LAZY_PREFETCH_THREADS");
    n_workers = w ? atoi(w) : cpus < 1 ? 1 : cpus > 4 ? 4 : (int)cpus;
    if (n_workers < 1 || n_workers > MAX_WORKERS) {
        snprintf(err, errlen, "lazy restart: CRAC_LAZY_PREFETCH_THREADS must be 1 to %d, not '%s'",
                 MAX_WORKERS, w);
        return -1;
    }
    workers_left = n_workers;
    qsort(regions, n_regions, sizeof(*regions), by_start);
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* The server's write lock must not wait behind a stream of prefetchers' read locks. */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&events_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0 || (done_fd = lower_fd_adopt(efd)) < 0) {
        snprintf(err, errlen, "lazy restart: %s", strerror(errno));
        return -1;
    }
    if (start_thread(server_main, 0, err, errlen) != 0)
        return -1;
    for (int i = 0; i < n_workers; i++)
        if (start_thread(worker_main, 1, err, errlen) != 0)
            return -1;
    return 0;
}
