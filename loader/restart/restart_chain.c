/* restart_chain.c — restarts an incremental generation: each CRAC_REGION_INCREMENTAL region is
 * filled from its chain, newest generation first, each page read once and checked. */

/* A parent is the generation directory next to its child (gen-<parent>), and is the one the
 * child was built on only if its headers have the CRC-32C and size the PARENT note recorded
 * (restart_read_image checks both, and everything else a restart checks of an image). Each parent
 * is read once and kept open for the other regions (at most MAX_CHAIN links). A full base stored
 * page by page is filled first with the pages no newer generation holds; then the newest
 * generation's own pages are read whole and checked by the region's CRC-32C; each older one then
 * fills only the pages no newer one holds, each checked by its own CRC-32C in the PAGE_CRCS note
 * (which the parent's header CRC-32C covers). A chain written before that note existed is read
 * whole, oldest first, as before (docs/DECISIONS.md "Chain restart reads each page once"). An
 * incremental generation is chunks (docs/DECISIONS.md "Incremental generations are chunks"): a
 * chunk is read whole when one of its pages is wanted. Lazy restart of a chain is not done: the
 * chain is filled eagerly. */
#include "restart.h"

#include "image_chain.h"
#include "image_compress.h"
#include "image_read.h"
#include "page_crcs.h"
#include "region_walk.h"

#include "crc32c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_CHAIN 64
#define BUF_BYTES (1UL << 20)
#define PAGE 4096UL

static struct link {
    char dir[PATH_MAX];
    struct restart_image img;
} links[MAX_CHAIN];
static int n_links;
static uint64_t pages_read; /* CRAC_TIMING: the chain's pages read from upper.core files */

static const char *base_name(const char *dir)
{
    const char *s = strrchr(dir, '/');
    return s ? s + 1 : dir;
}

static const struct restart_image *open_parent(const struct restart_image *child, char *err,
                                               size_t errlen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(child->gen_dir, '/');
    int n = snprintf(dir, sizeof(dir), "%.*s/gen-%06d", slash ? (int)(slash - child->gen_dir) : 1,
                     slash ? child->gen_dir : ".", child->parent.generation);
    if (n < 0 || (size_t)n >= sizeof(dir)) {
        snprintf(err, errlen, "incremental image: the path of its parent is too long");
        return NULL;
    }
    for (int i = 0; i < n_links; i++)
        if (strcmp(links[i].dir, dir) == 0)
            return &links[i].img;
    if (n_links == MAX_CHAIN) {
        snprintf(err, errlen, "incremental image: a chain of more than %d generations", MAX_CHAIN);
        return NULL;
    }
    char core[PATH_MAX + 16];
    snprintf(core, sizeof(core), "%s/upper.core", dir);
    if (access(core, F_OK) != 0) {
        snprintf(err, errlen,
                 "incremental image: %s, the parent %s builds on, is missing (the chain is "
                 "broken; restart from a complete generation)",
                 base_name(dir), base_name(child->gen_dir));
        return NULL;
    }
    struct link *l = &links[n_links];
    snprintf(l->dir, sizeof(l->dir), "%s", dir);
    char why[768];
    if (restart_read_image(l->dir, child->parent.core_size, child->parent.header_crc32c, &l->img,
                           why, sizeof(why)) != 0 ||
        l->img.proc.generation != child->parent.generation) {
        if (l->img.core_fd > 0)
            close(l->img.core_fd);
        snprintf(err, errlen,
                 "incremental image: %s, the parent %s builds on, is damaged or not the one it "
                 "was built on: %.600s",
                 base_name(dir), base_name(child->gen_dir),
                 l->img.proc.generation != child->parent.generation && !why[0]
                     ? "another generation"
                     : why);
        return NULL;
    }
    n_links++;
    return &l->img;
}

/* The region [start, end) of img's parent chain into place (the oldest layer first). */
static int fill_parents(const struct restart_image *img, uint64_t start, uint64_t end,
                        unsigned char *buf, char *err, size_t errlen)
{
    const struct restart_image *p = open_parent(img, err, errlen);
    if (!p)
        return -2;
    struct region_walk w = region_walk_start(p->regions, p->regions_len);
    struct crac_region_rec r;
    const unsigned char *bitmap;
    while (region_walk_next(&w, &r, NULL, &bitmap) > 0) {
        if (r.start != start || r.end != end)
            continue;
        if (r.kind != CRAC_REGION_ANON || !r.core_offset ||
            (r.flags & (CRAC_REGION_COMPRESSED | CRAC_REGION_DONTDUMP)))
            break;
        const unsigned char *inherit = NULL;
        if (r.flags & CRAC_REGION_INCREMENTAL) {
            inherit = bitmap;
            int rc = fill_parents(p, start, end, buf, err, errlen);
            if (rc != 0)
                return rc;
        }
        uint32_t crc = 0, pages = 0;
        int bad = chain_layer(p->core_fd, &r, inherit, (unsigned char *)start, inherit != NULL, buf,
                              &crc, &pages);
        pages_read += pages;
        if (bad != 0 || crc != r.crc32c || pages != r.saved_pages) {
            snprintf(err, errlen,
                     "image corrupted: region 0x%lx-0x%lx of %s (a parent in the chain) fails "
                     "its checksum",
                     (unsigned long)start, (unsigned long)end, base_name(p->gen_dir));
            return -2;
        }
        return 0;
    }
    snprintf(err, errlen,
             "image corrupted: the chain is broken: %s has no anonymous region 0x%lx-0x%lx",
             base_name(p->gen_dir), (unsigned long)start, (unsigned long)end);
    return -2;
}

/* The region [start, end) of img's parent: its record, bitmap (NULL: a full generation's region)
 * and page CRC-32Cs (NULL: none, a generation written before them). 0, or -2 with err. */
static int parent_region(const struct restart_image *img, uint64_t start, uint64_t end,
                         const struct restart_image **parent, struct crac_region_rec *rec,
                         const unsigned char **inherit, const unsigned char **crcs, char *err,
                         size_t errlen)
{
    const struct restart_image *p = open_parent(img, err, errlen);
    if (!p)
        return -2;
    struct region_walk w = region_walk_start(p->regions, p->regions_len);
    const unsigned char *bitmap;
    while (region_walk_next(&w, rec, NULL, &bitmap) > 0) {
        if (rec->start != start || rec->end != end)
            continue;
        if (rec->kind != CRAC_REGION_ANON || !rec->core_offset ||
            (rec->flags & CRAC_REGION_DONTDUMP))
            break;
        *parent = p;
        *inherit = rec->flags & CRAC_REGION_INCREMENTAL ? bitmap : NULL;
        *crcs = page_crcs_find(p->page_crcs, p->page_crcs_len, start, end);
        return 0;
    }
    snprintf(err, errlen,
             "image corrupted: the chain is broken: %s has no anonymous region 0x%lx-0x%lx",
             base_name(p->gen_dir), (unsigned long)start, (unsigned long)end);
    return -2;
}

#define BIT(map, i) ((map)[(i) / 8] >> ((i) % 8) & 1)

/* One parent's layer of a region: the pages filled does not mark and inherit (NULL for a full
 * generation) does not either are this generation's, read into place where its upper.core has
 * data, each page checked against its CRC-32C in crcs (a hole: the CRC-32C of zeros, and the page
 * stays as mapped, zero); then marked in filled. The data is read in windows of FILL_WINDOW pages,
 * one preadv each, the pages a newer generation filled going to a scratch buffer: the layers above
 * a base leave it in many short runs, and a pread a run cost more than the bytes. A window is
 * small enough that its pages are still in the core's cache when checked. A large layer is split
 * between two threads as restart_memory.c splits a region. 0, or -1 when unreadable or damaged. */
#define FILL_WINDOW 64
#define WANTED(p, k) (!BIT((p)->filled, k) && !((p)->inherit && BIT((p)->inherit, k)))

struct layer_part {
    int fd;
    const struct crac_region_rec *r;
    const unsigned char *inherit, *crcs;
    unsigned char *filled; /* each part marks only bytes of its own pages: split on 8 pages */
    uint64_t from, to;     /* pages of the region */
    uint64_t read;
    int rc;
    unsigned char *sink; /* the pages not wanted: read over, not kept */
    struct iovec iov[FILL_WINDOW];
};

static int fill_window(struct layer_part *p, uint64_t w, uint64_t last)
{
    const struct crac_region_rec *r = p->r;
    int niov = 0;
    for (uint64_t k = w; k < last;) {
        int want = WANTED(p, k);
        uint64_t m = k + 1;
        while (m < last && WANTED(p, m) == want)
            m++;
        p->iov[niov].iov_base = want ? (void *)(r->start + k * PAGE) : p->sink;
        p->iov[niov++].iov_len = (m - k) * PAGE;
        k = m;
    }
    madvise((void *)(r->start + w * PAGE), (last - w) * PAGE, MADV_POPULATE_WRITE);
    if (image_preadv_full(p->fd, p->iov, niov, r->core_offset + w * PAGE) != 0)
        return -1;
    for (uint64_t k = w; k < last; k++) {
        if (!WANTED(p, k))
            continue;
        if (crc32c_update(0, (unsigned char *)r->start + k * PAGE, PAGE) !=
            page_crcs_at(p->crcs, k))
            return -1;
        p->read++;
        p->filled[k / 8] |= (unsigned char)(1u << (k % 8));
    }
    return 0;
}

static void fill_layer_part(struct layer_part *p)
{
    const struct crac_region_rec *r = p->r;
    uint32_t zero = page_crc_zero();
    for (uint64_t a = p->from; a < p->to;) {
        while (a < p->to && !WANTED(p, a))
            a++;
        if (a == p->to)
            break;
        /* The next data extent of the file from a: pages before it are a hole (zero). The
         * file offset lseek moves is shared by the parts, but no read uses it. */
        off_t d = lseek(p->fd, (off_t)(r->core_offset + a * PAGE), SEEK_DATA);
        off_t h = d < 0 ? -1 : lseek(p->fd, d, SEEK_HOLE);
        uint64_t from = d < 0 ? p->to : ((uint64_t)d - r->core_offset) / PAGE;
        uint64_t to = h < 0 ? p->to : ((uint64_t)h - r->core_offset + PAGE - 1) / PAGE;
        from = from < p->to ? from : p->to;
        to = to < p->to ? to : p->to;
        if (to <= a) /* past the part (or an error): the rest is a hole */
            from = to = p->to;
        for (uint64_t k = a; k < from; k++) {
            if (!WANTED(p, k))
                continue;
            if (page_crcs_at(p->crcs, k) != zero) {
                p->rc = -1; /* a saved page is missing */
                return;
            }
            p->filled[k / 8] |= (unsigned char)(1u << (k % 8));
        }
        for (uint64_t w = from; w < to;) {
            while (w < to && !WANTED(p, w))
                w++;
            if (w == to)
                break;
            uint64_t last = w + FILL_WINDOW < to ? w + FILL_WINDOW : to;
            while (!WANTED(p, last - 1))
                last--;
            if (fill_window(p, w, last) != 0) {
                p->rc = -1;
                return;
            }
            w = last;
        }
        a = to > from ? to : from;
    }
}

static void *layer_helper(void *p)
{
    fill_layer_part(p);
    return NULL;
}

static int fill_layer(int fd, const struct crac_region_rec *r, const unsigned char *inherit,
                      const unsigned char *crcs, unsigned char *filled)
{
    uint64_t n = (r->end - r->start) / PAGE;
    struct layer_part parts[2];
    for (int i = 0; i < 2; i++)
        parts[i] = (struct layer_part){.fd = fd,
                                       .r = r,
                                       .inherit = inherit,
                                       .crcs = crcs,
                                       .filled = filled,
                                       .from = n,
                                       .to = n,
                                       .sink = malloc(FILL_WINDOW * PAGE)};
    parts[0].from = 0;
    int rc = -1;
    if (!parts[0].sink || !parts[1].sink)
        goto out;
    if (r->end - r->start >= RESTART_SPLIT_MIN && restart_other_cpu()) {
        parts[0].to = parts[1].from = n / 2 & ~7UL;
        restart_two_parts(layer_helper, &parts[0], &parts[1]);
    } else
        fill_layer_part(&parts[0]);
    pages_read += parts[0].read + parts[1].read;
    rc = parts[0].rc || parts[1].rc ? -1 : 0;
out:
    free(parts[0].sink);
    free(parts[1].sink);
    return rc;
}

/* One layer of a chunked region (an incremental generation, or --compress): its chunks hold only
 * its own pages. A chunk with a page filled does not mark is read (a RAW one checked where the
 * read-ahead window holds it, others into buf), checked by its CRC-32C and those pages copied
 * into place; one whose pages are all filled is not read, unless crc is given (the newest
 * generation: every chunk counts in the region's CRC-32C, which the caller checks). Two parts,
 * each walking the whole stream (its headers are chained) and taking the chunks that start in
 * its half of the region, on two threads for a large region: the copies into place and the
 * checks are the work, the walk is reads from the page cache. The layer's own pages are marked
 * in filled after. 0; -1 damaged; -2 library (err says). */
struct chunk_part {
    int fd;
    const struct crac_region_rec *r;
    const unsigned char *inherit, *filled;
    uint64_t from, to;     /* the chunks whose first page is in [from, to) */
    uint32_t *crc, *pages; /* the part that counts every chunk (the first), for the newest */
    unsigned char *buf;
    uint64_t read;
    int rc;
    char err[256];
};

static void fill_chunks_part(struct chunk_part *p)
{
    struct cz_reader rd = {0};
    struct crac_chunk_hdr h;
    int more;
    const struct crac_region_rec *r = p->r;
    cz_read_begin(&rd, p->fd, r->core_offset, (r->end - r->start) / PAGE, NULL);
    p->rc = -1;
    while ((more = cz_read_next(&rd, &h)) == 1) {
        int need = p->crc != NULL;
        for (uint64_t k = h.first_page; k < h.first_page + h.n_pages; k++) {
            if (p->inherit && BIT(p->inherit, k))
                goto out; /* the parent's page stored here */
            need |= !BIT(p->filled, k);
        }
        if (p->crc) {
            *p->crc = crc32c_update(*p->crc, &h.crc32c, 4);
            *p->pages += h.n_pages;
        }
        if (!need || h.first_page < p->from || h.first_page >= p->to)
            continue;
        const unsigned char *src = cz_read_raw(&rd, &h);
        if (!src) {
            int c = cz_read_pages(&rd, &h, p->buf, p->err, sizeof(p->err));
            if (c != 0) {
                p->rc = c;
                goto out;
            }
            src = p->buf;
        }
        p->read += h.n_pages;
        for (uint64_t k = h.first_page; k < h.first_page + h.n_pages; k++)
            if (!BIT(p->filled, k))
                memcpy((unsigned char *)r->start + k * PAGE, src + (k - h.first_page) * PAGE, PAGE);
    }
    p->rc = more < 0 ? -1 : 0;
out:
    cz_read_end(&rd);
}

static void *chunks_helper(void *p)
{
    fill_chunks_part(p);
    return NULL;
}

static int fill_chunks(int fd, const struct crac_region_rec *r, const unsigned char *inherit,
                       unsigned char *filled, unsigned char *buf, uint32_t *crc, uint32_t *pages,
                       char *err, size_t errlen)
{
    uint64_t n = (r->end - r->start) / PAGE;
    struct chunk_part parts[2] = {
        {.fd = fd,
         .r = r,
         .inherit = inherit,
         .filled = filled,
         .from = 0,
         .to = n,
         .crc = crc,
         .pages = pages,
         .buf = buf},
        {.fd = fd, .r = r, .inherit = inherit, .filled = filled, .from = n, .to = n},
    };
    if (r->end - r->start >= RESTART_SPLIT_MIN && restart_other_cpu() &&
        (parts[1].buf = malloc(BUF_BYTES))) {
        parts[0].to = parts[1].from = n / 2;
        restart_two_parts(chunks_helper, &parts[0], &parts[1]);
    } else
        fill_chunks_part(&parts[0]);
    free(parts[1].buf);
    pages_read += parts[0].read + parts[1].read;
    for (int i = 0; i < 2; i++)
        if (parts[i].rc != 0) {
            if (parts[i].rc == -2)
                snprintf(err, errlen, "%s", parts[i].err);
            return parts[i].rc;
        }
    for (uint64_t k = 0; k < n; k++)
        if (!inherit || !BIT(inherit, k))
            filled[k / 8] |= (unsigned char)(1u << (k % 8));
    return 0;
}

void restart_chain_done(void)
{
    for (int i = 0; i < n_links; i++)
        close(links[i].img.core_fd);
    if (n_links && getenv("CRAC_TIMING"))
        fprintf(stderr, "crac: timing (restart): a chain of %d generations: %llu pages read\n",
                n_links + 1, (unsigned long long)pages_read);
    n_links = 0;
    pages_read = 0;
}

int restart_chain_fill(const struct restart_image *img, const struct crac_region_rec *r,
                       const unsigned char *inherit, uint32_t *crc, uint32_t *pages, char *err,
                       size_t errlen)
{
    static unsigned char *buf;
    if (!buf && !(buf = malloc(BUF_BYTES)))
        return -1;
    /* The chain's layers of this region, newest first; each parent must have its page CRCs. */
    struct layer {
        const struct restart_image *img;
        struct crac_region_rec rec;
        const unsigned char *inherit, *crcs;
    } chain[MAX_CHAIN];
    int n = 0, whole = 0;
    for (const struct restart_image *at = img; !n || chain[n - 1].inherit; n++) {
        if (n == MAX_CHAIN) {
            snprintf(err, errlen, "incremental image: a chain of more than %d generations",
                     MAX_CHAIN);
            return -2;
        }
        int rc = parent_region(at, r->start, r->end, &chain[n].img, &chain[n].rec,
                               &chain[n].inherit, &chain[n].crcs, err, errlen);
        if (rc != 0)
            return rc;
        whole |= !chain[n].crcs && !(chain[n].rec.flags & CRAC_REGION_COMPRESSED);
        at = chain[n].img;
    }
    if (whole) { /* a chain written before page CRC-32Cs: every layer, oldest first */
        if (r->flags & CRAC_REGION_COMPRESSED) {
            snprintf(err, errlen,
                     "image corrupted: a compressed region's chain has a layer "
                     "without page checksums");
            return -2;
        }
        int rc = fill_parents(img, r->start, r->end, buf, err, errlen);
        if (rc != 0)
            return rc;
        uint32_t before = *pages;
        rc = chain_layer(img->core_fd, r, inherit, (unsigned char *)r->start, 1, buf, crc, pages);
        pages_read += *pages - before;
        return rc;
    }
    /* The base first, when it is a full generation stored page by page (not chunks), with only
     * the pages no newer generation holds (each page still read once): its fill takes the fresh
     * pages' faults in bulk (MADV_POPULATE_WRITE of each window, on two threads), so the newer
     * generations' few scattered pages are then copied into memory already there. Newest first,
     * they took a page fault apiece on one thread: a third of a 1 GiB chain's fill. */
    uint64_t n_pages = (r->end - r->start) / PAGE;
    unsigned char *filled = calloc(1, (n_pages + 7) / 8);
    if (!filled)
        return -1;
    const struct layer *base = &chain[n - 1];
    int base_first = !(base->rec.flags & CRAC_REGION_COMPRESSED) && !base->inherit;
    if (base_first) {
        for (uint64_t i = 0; i < (n_pages + 7) / 8; i++) {
            unsigned char newer = (unsigned char)~inherit[i];
            for (int k = 0; k < n - 1; k++)
                newer |= (unsigned char)~chain[k].inherit[i];
            filled[i] = newer;
        }
        if (fill_layer(base->img->core_fd, &base->rec, NULL, base->crcs, filled) != 0) {
            free(filled);
            snprintf(err, errlen,
                     "image corrupted: region 0x%lx-0x%lx of %s (a parent in the chain) fails "
                     "its checksum",
                     (unsigned long)r->start, (unsigned long)r->end, base_name(base->img->gen_dir));
            return -2;
        }
        memset(filled, 0, (n_pages + 7) / 8);
        n--; /* done */
    }
    /* This generation's own pages, checked by the region's CRC-32C (the caller compares). */
    if (r->flags & CRAC_REGION_COMPRESSED) {
        int rc = fill_chunks(img->core_fd, r, inherit, filled, buf, crc, pages, err, errlen);
        if (rc != 0) {
            free(filled);
            return rc;
        }
    } else {
        uint32_t before = *pages;
        if (chain_layer(img->core_fd, r, inherit, (unsigned char *)r->start, 0, buf, crc, pages) !=
            0) {
            free(filled);
            return -1;
        }
        pages_read += *pages - before;
        for (uint64_t i = 0; i < (n_pages + 7) / 8; i++)
            filled[i] = (unsigned char)~inherit[i]; /* its own: saved here, or zero */
    }
    for (int k = 0; k < n; k++) {
        const struct layer *l = &chain[k];
        int rc = l->rec.flags & CRAC_REGION_COMPRESSED
                     ? fill_chunks(l->img->core_fd, &l->rec, l->inherit, filled, buf, NULL, NULL,
                                   err, errlen)
                     : fill_layer(l->img->core_fd, &l->rec, l->inherit, l->crcs, filled);
        if (rc == -2) {
            free(filled);
            return -2;
        }
        if (rc != 0) {
            free(filled);
            snprintf(err, errlen,
                     "image corrupted: region 0x%lx-0x%lx of %s (a parent in the chain) fails "
                     "its checksum",
                     (unsigned long)r->start, (unsigned long)r->end, base_name(l->img->gen_dir));
            return -2;
        }
    }
    free(filled);
    return 0;
}
