/* image_check.c — `crac-loader --check-core PATH HEADER_CRC CORE_SIZE`: the integrity checks a
 * restart makes of upper.core (the header's CRC-32C, each region's CRC-32C over its saved pages),
 * without restoring anything; `crac verify` runs it (docs/IMAGE.md "Checksums"). */
#include "crac_image.h"
#include "image_read.h"
#include "crc32c.h"
#include "page_crcs.h"
#include "image_chain.h"
#include "image_compress.h"
#include "page_zero.h"
#include "region_walk.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAX_HEAD (256UL << 20)
#define BUF_BYTES (1UL << 20)

/* CRC-32C and count of the saved pages of region r: ANON kinds, every non-zero page of the data
 * extents; FILE_PRIVATE, the pages of its bitmap (any other page must be zero). -1: unreadable
 * or a byte where no page was saved. */
static int region_crc(int fd, const struct crac_region_rec *r, const unsigned char *bitmap,
                      unsigned char *buf, uint32_t *crc, uint32_t *pages)
{
    uint64_t end = r->core_offset + (r->end - r->start);
    for (uint64_t pos = r->core_offset; pos < end;) {
        off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= end)
            break;
        uint64_t data = (uint64_t)d & ~(PAGE - 1);
        off_t h = lseek(fd, d, SEEK_HOLE);
        uint64_t stop = h < 0 || (uint64_t)h > end ? end : ((uint64_t)h + PAGE - 1) & ~(PAGE - 1);
        if (stop > end)
            stop = end;
        for (uint64_t at = data; at < stop;) {
            uint64_t n = stop - at < BUF_BYTES ? stop - at : BUF_BYTES;
            if (image_pread_full(fd, buf, n, at) != 0)
                return -1;
            for (uint64_t p = 0; p < n; p += PAGE) {
                uint64_t index = (at + p - r->core_offset) / PAGE;
                int saved =
                    bitmap ? (bitmap[index / 8] >> (index % 8)) & 1 : !page_is_zero(buf + p);
                if (!saved) {
                    if (bitmap && !page_is_zero(buf + p))
                        return -1;
                    continue;
                }
                *crc = crc32c_update(*crc, &index, 8);
                *crc = crc32c_update(*crc, buf + p, PAGE);
                (*pages)++;
            }
            at += n;
        }
        pos = stop;
    }
    if (bitmap) { /* bitmap pages inside holes: zero pages, saved as such */
        uint64_t n = (r->end - r->start) / PAGE;
        uint32_t want = 0;
        for (uint64_t i = 0; i < n; i++)
            want += (bitmap[i / 8] >> (i % 8)) & 1;
        if (want != *pages)
            return -1;
    }
    return 0;
}

/* A compressed region (image_compress.c): every chunk decompressed and checked against its
 * CRC-32C, the chunks in order, inside the region and (FILE_PRIVATE) in its bitmap. -1: damaged;
 * -2: the codec's library cannot be loaded (err). */
/* inherit: an incremental region's bitmap (its parent's pages: in no chunk), else NULL. */
static int chunks_crc(int fd, const struct crac_region_rec *r, const unsigned char *bitmap,
                      const unsigned char *inherit, unsigned char *buf, uint32_t *crc,
                      uint32_t *pages, char *err, size_t errlen)
{
    static struct cz_reader rd; /* its scratch buffer kept for the next region */
    uint64_t n_pages = (r->end - r->start) / PAGE;
    struct crac_chunk_hdr h;
    int more;
    cz_read_begin(&rd, fd, r->core_offset, n_pages, bitmap);
    while ((more = cz_read_next(&rd, &h)) == 1) {
        for (uint64_t i = h.first_page; inherit && i < h.first_page + h.n_pages; i++)
            if ((inherit[i / 8] >> (i % 8)) & 1)
                return -1;
        int c = cz_read_pages(&rd, &h, buf, err, errlen);
        if (c != 0)
            return c;
        *crc = crc32c_update(*crc, &h.crc32c, 4);
        *pages += h.n_pages;
    }
    if (more < 0)
        return -1;
    if (bitmap) {
        uint32_t want = 0;
        for (uint64_t i = 0; i < n_pages; i++)
            want += (bitmap[i / 8] >> (i % 8)) & 1;
        if (want != *pages)
            return -1;
    }
    return 0;
}

/* Whether the PAGE_CRCS table of region r folds into its CRC-32C and count: a saved page is one
 * whose entry is not that of zeros (nor 0, for a page inherit marks: the parent's). */
static int page_crcs_match(const struct crac_region_rec *r, const unsigned char *inherit,
                           const unsigned char *table)
{
    uint32_t crc = 0, pages = 0, zero = page_crc_zero();
    for (uint64_t i = 0; i < (r->end - r->start) / PAGE; i++) {
        uint32_t e = page_crcs_at(table, i);
        if (inherit && (inherit[i / 8] >> (i % 8)) & 1) {
            if (e != 0)
                return 0;
            continue;
        }
        if (e == zero)
            continue;
        crc = page_crc_extend(crc32c_update(crc, &i, 8), e);
        pages++;
    }
    return crc == r->crc32c && pages == r->saved_pages;
}

static int bad(const char *path, const char *what)
{
    printf("%s: %s\n", path, what);
    return 1;
}

int image_check_main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: crac-loader --check-core PATH HEADER_CRC CORE_SIZE\n");
        return 2;
    }
    const char *path = argv[2];
    uint32_t header_crc = (uint32_t)strtoul(argv[3], NULL, 10);
    uint64_t core_size = strtoull(argv[4], NULL, 10);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return bad(path, strerror(errno));
    if ((uint64_t)st.st_size != core_size)
        return bad(path, "its size is not the manifest's");
    Elf64_Ehdr eh;
    Elf64_Phdr note;
    if (image_pread_full(fd, (unsigned char *)&eh, sizeof(eh), 0) != 0 ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phoff != sizeof(eh) || eh.e_phnum < 1 ||
        image_pread_full(fd, (unsigned char *)&note, sizeof(note), eh.e_phoff) != 0 ||
        note.p_type != PT_NOTE || note.p_offset != eh.e_phoff + eh.e_phnum * sizeof(note) ||
        note.p_offset + note.p_filesz > MAX_HEAD)
        return bad(path, "not a crac core file");
    uint64_t data_start = (note.p_offset + note.p_filesz + PAGE - 1) & ~(PAGE - 1);
    unsigned char *head = malloc(data_start), *buf = malloc(BUF_BYTES);
    if (!head || !buf || data_start > core_size || image_pread_full(fd, head, data_start, 0) != 0)
        return bad(path, "truncated");
    if (crc32c_update(0, head, data_start) != header_crc)
        return bad(path, "its headers fail their CRC-32C");
    /* The REGIONS note; the header CRC vouches for every byte of it. */
    const unsigned char *n = head + note.p_offset, *notes_end = n + note.p_filesz;
    const unsigned char *regions = NULL, *page_crcs = NULL;
    uint64_t regions_len = 0, page_crcs_len = 0;
    while (n + sizeof(Elf64_Nhdr) <= notes_end) {
        const Elf64_Nhdr *h = (const Elf64_Nhdr *)n;
        const unsigned char *desc = n + sizeof(*h) + ((h->n_namesz + 3) & ~3u);
        if (desc + h->n_descsz > notes_end)
            return bad(path, "a note runs past the note segment");
        if (h->n_type == CRAC_NT_REGIONS && h->n_namesz == sizeof(CRAC_NOTE_NAME) &&
            memcmp(n + sizeof(*h), CRAC_NOTE_NAME, sizeof(CRAC_NOTE_NAME)) == 0) {
            regions = desc;
            regions_len = h->n_descsz;
        }
        if (h->n_type == CRAC_NT_PAGE_CRCS && h->n_namesz == sizeof(CRAC_NOTE_NAME) &&
            memcmp(n + sizeof(*h), CRAC_NOTE_NAME, sizeof(CRAC_NOTE_NAME)) == 0) {
            page_crcs = desc;
            page_crcs_len = h->n_descsz;
        }
        n = desc + ((h->n_descsz + 3) & ~3u);
    }
    if (!regions)
        return bad(path, "no REGIONS note");
    struct region_walk walk = region_walk_start(regions, regions_len);
    struct crac_region_rec r;
    const unsigned char *record_bitmap;
    int more;
    while ((more = region_walk_next(&walk, &r, NULL, &record_bitmap)) != 0) {
        if (more < 0 || r.end < r.start ||
            (r.core_offset && !(r.flags & CRAC_REGION_COMPRESSED) &&
             r.core_offset + (r.end - r.start) > core_size))
            return bad(path, "a malformed region record");
        const unsigned char *bitmap = NULL;
        if (r.kind == CRAC_REGION_FILE_PRIVATE) {
            if ((uint64_t)r.bitmap_bytes * 8 < (r.end - r.start) / PAGE)
                return bad(path, "a malformed region record");
            bitmap = record_bitmap;
        }
        uint32_t crc = 0, pages = 0;
        if (r.flags & CRAC_REGION_INCREMENTAL) { /* this generation's layer (image_chain.c) */
            const unsigned char *inherit = record_bitmap;
            char err[256] = "";
            int c = r.kind != CRAC_REGION_ANON || !r.core_offset ||
                            (uint64_t)r.bitmap_bytes * 8 < (r.end - r.start) / PAGE
                        ? -1
                    : r.flags & CRAC_REGION_COMPRESSED
                        ? chunks_crc(fd, &r, NULL, inherit, buf, &crc, &pages, err, sizeof(err))
                        : chain_layer(fd, &r, inherit, NULL, 0, buf, &crc, &pages);
            if (c == -2)
                return bad(path, err);
            if (c != 0 || crc != r.crc32c || pages != r.saved_pages) {
                char what[128];
                snprintf(what, sizeof(what), "region 0x%llx-0x%llx fails its CRC-32C",
                         (unsigned long long)r.start, (unsigned long long)r.end);
                return bad(path, what);
            }
        } else if (r.flags & CRAC_REGION_COMPRESSED) {
            char err[256];
            int c = r.core_offset
                        ? chunks_crc(fd, &r, bitmap, NULL, buf, &crc, &pages, err, sizeof(err))
                        : -1;
            if (c == -2)
                return bad(path, err);
            if (c != 0 || crc != r.crc32c || pages != r.saved_pages) {
                char what[128];
                snprintf(what, sizeof(what), "region 0x%llx-0x%llx: a compressed chunk is damaged",
                         (unsigned long long)r.start, (unsigned long long)r.end);
                return bad(path, what);
            }
        } else if (r.core_offset && (region_crc(fd, &r, bitmap, buf, &crc, &pages) != 0 ||
                                     crc != r.crc32c || pages != r.saved_pages)) {
            char what[128];
            snprintf(what, sizeof(what), "region 0x%llx-0x%llx fails its CRC-32C",
                     (unsigned long long)r.start, (unsigned long long)r.end);
            return bad(path, what);
        }
        /* The page CRC-32Cs a restart from a chain checks pages by must be those of the pages
         * just checked: folded as the writer folds them, they give the region's CRC-32C. */
        const unsigned char *table = page_crcs_find(page_crcs, page_crcs_len, r.start, r.end);
        if (table && (r.kind != CRAC_REGION_ANON || (r.flags & CRAC_REGION_COMPRESSED) ||
                      !page_crcs_match(&r, r.flags & CRAC_REGION_INCREMENTAL ? record_bitmap : NULL,
                                       table))) {
            char what[128];
            snprintf(what, sizeof(what),
                     "region 0x%llx-0x%llx: its page checksums are not those of its pages",
                     (unsigned long long)r.start, (unsigned long long)r.end);
            return bad(path, what);
        }
    }
    free(head);
    free(buf);
    close(fd);
    return 0;
}
