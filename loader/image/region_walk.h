/* region_walk.h — one walk over the records of an image's REGIONS note (docs/IMAGE.md), checked
 * as image_core.c writes them, for everything that reads them (restart, chain, compact, check). */
#ifndef CRAC_REGION_WALK_H
#define CRAC_REGION_WALK_H

#include "crac_image.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct region_walk {
    const unsigned char *regions; /* the note's bytes */
    size_t len, off;
};

static inline struct region_walk region_walk_start(const unsigned char *regions, size_t len)
{
    return (struct region_walk){regions, len, 0};
}

/* The next record, copied into R (records are not aligned in the note), with its path and its
 * bitmap; 1, 0 at the end, -1 when it is malformed: a size other than its record, path and
 * bitmap (a larger one would hide the next record), a path without its NUL, a bitmap on a
 * region that has none. */
static inline int region_walk_next(struct region_walk *w, struct crac_region_rec *r,
                                   const char **path, const unsigned char **bitmap)
{
    if (w->off + sizeof(*r) > w->len)
        return w->off == w->len ? 0 : -1;
    memcpy(r, w->regions + w->off, sizeof(*r));
    uint64_t need = (uint64_t)sizeof(*r) + r->path_len + r->bitmap_bytes;
    if (r->size != need || r->path_len % 8 || r->bitmap_bytes % 8 || r->size > w->len - w->off ||
        r->path_len == 0 ||
        (r->kind != CRAC_REGION_FILE_PRIVATE && !(r->flags & CRAC_REGION_INCREMENTAL) &&
         r->bitmap_bytes))
        return -1;
    const char *p = (const char *)w->regions + w->off + sizeof(*r);
    if (p[r->path_len - 1] != '\0')
        return -1;
    if (path)
        *path = p;
    if (bitmap)
        *bitmap = w->regions + w->off + sizeof(*r) + r->path_len;
    w->off += r->size;
    return 1;
}

#endif
