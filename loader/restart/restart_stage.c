/* restart_stage.c — memory filled a huge page at a time: read into a MADV_HUGEPAGE staging
 * buffer, checked there, then moved into place whole with UFFDIO_MOVE (docs/DECISIONS.md). */
#include "restart_stage.h"
#include "uffd_move.h"

#include "crc32c.h"
#include "image_read.h"
#include "page_zero.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int uffd_new(void)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { /* without CAP_SYS_PTRACE and vm.unprivileged_userfaultfd: the device node */
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev >= 0) {
            fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
            close(dev);
        }
    }
    return fd;
}

int stage_uffd_open(uint64_t features, int *can_move)
{
    /* UFFDIO_API may be called once per descriptor: a kernel without MOVE gets a new one. */
    for (int with_move = 1; with_move >= 0; with_move--) {
        int fd = uffd_new();
        if (fd < 0)
            return -1;
        struct uffdio_api api = {.api = UFFD_API,
                                 .features = features | (with_move ? UFFD_FEATURE_MOVE : 0)};
        if (ioctl(fd, UFFDIO_API, &api) == 0) {
            *can_move = with_move && (api.features & UFFD_FEATURE_MOVE);
            return fd;
        }
        int e = errno;
        close(fd);
        errno = e;
    }
    return -1;
}

int stage_wanted(void)
{
    const char *v = getenv("CRAC_RESTART_STAGE");
    return v && v[0] == '1' && !v[1];
}

int stage_init(struct stage *s)
{
    /* Twice the size, trimmed to an aligned piece: the kernel backs it with one huge page. */
    unsigned char *m =
        mmap(NULL, 2 * STAGE_PIECE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    uint64_t at = ((uint64_t)m + STAGE_PIECE - 1) & ~(STAGE_PIECE - 1);
    if (at > (uint64_t)m)
        munmap(m, at - (uint64_t)m);
    munmap((void *)(at + STAGE_PIECE), (uint64_t)m + 2 * STAGE_PIECE - (at + STAGE_PIECE));
    s->buf = (unsigned char *)at;
    /* Advice only: without THP the pieces move as 4 KiB pages, still without a copy. */
    madvise(s->buf, STAGE_PIECE, MADV_HUGEPAGE);
    return 0;
}

void stage_end(struct stage *s)
{
    if (s->buf)
        munmap(s->buf, STAGE_PIECE);
    s->buf = NULL;
}

/* Read then checked this much at a time: the bytes pread just wrote are still in the core's
 * cache when their CRC is taken (as restart_memory.c's FILL_PIECE). */
#define STAGE_SUBPIECE (256UL << 10)

int stage_read(struct stage *s, int core, uint64_t core_at, uint64_t dst, uint64_t n,
               uint64_t first_index, uint32_t *crc, uint32_t *pages)
{
    unsigned char *at = stage_at(s, dst);
    /* The buffer was emptied by the last move: fault its huge page in with one call rather
     * than have the read fault it (or 512 small pages) in. */
    madvise(at, n, MADV_POPULATE_WRITE);
    uint32_t c = *crc, k = 0;
    for (uint64_t off = 0; off < n; off += STAGE_SUBPIECE) {
        uint64_t len = n - off < STAGE_SUBPIECE ? n - off : STAGE_SUBPIECE;
        if (image_pread_full(core, at + off, len, core_at + off) != 0)
            return -1;
        for (uint64_t p = off / CRAC_PAGE_SIZE; p < (off + len) / CRAC_PAGE_SIZE; p++) {
            const unsigned char *page = at + p * CRAC_PAGE_SIZE;
            if (page_is_zero(page))
                continue;
            uint64_t index = first_index + p;
            c = crc32c_update(c, &index, 8);
            c = crc32c_update(c, page, CRAC_PAGE_SIZE);
            k++;
        }
    }
    *crc = c;
    *pages += k;
    return 0;
}

uint64_t stage_move(const struct stage *s, int uffd, uint64_t dst, uint64_t n)
{
    uint64_t done = 0;
    while (done < n) {
        struct uffdio_move m = {.dst = dst + done,
                                .src = (uint64_t)stage_at(s, dst + done),
                                .len = n - done,
                                .mode = 0};
        int rc = ioctl(uffd, UFFDIO_MOVE, &m);
        if (rc == 0)
            return n;
        int e = errno;
        if (m.move > 0) {
            done += (uint64_t)m.move;
            if (e == EAGAIN) /* a partial move: the rest may go on the next call */
                continue;
        }
        errno = e;
        return done;
    }
    return done;
}

int stage_copy(const struct stage *s, int uffd, uint64_t dst, uint64_t n)
{
    uint64_t done = 0;
    while (done < n) {
        struct uffdio_copy c = {.dst = dst + done,
                                .src = (uint64_t)stage_at(s, dst + done),
                                .len = n - done,
                                .mode = 0};
        if (ioctl(uffd, UFFDIO_COPY, &c) == 0)
            return 0;
        int e = errno;
        if (c.copy > 0) {
            done += (uint64_t)c.copy;
            continue;
        }
        if (e == EEXIST) { /* a page already there: keep it, go on with the next */
            done += CRAC_PAGE_SIZE;
            continue;
        }
        if (e == EINTR || e == EAGAIN)
            continue;
        errno = e;
        return -1;
    }
    return 0;
}
