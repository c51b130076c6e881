/* restart_chain.c — restarts an incremental generation: each CRAC_REGION_INCREMENTAL region is
 * filled from its chain of parents, oldest first, each layer checked by its own CRC-32C. */

/* A parent is the generation directory next to its child (gen-<parent>), and is the one the
 * child was built on only if its headers have the CRC-32C and size the PARENT note recorded
 * (restart_read_image checks both, and everything else a restart checks of an image). Each parent
 * is read once and kept open for the other regions (at most MAX_CHAIN links). Lazy restart of a
 * chain is not done: the chain is filled eagerly (docs/DECISIONS.md "Incremental images"). */
#include "restart.h"

#include "image_chain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHAIN 64
#define BUF_BYTES (1UL << 20)

static struct link {
    char dir[PATH_MAX];
    struct restart_image img;
} links[MAX_CHAIN];
static int n_links;

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
    for (size_t off = 0; off + sizeof(struct crac_region_rec) <= p->regions_len;) {
        struct crac_region_rec r;
        memcpy(&r, p->regions + off, sizeof(r));
        if (r.size < sizeof(r))
            break;
        if (r.start != start || r.end != end) {
            off += r.size;
            continue;
        }
        if (r.kind != CRAC_REGION_ANON || !r.core_offset ||
            (r.flags & (CRAC_REGION_COMPRESSED | CRAC_REGION_DONTDUMP)))
            break;
        const unsigned char *inherit = NULL;
        if (r.flags & CRAC_REGION_INCREMENTAL) {
            inherit = p->regions + off + sizeof(r) + r.path_len;
            int rc = fill_parents(p, start, end, buf, err, errlen);
            if (rc != 0)
                return rc;
        }
        uint32_t crc = 0, pages = 0;
        if (chain_layer(p->core_fd, &r, inherit, (unsigned char *)start, inherit != NULL, buf, &crc,
                        &pages) != 0 ||
            crc != r.crc32c || pages != r.saved_pages) {
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

void restart_chain_done(void)
{
    for (int i = 0; i < n_links; i++)
        close(links[i].img.core_fd);
    n_links = 0;
}

int restart_chain_fill(const struct restart_image *img, const struct crac_region_rec *r,
                       const unsigned char *inherit, uint32_t *crc, uint32_t *pages, char *err,
                       size_t errlen)
{
    static unsigned char *buf;
    if (!buf && !(buf = malloc(BUF_BYTES)))
        return -1;
    int rc = fill_parents(img, r->start, r->end, buf, err, errlen);
    if (rc != 0)
        return rc;
    return chain_layer(img->core_fd, r, inherit, (unsigned char *)r->start, 1, buf, crc, pages);
}
