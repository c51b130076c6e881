/* image_device.c — device.img: an index of the allocations (address, size, kind: device or
 * managed) and their contents at page-aligned offsets, zero pages left as holes, a CRC-32C per
 * allocation. Contents go device -> bounce buffer -> file in chunks through the backend, never
 * as a second full host copy; at restart the new backend maps each allocation at its old address
 * and gets its contents back the same way. */
#include "image_device.h"
#include "lower_fds.h"

#include "crac_image.h"
#include "crc32c.h"
#include "page_digest.h"
#include "page_zero.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096UL
#define CHUNK (8UL << 20)

/* The header and index records are struct crac_dev_header / crac_dev_record (crac_image.h). */
const struct crac_backend_info *ckpt_backend;

static int pwrite_full(int fd, const unsigned char *p, size_t len, off_t off)
{
    while (len) {
        ssize_t w = pwrite(fd, p, len, off);
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
        off += w;
    }
    return 0;
}

/* CRC-32C of everything before the data (header with index_crc 0, records, zero padding), so a
 * flipped bit anywhere there is caught. */
static uint32_t index_crc(struct crac_dev_header h, const struct crac_dev_record *recs)
{
    h.index_crc = 0;
    uint32_t crc = crc32c_update(0, &h, sizeof(h));
    crc = crc32c_update(crc, recs, h.n * sizeof(*recs));
    static const unsigned char zeros[PAGE];
    for (uint64_t at = sizeof(h) + h.n * sizeof(*recs); at < h.data_start;) {
        uint64_t n = h.data_start - at < PAGE ? h.data_start - at : PAGE;
        crc = crc32c_update(crc, zeros, n);
        at += n;
    }
    return crc;
}

/* The padding between the records and the data must still be zero. */
static int padding_clean(int fd, const struct crac_dev_header *h)
{
    unsigned char buf[PAGE];
    uint64_t at = sizeof(*h) + h->n * sizeof(struct crac_dev_record);
    while (at < h->data_start) {
        uint64_t n = h->data_start - at < PAGE ? h->data_start - at : PAGE;
        if (pread(fd, buf, n, (off_t)at) != (ssize_t)n)
            return 0;
        for (uint64_t i = 0; i < n; i++)
            if (buf[i])
                return 0;
        at += n;
    }
    return 1;
}

static int save_allocation(int fd, struct crac_dev_record *rec, unsigned char *bounce,
                           struct page_digest *digest)
{
    uint32_t crc = 0;
    for (uint64_t off = 0; off < rec->size; off += CHUNK) {
        uint64_t n = rec->size - off < CHUNK ? rec->size - off : CHUNK;
        const void *view =
            ckpt_backend->host_view ? ckpt_backend->host_view(rec->addr + off, n) : NULL;
        const unsigned char *src = view;
        if (!src) {
            if (ckpt_backend->read(rec->addr + off, bounce, n) != 0)
                return -1;
            src = bounce;
        }
        uint64_t run = 0, run_len = 0;
        for (uint64_t p = 0; p <= n; p += PAGE) {
            int save = p < n && !page_is_zero(src + p);
            if (save) {
                uint64_t index = (off + p) / PAGE;
                if (p + PAGE < n)
                    crc32c_prefetch(src + p + PAGE, PAGE);
                crc = crc32c_update(crc, &index, 8);
                crc = crc32c_update(crc, src + p, PAGE);
                rec->saved_pages++;
                if (!run_len)
                    run = p;
                run_len += PAGE;
                continue;
            }
            if (run_len && pwrite_full(fd, src + run, run_len, (off_t)(rec->offset + off + run)))
                return -1;
            run_len = 0;
        }
        page_digest_progress(digest, rec->offset + off + n);
    }
    rec->crc32c = crc;
    return 0;
}

static struct device_summary summary;

const struct device_summary *device_image_summary(void) { return &summary; }

/* Remembers what this checkpoint saves, for the manifest (device_image_summary). */
static void summarise(const struct crac_registry *r, const struct crac_dev_ranges *rs, uint32_t n)
{
    free(summary.v);
    summary = (struct device_summary){0,
                                      calloc(n ? n : 1, sizeof(*summary.v)),
                                      r->dev_streams,
                                      r->dev_events,
                                      r->dev_modules,
                                      r->dev_pinned};
    for (uint32_t i = 0; summary.v && rs && i < rs->n; i++)
        if (rs->v[i].kind == CRAC_DEV_DEVICE || rs->v[i].kind == CRAC_DEV_MANAGED)
            summary.v[summary.n++] =
                (struct device_summary_alloc){rs->v[i].start, rs->v[i].size, rs->v[i].kind};
}

int device_image_write(const char *dir, const struct crac_registry *r, char *err, size_t errlen,
                       struct page_digest **digest)
{
    *digest = NULL;
    const struct crac_dev_ranges *rs = (const struct crac_dev_ranges *)r->device_ranges;
    uint32_t n = 0;
    for (uint32_t i = 0; rs && i < rs->n; i++)
        n += rs->v[i].kind == 1 || rs->v[i].kind == 2;
    summarise(r, rs, n);
    if (n == 0)
        return 0;
    if (!ckpt_backend || !ckpt_backend->read) {
        snprintf(err, errlen, "the backend cannot read device memory");
        return -1;
    }
    struct crac_dev_record *recs = calloc(n, sizeof(*recs));
    unsigned char *bounce = malloc(CHUNK);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/%s", dir, CRAC_DEVICE_IMAGE);
    int fd = lower_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int rc = -1;
    if (!recs || !bounce || fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        goto out;
    }
    struct crac_dev_header h = {CRAC_DEV_MAGIC, CRAC_DEV_VERSION, n, 0, 0, 0};
    h.data_start = (sizeof(h) + n * sizeof(*recs) + PAGE - 1) & ~(PAGE - 1);
    uint64_t offset = h.data_start;
    uint32_t k = 0;
    for (uint32_t i = 0; i < rs->n; i++) {
        if (rs->v[i].kind != 1 && rs->v[i].kind != 2)
            continue;
        recs[k++] = (struct crac_dev_record){
            rs->v[i].start, rs->v[i].size, offset, (uint32_t)rs->v[i].kind, 0, 0};
        offset += (rs->v[i].size + PAGE - 1) & ~(PAGE - 1);
    }
    /* The layout is known: hash the data in file order behind us, the header last. */
    *digest = page_digest_start(path, h.data_start, offset);
    for (k = 0; k < n; k++) {
        if (save_allocation(fd, &recs[k], bounce, *digest) != 0) {
            snprintf(err, errlen, "cannot save device memory at 0x%lx: %s",
                     (unsigned long)recs[k].addr, strerror(errno));
            goto out;
        }
    }
    h.index_crc = index_crc(h, recs);
    if (pwrite_full(fd, (const unsigned char *)&h, sizeof(h), 0) != 0 ||
        pwrite_full(fd, (const unsigned char *)recs, n * sizeof(*recs), sizeof(h)) != 0 ||
        ftruncate(fd, (off_t)offset) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (rc == 0) {
        page_digest_written(*digest, 1);
    } else {
        page_digest_cancel(*digest);
        *digest = NULL;
    }
    if (fd >= 0)
        close(fd);
    free(recs);
    free(bounce);
    return rc;
}

static int restore_allocation(int fd, const struct crac_dev_record *rec, unsigned char *bounce,
                              uint32_t *crc, uint64_t *pages)
{
    uint64_t end = rec->offset + rec->size;
    /* Holes are zero on the device already (a fresh mapping); only data extents are copied. */
    for (uint64_t pos = rec->offset; pos < end;) {
        off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
        if (d < 0 || (uint64_t)d >= end)
            break;
        uint64_t from = (uint64_t)d & ~(PAGE - 1);
        off_t h = lseek(fd, d, SEEK_HOLE);
        uint64_t stop = h < 0 || (uint64_t)h > end ? end : ((uint64_t)h + PAGE - 1) & ~(PAGE - 1);
        if (stop > end)
            stop = end;
        for (uint64_t at = from; at < stop; at += CHUNK) {
            uint64_t n = stop - at < CHUNK ? stop - at : CHUNK;
            if (pread(fd, bounce, n, (off_t)at) != (ssize_t)n)
                return -1;
            for (uint64_t p = 0; p < n; p += PAGE) {
                if (page_is_zero(bounce + p))
                    continue;
                uint64_t index = (at - rec->offset + p) / PAGE;
                *crc = crc32c_update(*crc, &index, 8);
                *crc = crc32c_update(*crc, bounce + p, PAGE);
                (*pages)++;
            }
            if (ckpt_backend->write(rec->addr + (at - rec->offset), bounce, n) != 0)
                return -1;
        }
        pos = stop;
    }
    return 0;
}

static const char *size_text(uint64_t n, char *buf, size_t len)
{
    snprintf(buf, len, n >= (1UL << 30) ? "%.1f GiB" : "%.1f MiB",
             n >= (1UL << 30) ? n / 1073741824.0 : n / 1048576.0);
    return buf;
}

int device_image_restore(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX + 32], sz[32];
    snprintf(path, sizeof(path), "%s/%s", dir, CRAC_DEVICE_IMAGE);
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : (snprintf(err, errlen, "cannot open %s", path), -1);
    struct crac_dev_header h;
    struct stat st;
    struct crac_dev_record *recs = NULL;
    unsigned char *bounce = NULL;
    int rc = -1;
    if (fstat(fd, &st) != 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h) ||
        memcmp(h.magic, CRAC_DEV_MAGIC, 8) != 0 || h.version != CRAC_DEV_VERSION || h.n == 0 ||
        h.n > (1u << 20) ||
        h.data_start != ((sizeof(h) + h.n * sizeof(*recs) + PAGE - 1) & ~(PAGE - 1))) {
        snprintf(err, errlen, "image corrupted: %s is not a crac device image", path);
        goto out;
    }
    recs = calloc(h.n, sizeof(*recs));
    bounce = malloc(CHUNK);
    if (!recs || !bounce ||
        pread(fd, recs, h.n * sizeof(*recs), sizeof(h)) != (ssize_t)(h.n * sizeof(*recs)) ||
        index_crc(h, recs) != h.index_crc || !padding_clean(fd, &h)) {
        snprintf(err, errlen, "image corrupted: the index of %s fails its checksum", path);
        goto out;
    }
    if (!ckpt_backend || !ckpt_backend->map || !ckpt_backend->write) {
        snprintf(err, errlen,
                 "this image holds device memory: restart it with a device backend "
                 "(--device sim)");
        goto out;
    }
    for (uint32_t i = 0; i < h.n; i++) {
        const struct crac_dev_record *rec = &recs[i];
        if (rec->offset + rec->size > (uint64_t)st.st_size + PAGE) {
            snprintf(err, errlen, "image corrupted: %s is truncated", path);
            goto out;
        }
        int e = ckpt_backend->map(rec->addr, rec->size, (int)rec->kind);
        if (e != 0) {
            snprintf(err, errlen,
                     "the %s backend (%s) cannot recreate %s of %s memory at 0x%lx (error %d): "
                     "the image needs it at that address",
                     ckpt_backend->name, ckpt_backend->version,
                     size_text(rec->size, sz, sizeof(sz)), rec->kind == 2 ? "managed" : "device",
                     (unsigned long)rec->addr, e);
            goto out;
        }
        uint32_t crc = 0;
        uint64_t pages = 0;
        if (restore_allocation(fd, rec, bounce, &crc, &pages) != 0 || crc != rec->crc32c ||
            pages != rec->saved_pages) {
            snprintf(err, errlen,
                     "image corrupted: device memory at 0x%lx in %s fails its checksum",
                     (unsigned long)rec->addr, path);
            goto out;
        }
    }
    /* The backend may still be copying the last chunks (cuda: write-behind on its streams). */
    int fe = ckpt_backend->flush ? ckpt_backend->flush() : 0;
    if (fe != 0) {
        snprintf(err, errlen, "the %s backend could not write device memory back (error %d)",
                 ckpt_backend->name, fe);
        goto out;
    }
    rc = 0;
out:
    close(fd);
    free(recs);
    free(bounce);
    return rc;
}
