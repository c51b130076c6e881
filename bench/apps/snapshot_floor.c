/* snapshot_floor owns the measurement behind bench/snapshot_floor.py: a checkpoint snapshot by a
   forked writer vs by a userfaultfd write-protect snapshot, beside dd and O_DIRECT of the bytes. */

/* snapshot_floor CASE MIB FILE [verify] [kwrite] [umo]
     CASE  dd | direct | fork | fork_direct | fork_splice | uffd_wp | uffd_wp_buffered
   MIB MiB of 4 KiB anonymous pages full of xorshift bytes are written to FILE, then made durable.
   Prints one line of key=value results. `verify` keeps a copy of the memory as it was at the
   snapshot and compares the file with it afterwards (untimed; exit 3 on a mismatch). `kwrite`
   (uffd cases) makes every 8th program write a pread() into the memory, so the kernel's own
   copy_to_user meets the write protection; `umo` opens the userfaultfd with UFFD_USER_MODE_ONLY,
   what an unprivileged process gets when vm.unprivileged_userfaultfd is 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <nmmintrin.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define PAGE 4096UL
#define CHUNK (1UL << 20)
#define PAGES_PER_CHUNK (CHUNK / PAGE)
#define WORK_NS 20000.0
#define BEFORE_NS 300000000ULL
#define KWRITE_EVERY 8
/* High bits no xorshift fill is likely to produce in a whole word, so a stamp found in the file
   is recognisably the program's, and its low bits say when it was written. */
#define STAMP_TAG 0x5eed000000000000ULL

static char *mem;
static size_t bytes, npages, nchunks;

static void die(const char *fmt, ...)
{
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "snapshot_floor: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s\n", strerror(e));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* The CRC's own CPU: wall time around it would count the preemptions of two shared CPUs. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ULL + (uint64_t)tv.tv_usec * 1000ULL;
}

struct cpu {
    uint64_t user, sys, minflt;
};

static struct cpu cpu_of(int who)
{
    struct rusage ru;
    if (getrusage(who, &ru) != 0)
        die("getrusage");
    return (struct cpu){tv_ns(ru.ru_utime), tv_ns(ru.ru_stime), (uint64_t)ru.ru_minflt};
}

static uint64_t cpu_total(struct cpu a, struct cpu b)
{
    return (b.user - a.user) + (b.sys - a.sys);
}

static inline uint64_t xorshift(uint64_t x)
{
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static uint32_t crc32c(uint32_t crc, const char *p, size_t n)
{
    uint64_t c = crc;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        c = _mm_crc32_u64(c, w);
    }
    return (uint32_t)c;
}

static void pwrite_all(int fd, const char *p, size_t n, size_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("pwrite %zu bytes at %zu", n, off);
        p += w;
        n -= (size_t)w;
        off += (size_t)w;
    }
}

static void pwritev_all(int fd, struct iovec *iov, int n, size_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("pwritev %d pieces at %zu", n, off);
        off += (size_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void fill(void)
{
    /* NOHUGEPAGE even though THP is madvise-only here: the cases compare per-4-KiB-page costs
       (COW, GUP unshare, WP faults), which a huge page would change on another machine. */
    mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        die("mmap %zu", bytes);
    if (madvise(mem, bytes, MADV_NOHUGEPAGE) != 0)
        die("madvise NOHUGEPAGE");
    for (size_t pg = 0; pg < npages; pg++) {
        uint64_t x = (pg + 1) * 0x9e3779b97f4a7c15ULL;
        uint64_t *w = (uint64_t *)(mem + pg * PAGE);
        for (size_t i = 0; i < PAGE / 8; i++)
            w[i] = x = xorshift(x);
    }
}

/* A copy of the memory at the snapshot, kept out of the child: otherwise fork would also copy
   its page tables and the fork pause would grow. */
static char *snapshot_copy(void)
{
    char *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c == MAP_FAILED)
        die("mmap copy");
    madvise(c, bytes, MADV_DONTFORK);
    memcpy(c, mem, bytes);
    return c;
}

static int verify_file(const char *path, const char *want, uint64_t snap_count)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("open %s", path);
    char *buf = malloc(CHUNK);
    int bad = 0;
    for (size_t c = 0; c < nchunks; c++) {
        if (pread(fd, buf, CHUNK, (off_t)(c * CHUNK)) != (ssize_t)CHUNK)
            die("read back chunk %zu", c);
        const char *w = want + c * CHUNK;
        if (memcmp(buf, w, CHUNK) == 0)
            continue;
        for (size_t i = 0; i < CHUNK; i += 8) {
            uint64_t got, exp;
            memcpy(&got, buf + i, 8);
            memcpy(&exp, w + i, 8);
            if (got == exp)
                continue;
            if (bad++ < 5) {
                int stamp = (got & 0xffff000000000000ULL) == STAMP_TAG;
                fprintf(stderr,
                        "snapshot_floor: verify: page %zu word %zu: file %#llx, snapshot %#llx%s\n",
                        (c * CHUNK + i) / PAGE, (i % PAGE) / 8, (unsigned long long)got,
                        (unsigned long long)exp,
                        stamp && (got & 0xffffffffffffULL) > snap_count
                            ? " (a program write made after the snapshot)"
                            : "");
            }
        }
    }
    free(buf);
    close(fd);
    return bad;
}

static int open_image(const char *path, int direct)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
    if (fd < 0)
        die("open %s", path);
    return fd;
}

/* --- the program: fixed compute between writes, so its rate drops both when it loses the CPU
   and when its writes fault (COW copies, WP round trips). */

struct prog {
    uint64_t rng, spin, count;
    uint64_t stall_ns, stall_max_ns; /* inside the writes: the faults the snapshot costs it */
    int kwrite_fd;                   /* >= 0: some writes are pread()s into the memory */
    uint64_t kwrite_errors;
};

static uint64_t spin(uint64_t x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        x = xorshift(x);
    return x;
}

static void calibrate(struct prog *p)
{
    uint64_t best = UINT64_MAX, n = 100000;
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = now_ns();
        p->rng = spin(p->rng, n);
        uint64_t dt = now_ns() - t0;
        if (dt < best)
            best = dt;
    }
    p->spin = (uint64_t)(WORK_NS * (double)n / (double)(best ? best : 1));
    if (p->spin == 0)
        p->spin = 1;
}

static void prog_unit(struct prog *p)
{
    uint64_t x = p->rng = spin(p->rng, p->spin);
    uint64_t *w = (uint64_t *)(mem + (x % npages) * PAGE) + (x >> 52) % (PAGE / 8);
    uint64_t stamp = STAMP_TAG | ++p->count;
    uint64_t t0 = now_ns();
    if (p->kwrite_fd >= 0 && p->count % KWRITE_EVERY == 0) {
        if (pwrite(p->kwrite_fd, &stamp, 8, 0) != 8 || pread(p->kwrite_fd, w, 8, 0) != 8)
            p->kwrite_errors++;
    } else {
        *(volatile uint64_t *)w = stamp;
    }
    uint64_t dt = now_ns() - t0;
    p->stall_ns += dt;
    if (dt > p->stall_max_ns)
        p->stall_max_ns = dt;
}

static double rate(uint64_t n, uint64_t ns) { return ns ? (double)n * 1e9 / (double)ns : 0.0; }

/* --- dd, direct: the floors. */

static int run_plain(const char *path, int direct, int verify)
{
    int fd = open_image(path, direct);
    struct cpu c0 = cpu_of(RUSAGE_SELF);
    uint64_t t0 = now_ns();
    for (size_t c = 0; c < nchunks; c++)
        pwrite_all(fd, mem + c * CHUNK, CHUNK, c * CHUNK);
    if (fdatasync(fd) != 0)
        die("fdatasync");
    uint64_t t1 = now_ns();
    struct cpu c1 = cpu_of(RUSAGE_SELF);
    close(fd);
    int bad = verify ? verify_file(path, mem, 0) : 0;
    printf("wall_s=%.4f cpu_s=%.4f user_s=%.4f sys_s=%.4f", (double)(t1 - t0) * 1e-9,
           (double)cpu_total(c0, c1) * 1e-9, (double)(c1.user - c0.user) * 1e-9,
           (double)(c1.sys - c0.sys) * 1e-9);
    if (verify)
        printf(" verify=%s", bad ? "BAD" : "ok");
    printf("\n");
    return bad ? 3 : 0;
}

/* --- fork, fork_direct, fork_splice: the forked writer in miniature, writing through the page
   cache, O_DIRECT from its memory, and O_DIRECT by reference (vmsplice, then splice). */

struct shared {
    _Atomic int done;
    uint64_t durable_ns, crc_ns;
    uint32_t crc;
};

static int spipe[2] = {-1, -1};

/* The child's pages into a pipe by reference (vmsplice: no copy, and a reference is not a pin,
   so a copy-on-write page is not unshared), then from the pipe into the O_DIRECT file. */
static void splice_chunk(int fd, char *p, size_t off)
{
    if (spipe[0] < 0) {
        if (pipe(spipe) != 0)
            die("pipe");
        if (fcntl(spipe[1], F_SETPIPE_SZ, (int)CHUNK) < (int)CHUNK)
            die("F_SETPIPE_SZ");
    }
    size_t left = CHUNK;
    while (left > 0) {
        struct iovec iov = {p, left};
        ssize_t in = vmsplice(spipe[1], &iov, 1, 0);
        if (in <= 0)
            die("vmsplice");
        p += in;
        left -= (size_t)in;
        while (in > 0) {
            loff_t o = (loff_t)off;
            ssize_t out = splice(spipe[0], NULL, fd, &o, (size_t)in, SPLICE_F_MOVE);
            if (out <= 0)
                die("splice");
            in -= out;
            off += (size_t)out;
        }
    }
}

static void child_write(int fd, int direct, struct shared *sh)
{
    uint32_t crc = ~0U;
    uint64_t crc_ns = 0;
    for (size_t c = 0; c < nchunks; c++) {
        char *p = mem + c * CHUNK;
        uint64_t t = thread_cpu_ns();
        crc = crc32c(crc, p, CHUNK);
        crc_ns += thread_cpu_ns() - t;
        if (direct == 2)
            splice_chunk(fd, p, c * CHUNK);
        else
            pwrite_all(fd, p, CHUNK, c * CHUNK);
        if (!direct && sync_file_range(fd, (off_t)(c * CHUNK), CHUNK, SYNC_FILE_RANGE_WRITE) != 0)
            die("sync_file_range");
        /* Drops the child's reference, so the parent's next write to the page reuses it
           instead of copying it. */
        if (madvise(p, CHUNK, MADV_DONTNEED) != 0)
            die("madvise DONTNEED");
    }
    if (fdatasync(fd) != 0)
        die("fdatasync");
    sh->durable_ns = now_ns();
    sh->crc_ns = crc_ns;
    sh->crc = ~crc;
    atomic_store(&sh->done, 1);
}

static int run_fork(const char *path, int direct, int verify)
{
    int fd = open_image(path, direct != 0);
    struct shared *sh = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        die("mmap shared");
    struct prog p = {.rng = 88172645463325252ULL, .kwrite_fd = -1};
    calibrate(&p);
    uint64_t tb = now_ns();
    while (now_ns() - tb < BEFORE_NS)
        prog_unit(&p);
    uint64_t before_n = p.count, before_ns = now_ns() - tb;
    p.stall_ns = p.stall_max_ns = 0;
    char *want = verify ? snapshot_copy() : NULL;
    uint64_t snap_count = p.count;

    fflush(stdout);
    struct cpu c0 = cpu_of(RUSAGE_SELF);
    uint64_t t0 = now_ns();
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        child_write(fd, direct, sh);
        _exit(0);
    }
    uint64_t t1 = now_ns();
    while (!atomic_load_explicit(&sh->done, memory_order_acquire))
        prog_unit(&p);
    uint64_t t2 = now_ns();
    struct cpu c1 = cpu_of(RUSAGE_SELF);
    uint64_t during_n = p.count - snap_count;
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid)
        die("wait4");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "snapshot_floor: the writer child failed (status %#x)\n", st);
        return 1;
    }
    close(fd);
    int bad = 0, crc_bad = 0;
    if (verify) {
        bad = verify_file(path, want, snap_count);
        crc_bad = ~crc32c(~0U, want, bytes) != sh->crc;
    }
    printf("pause_ms=%.3f wall_s=%.4f cpu_s=%.4f user_s=%.4f sys_s=%.4f crc_s=%.4f "
           "rate_before=%.0f rate_during=%.0f prog_sys_ms=%.1f stall_max_us=%.0f "
           "stall_ms=%.1f minflt=%ld prog_minflt=%llu crc=%08x",
           (double)(t1 - t0) * 1e-6, (double)(sh->durable_ns - t0) * 1e-9,
           (double)(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime)) * 1e-9,
           (double)tv_ns(ru.ru_utime) * 1e-9, (double)tv_ns(ru.ru_stime) * 1e-9,
           (double)sh->crc_ns * 1e-9, rate(before_n, before_ns), rate(during_n, t2 - t1),
           (double)(c1.sys - c0.sys) * 1e-6, (double)p.stall_max_ns * 1e-3,
           (double)p.stall_ns * 1e-6, ru.ru_minflt, (unsigned long long)(c1.minflt - c0.minflt),
           sh->crc);
    if (verify)
        printf(" verify=%s crc_check=%s", bad ? "BAD" : "ok", crc_bad ? "BAD" : "ok");
    printf("\n");
    return bad || crc_bad ? 3 : 0;
}

/* --- uffd_wp, uffd_wp_buffered: the alternative, in one process. */

enum { RUN, PARK, GO, STOP };

struct uffd_ctx {
    int uffd, stopfd;
    char *side;             /* a page's snapshot copy lives at its own offset */
    _Atomic uint8_t *saved; /* per page: the handler holds its snapshot copy */
    _Atomic uint8_t *done;  /* per chunk: written, and un-protected by the writer */
    uint64_t faults, late, dup, handler_ns;
    _Atomic int state, parked;
    struct prog p;
    uint64_t before_n, before_ns, snap_count, during_n, during_ns;
    struct cpu park_cpu, stop_cpu;
};

static void unprotect(int uffd, char *addr, size_t len)
{
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)addr, len}, .mode = 0};
    /* EAGAIN: the mm is changing under us (mmap_changing); the range is still protected. */
    while (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) != 0)
        if (errno != EAGAIN)
            die("UFFDIO_WRITEPROTECT off %p+%zu", addr, len);
}

static void *handler_main(void *arg)
{
    struct uffd_ctx *u = arg;
    struct pollfd pf[2] = {{.fd = u->uffd, .events = POLLIN}, {.fd = u->stopfd, .events = POLLIN}};
    struct uffd_msg msgs[32];
    struct cpu c0 = cpu_of(RUSAGE_THREAD);
    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll uffd");
        }
        if (pf[1].revents)
            break; /* no protected page is left by then, so no fault can be pending */
        ssize_t n = read(u->uffd, msgs, sizeof msgs);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            die("read uffd");
        }
        for (size_t i = 0; i < (size_t)n / sizeof msgs[0]; i++) {
            if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
                continue;
            if (!(msgs[i].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)) {
                errno = EINVAL;
                die("a fault that is not a write-protect fault at %#llx",
                    (unsigned long long)msgs[i].arg.pagefault.address);
            }
            char *addr = (char *)(uintptr_t)(msgs[i].arg.pagefault.address & ~(PAGE - 1));
            size_t pg = (size_t)(addr - mem) / PAGE;
            /* Copy only while the snapshot bytes are certainly still in memory: a chunk the
               writer finished was un-protected (which woke the thread) and may have changed
               since; a page already saved was un-protected by us. */
            if (atomic_load(&u->done[pg / PAGES_PER_CHUNK])) {
                u->late++;
            } else if (atomic_load(&u->saved[pg])) {
                u->dup++;
            } else {
                memcpy(u->side + pg * PAGE, addr, PAGE);
                atomic_store_explicit(&u->saved[pg], 1, memory_order_release);
                u->faults++;
            }
            unprotect(u->uffd, addr, PAGE);
        }
    }
    u->handler_ns = cpu_total(c0, cpu_of(RUSAGE_THREAD));
    return NULL;
}

static void *prog_main(void *arg)
{
    struct uffd_ctx *u = arg;
    struct prog *p = &u->p;
    uint64_t t = now_ns();
    while (atomic_load_explicit(&u->state, memory_order_relaxed) == RUN)
        prog_unit(p);
    u->before_n = p->count;
    u->before_ns = now_ns() - t;
    u->snap_count = p->count;
    p->stall_ns = p->stall_max_ns = 0;
    u->park_cpu = cpu_of(RUSAGE_THREAD);
    atomic_store(&u->parked, 1);
    /* Sleeping, not spinning: the snapshot runs on the other of only two CPUs. */
    while (atomic_load(&u->state) == PARK)
        nanosleep(&(struct timespec){0, 20000}, NULL);
    t = now_ns();
    while (atomic_load_explicit(&u->state, memory_order_relaxed) == GO)
        prog_unit(p);
    u->during_ns = now_ns() - t;
    u->during_n = p->count - u->snap_count;
    u->stop_cpu = cpu_of(RUSAGE_THREAD);
    return NULL;
}

static int open_uffd(int umo)
{
    /* Non-blocking: a fault poll() reported may be gone before read() (the writer's un-protect
       of its chunk wakes the thread and drops its message), and a blocking read would then wait
       past the stop request. */
    int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | (umo ? UFFD_USER_MODE_ONLY : 0));
    if (u < 0)
        die("userfaultfd%s", umo ? " (user mode only)" : "");
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP};
    if (ioctl(u, UFFDIO_API, &api) != 0)
        die("UFFDIO_API");
    return u;
}

static int run_uffd(const char *path, int direct, int verify, int kwrite, int umo)
{
    struct uffd_ctx *u = calloc(1, sizeof *u);
    u->uffd = open_uffd(umo);
    u->stopfd = eventfd(0, EFD_CLOEXEC);
    u->saved = calloc(npages, 1);
    u->done = calloc(nchunks, 1);
    /* Address space for every page, memory only for the pages the program writes in time. */
    u->side = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (u->stopfd < 0 || !u->saved || !u->done || u->side == MAP_FAILED)
        die("setup");
    madvise(u->side, bytes, MADV_NOHUGEPAGE);
    u->p = (struct prog){.rng = 88172645463325252ULL, .kwrite_fd = -1};
    if (kwrite) {
        u->p.kwrite_fd = memfd_create("kwrite", MFD_CLOEXEC);
        if (u->p.kwrite_fd < 0)
            die("memfd_create");
    }
    calibrate(&u->p);
    int fd = open_image(path, direct);

    pthread_t prog, handler;
    atomic_store(&u->state, RUN);
    if (pthread_create(&handler, NULL, handler_main, u) != 0 ||
        pthread_create(&prog, NULL, prog_main, u) != 0)
        die("pthread_create");
    nanosleep(&(struct timespec){0, BEFORE_NS}, NULL);
    atomic_store(&u->state, PARK);
    while (!atomic_load(&u->parked))
        nanosleep(&(struct timespec){0, 20000}, NULL);
    char *want = verify ? snapshot_copy() : NULL;

    /* The snapshot: the program is stopped, as every thread is in a real checkpoint. */
    struct cpu c0 = cpu_of(RUSAGE_SELF);
    uint64_t t0 = now_ns();
    struct uffdio_register reg = {.range = {(uintptr_t)mem, bytes},
                                  .mode = UFFDIO_REGISTER_MODE_WP};
    if (ioctl(u->uffd, UFFDIO_REGISTER, &reg) != 0)
        die("UFFDIO_REGISTER WP");
    uint64_t t1 = now_ns();
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)mem, bytes},
                                     .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    while (ioctl(u->uffd, UFFDIO_WRITEPROTECT, &wp) != 0)
        if (errno != EAGAIN)
            die("UFFDIO_WRITEPROTECT on");
    uint64_t t2 = now_ns();
    atomic_store(&u->state, GO);

    uint32_t crc = ~0U;
    uint64_t crc_ns = 0, patched = 0;
    struct iovec iov[PAGES_PER_CHUNK];
    uint8_t from_side[PAGES_PER_CHUNK];
    for (size_t c = 0; c < nchunks; c++) {
        char *p = mem + c * CHUNK;
        size_t pg0 = c * PAGES_PER_CHUNK;
        uint64_t t = thread_cpu_ns();
        /* Page by page, each checked after it was read: a page saved by then may have been
           changed under the read, so its copy counts; one saved later was read intact (it
           stays protected until the handler has copied it). x86 keeps loads in order; the
           fence keeps the compiler from moving them. */
        for (size_t i = 0; i < PAGES_PER_CHUNK; i++) {
            uint32_t next = crc32c(crc, p + i * PAGE, PAGE);
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&u->saved[pg0 + i], memory_order_relaxed))
                next = crc32c(crc, u->side + (pg0 + i) * PAGE, PAGE);
            crc = next;
        }
        crc_ns += thread_cpu_ns() - t;
        /* One write per chunk, pages already saved taken from their copies (4 KiB writes of
           each saved page after the chunk cost more than the chunk itself). */
        int niov = 0;
        for (size_t i = 0; i < PAGES_PER_CHUNK; i++) {
            from_side[i] = atomic_load_explicit(&u->saved[pg0 + i], memory_order_acquire);
            char *src = from_side[i] ? u->side + (pg0 + i) * PAGE : p + i * PAGE;
            if (niov > 0 && (char *)iov[niov - 1].iov_base + iov[niov - 1].iov_len == src)
                iov[niov - 1].iov_len += PAGE;
            else
                iov[niov++] = (struct iovec){src, PAGE};
        }
        pwritev_all(fd, iov, niov, c * CHUNK);
        /* The CRC's rule for the bytes the write took from memory (it has finished with them
           on return): a page saved meanwhile may have changed under the write. */
        atomic_thread_fence(memory_order_acquire);
        for (size_t i = 0; i < PAGES_PER_CHUNK; i++)
            if (!from_side[i] && atomic_load_explicit(&u->saved[pg0 + i], memory_order_relaxed)) {
                pwrite_all(fd, u->side + (pg0 + i) * PAGE, PAGE, (pg0 + i) * PAGE);
                patched++;
            }
        if (!direct && sync_file_range(fd, (off_t)(c * CHUNK), CHUNK, SYNC_FILE_RANGE_WRITE) != 0)
            die("sync_file_range");
        atomic_store(&u->done[c], 1);
        unprotect(u->uffd, p, CHUNK);
    }
    if (fdatasync(fd) != 0)
        die("fdatasync");
    uint64_t t3 = now_ns();
    crc = ~crc;
    atomic_store(&u->state, STOP);
    if (pthread_join(prog, NULL) != 0)
        die("join");
    struct cpu c1 = cpu_of(RUSAGE_SELF);
    uint64_t one = 1;
    if (write(u->stopfd, &one, sizeof one) != sizeof one || pthread_join(handler, NULL) != 0)
        die("stop handler");
    close(fd);

    int bad = 0, crc_bad = 0;
    if (verify) {
        bad = verify_file(path, want, u->snap_count);
        crc_bad = ~crc32c(~0U, want, bytes) != crc;
    }
    uint64_t prog_cpu = cpu_total(u->park_cpu, u->stop_cpu);
    uint64_t all_cpu = cpu_total(c0, c1);
    printf("pause_ms=%.3f reg_ms=%.3f wall_s=%.4f cpu_s=%.4f crc_s=%.4f handler_ms=%.1f "
           "rate_before=%.0f rate_during=%.0f prog_sys_ms=%.1f stall_max_us=%.0f stall_ms=%.1f "
           "prog_minflt=%llu faults=%llu late=%llu dup=%llu patched=%llu crc=%08x umo=%d",
           (double)(t2 - t1) * 1e-6, (double)(t1 - t0) * 1e-6, (double)(t3 - t0) * 1e-9,
           (double)(all_cpu > prog_cpu ? all_cpu - prog_cpu : 0) * 1e-9, (double)crc_ns * 1e-9,
           (double)u->handler_ns * 1e-6, rate(u->before_n, u->before_ns),
           rate(u->during_n, u->during_ns), (double)(u->stop_cpu.sys - u->park_cpu.sys) * 1e-6,
           (double)u->p.stall_max_ns * 1e-3, (double)u->p.stall_ns * 1e-6,
           (unsigned long long)(u->stop_cpu.minflt - u->park_cpu.minflt),
           (unsigned long long)u->faults, (unsigned long long)u->late, (unsigned long long)u->dup,
           (unsigned long long)patched, crc, umo);
    if (kwrite)
        printf(" kwrite_errors=%llu", (unsigned long long)u->p.kwrite_errors);
    if (verify)
        printf(" verify=%s crc_check=%s", bad ? "BAD" : "ok", crc_bad ? "BAD" : "ok");
    printf("\n");
    return bad || crc_bad ? 3 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: snapshot_floor dd|direct|fork|fork_direct|fork_splice|uffd_wp|"
                        "uffd_wp_buffered MIB FILE [verify] [kwrite] [umo]\n");
        return 2;
    }
    const char *cas = argv[1], *path = argv[3];
    long mib = atol(argv[2]);
    int verify = 0, kwrite = 0, umo = 0;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "verify") == 0)
            verify = 1;
        else if (strcmp(argv[i], "kwrite") == 0)
            kwrite = 1;
        else if (strcmp(argv[i], "umo") == 0)
            umo = 1;
        else {
            fprintf(stderr, "snapshot_floor: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (mib < 1) {
        fprintf(stderr, "snapshot_floor: MIB must be >= 1\n");
        return 2;
    }
    bytes = (size_t)mib << 20;
    npages = bytes / PAGE;
    nchunks = bytes / CHUNK;
    fill();
    printf("case=%s mib=%ld ", cas, mib);
    if (strcmp(cas, "dd") == 0)
        return run_plain(path, 0, verify);
    if (strcmp(cas, "direct") == 0)
        return run_plain(path, 1, verify);
    if (strcmp(cas, "fork") == 0)
        return run_fork(path, 0, verify);
    if (strcmp(cas, "fork_direct") == 0)
        return run_fork(path, 1, verify);
    if (strcmp(cas, "fork_splice") == 0)
        return run_fork(path, 2, verify);
    if (strcmp(cas, "uffd_wp") == 0)
        return run_uffd(path, 1, verify, kwrite, umo);
    if (strcmp(cas, "uffd_wp_buffered") == 0)
        return run_uffd(path, 0, verify, kwrite, umo);
    fprintf(stderr, "snapshot_floor: unknown case %s\n", cas);
    return 2;
}
