/* image_chain.c — reads one generation's layer of a region saved incrementally (docs/IMAGE.md
 * "Incremental generations"): its own pages from upper.core, the others left to its parent. */
#include "image_chain.h"

#include "crc32c.h"
#include "page_zero.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define BUF_BYTES (1UL << 20)

static int read_full(int fd, unsigned char *dst, uint64_t len, uint64_t off)
{
    while (len) {
        ssize_t n = pread(fd, dst, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        dst += n;
        len -= (uint64_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

static int marked(const unsigned char *inherit, uint64_t i)
{
    return inherit && (inherit[i / 8] >> (i % 8)) & 1;
}

/* Pages [a, b) of the region, all marked or all unmarked, inside one data extent. */
static int span(int fd, const struct crac_region_rec *r, uint64_t a, uint64_t b, int inherited,
                unsigned char *dst, unsigned char *buf, uint32_t *crc, uint32_t *pages)
{
    while (a < b) {
        uint64_t n = (b - a) * PAGE < BUF_BYTES ? b - a : BUF_BYTES / PAGE;
        /* The region's own pages go straight into place; the parent's are only looked at. */
        unsigned char *to = dst && !inherited ? dst + a * PAGE : buf;
        if (to != buf)
            madvise(to, n * PAGE, MADV_POPULATE_WRITE);
        if (read_full(fd, to, n * PAGE, r->core_offset + a * PAGE) != 0)
            return -1;
        for (uint64_t p = 0; p < n; p++) {
            const unsigned char *page = to + p * PAGE;
            if (page_is_zero(page))
                continue;
            if (inherited)
                return -1; /* a byte where the parent's page belongs */
            uint64_t index = a + p;
            *crc = crc32c_update(*crc, &index, 8);
            *crc = crc32c_update(*crc, page, PAGE);
            (*pages)++;
        }
        a += n;
    }
    return 0;
}

/* Unmarked pages [a, b) with nothing saved: zero (the layer below may have filled them). */
static void zero_gap(const unsigned char *inherit, unsigned char *dst, uint64_t a, uint64_t b)
{
    while (a < b) {
        while (a < b && marked(inherit, a))
            a++;
        uint64_t e = a;
        while (e < b && !marked(inherit, e))
            e++;
        if (e > a)
            madvise(dst + a * PAGE, (e - a) * PAGE, MADV_DONTNEED); /* private anonymous: zeros */
        a = e;
    }
}

int chain_layer(int fd, const struct crac_region_rec *r, const unsigned char *inherit,
                unsigned char *dst, int zero_rest, unsigned char *buf, uint32_t *crc,
                uint32_t *pages)
{
    uint64_t n_pages = (r->end - r->start) / PAGE, end = r->core_offset + n_pages * PAGE;
    uint64_t done = 0; /* pages before this are handled */
    for (uint64_t pos = r->core_offset; pos < end;) {
        off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= end)
            break;
        off_t h = lseek(fd, d, SEEK_HOLE);
        uint64_t first = ((uint64_t)d - r->core_offset) / PAGE;
        uint64_t stop = h < 0 || (uint64_t)h >= end
                            ? n_pages
                            : ((uint64_t)h - r->core_offset + PAGE - 1) / PAGE;
        if (dst && zero_rest)
            zero_gap(inherit, dst, done, first);
        for (uint64_t a = first; a < stop;) {
            int m = marked(inherit, a);
            uint64_t b = a;
            while (b < stop && marked(inherit, b) == m)
                b++;
            if (span(fd, r, a, b, m, dst, buf, crc, pages) != 0)
                return -1;
            a = b;
        }
        done = stop;
        pos = r->core_offset + stop * PAGE;
    }
    if (dst && zero_rest)
        zero_gap(inherit, dst, done, n_pages);
    return 0;
}
