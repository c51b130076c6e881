/* image_compress.c — --compress: the codecs, loaded with dlopen from the runtime libraries
 * (libzstd.so.1, liblz4.so.1; no -dev package at build time), and the chunk pipeline: worker
 * threads compress chunks while the calling thread writes them in order (docs/IMAGE.md). */
#include "image_compress.h"
#include "image_direct.h"
#include "image_read.h"
#include "iov_step.h"

#include "crc32c.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096UL
#define CHUNK_BYTES (CRAC_CHUNK_MAX_PAGES * PAGE)
/* A chunk is compressed whole only if its first SAMPLE bytes compress; either must save at least
 * a tenth, or the chunk is stored raw (random data costs one small trial, docs/DECISIONS.md). */
#define SAMPLE (64UL << 10)
/* After RAW_STREAK chunks in a row stayed raw, only every TRY_EVERY-th chunk is tried; the others
 * are stored raw at once, on the caller's thread (random data cost a trial and two thread
 * hand-offs a chunk: +20 % at 2 GiB against an uncompressed image). That chunk's sample is tried
 * on the caller's thread too (15-30 us), and only one that compresses goes to a worker: the
 * writer waited for each tried chunk's hand-off and back (a 2 GiB random checkpoint with no
 * trials at all took 1.44 s against 1.53). A chunk that compresses ends the streak. */
#define RAW_STREAK 4
#define TRY_EVERY 8
#define WRITEBACK_STEP (32UL << 20)
#define MAX_WORKERS 8
/* A RAW chunk of the program's memory at least this long goes O_DIRECT by reference after a gap
 * that puts its bytes on a page: the gap (up to a page less its header) costs at most 1.6 %. */
#define DIRECT_MIN_PAGES 64
/* While chunks go O_DIRECT, the bytes between their bytes (headers, gaps, compressed and short
 * chunks, padding) collect in a buffer, in file order from a page boundary, and go out direct too,
 * ahead of the next direct chunk's bytes and in the same write: the file is written front to back
 * with no hole and nothing through the page cache. A write through the page cache takes the
 * file's lock, which the direct write in flight holds (each header written between two direct
 * chunks waited for the disk: 0.5 s of a 2 GiB checkpoint), and small ones left to the fsync
 * cost it about a millisecond each. Two buffers: one may still be in the pipe while the other
 * fills. */
#define SBUF_BYTES (4UL << 20)

/* Our own prototypes of the few functions used (the libraries' stable ABI). */
static struct {
    void *zstd, *lz4;
    size_t (*zstd_bound)(size_t);
    void *(*zstd_create)(void);
    size_t (*zstd_free)(void *);
    size_t (*zstd_cctx)(void *, void *, size_t, const void *, size_t, int);
    size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
    unsigned (*zstd_is_error)(size_t);
    int (*lz4_bound)(int);
    int (*lz4_fast)(const char *, char *, int, int, int);
    int (*lz4_decompress)(const char *, char *, int, int);
} lib;

int compress_parse(const char *spec, int *method, int *level)
{
    *level = 0;
    if (strcmp(spec, "none") == 0)
        *method = CRAC_CHUNK_RAW;
    else if (strcmp(spec, "lz4") == 0)
        *method = CRAC_CHUNK_LZ4;
    else if (strcmp(spec, "zstd") == 0) {
        *method = CRAC_CHUNK_ZSTD;
        *level = 1;
    } else if (strncmp(spec, "zstd:", 5) == 0) {
        char *end;
        long l = strtol(spec + 5, &end, 10);
        if (spec[5] == '\0' || *end || l < 1 || l > 19)
            return -1;
        *method = CRAC_CHUNK_ZSTD;
        *level = (int)l;
    } else
        return -1;
    return 0;
}

const char *compress_name(int method)
{
    return method == CRAC_CHUNK_ZSTD ? "zstd" : method == CRAC_CHUNK_LZ4 ? "lz4" : "none";
}

static void *sym(void *h, const char *name, int *missing)
{
    void *f = dlsym(h, name);
    if (!f)
        *missing = 1;
    return f;
}

int compress_load(int method, char *err, size_t errlen)
{
    int missing = 0;
    if (method == CRAC_CHUNK_ZSTD && !lib.zstd) {
        void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(err, errlen, "zstd compression needs libzstd.so.1, which cannot be loaded: %s",
                     dlerror());
            return -1;
        }
        lib.zstd_bound = (size_t (*)(size_t))sym(h, "ZSTD_compressBound", &missing);
        lib.zstd_create = (void *(*)(void))sym(h, "ZSTD_createCCtx", &missing);
        lib.zstd_free = (size_t (*)(void *))sym(h, "ZSTD_freeCCtx", &missing);
        lib.zstd_cctx = (size_t (*)(void *, void *, size_t, const void *, size_t, int))sym(
            h, "ZSTD_compressCCtx", &missing);
        lib.zstd_decompress =
            (size_t (*)(void *, size_t, const void *, size_t))sym(h, "ZSTD_decompress", &missing);
        lib.zstd_is_error = (unsigned (*)(size_t))sym(h, "ZSTD_isError", &missing);
        if (missing) {
            snprintf(err, errlen, "libzstd.so.1 lacks a function crac uses (too old?)");
            dlclose(h);
            return -1;
        }
        lib.zstd = h;
    }
    if (method == CRAC_CHUNK_LZ4 && !lib.lz4) {
        void *h = dlopen("liblz4.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(err, errlen, "lz4 compression needs liblz4.so.1, which cannot be loaded: %s",
                     dlerror());
            return -1;
        }
        lib.lz4_bound = (int (*)(int))sym(h, "LZ4_compressBound", &missing);
        lib.lz4_fast =
            (int (*)(const char *, char *, int, int, int))sym(h, "LZ4_compress_fast", &missing);
        lib.lz4_decompress =
            (int (*)(const char *, char *, int, int))sym(h, "LZ4_decompress_safe", &missing);
        if (missing) {
            snprintf(err, errlen, "liblz4.so.1 lacks a function crac uses (too old?)");
            dlclose(h);
            return -1;
        }
        lib.lz4 = h;
    }
    return 0;
}

static size_t bound(int method, size_t n)
{
    if (method == CRAC_CHUNK_ZSTD)
        return lib.zstd_bound(n);
    if (method == CRAC_CHUNK_LZ4)
        return (size_t)lib.lz4_bound((int)n);
    return n;
}

/* Compressed size, or 0 when it does not fit cap or fails. */
static size_t compress(int method, int level, void *zctx, unsigned char *dst, size_t cap,
                       const unsigned char *src, size_t n)
{
    if (method == CRAC_CHUNK_ZSTD) {
        size_t r = lib.zstd_cctx(zctx, dst, cap, src, n, level);
        return lib.zstd_is_error(r) ? 0 : r;
    }
    int r = lib.lz4_fast((const char *)src, (char *)dst, (int)n, (int)cap, 1);
    return r > 0 ? (size_t)r : 0;
}

int compress_decompress(int method, unsigned char *dst, size_t raw_len, const unsigned char *src,
                        size_t stored_len)
{
    if (method == CRAC_CHUNK_ZSTD && lib.zstd) {
        size_t r = lib.zstd_decompress(dst, raw_len, src, stored_len);
        return !lib.zstd_is_error(r) && r == raw_len ? 0 : -1;
    }
    if (method == CRAC_CHUNK_LZ4 && lib.lz4) {
        int r = lib.lz4_decompress((const char *)src, (char *)dst, (int)stored_len, (int)raw_len);
        return r >= 0 && (size_t)r == raw_len ? 0 : -1;
    }
    return -1;
}

/* ---- the reader ------------------------------------------------------------------------------
 * The one walk over a region's chunks that every reader of a compressed region shares. */

void cz_read_begin(struct cz_reader *rd, int fd, uint64_t core_offset, uint64_t n_pages,
                   const unsigned char *bitmap)
{
    /* A reader used again keeps its buffers, not what they held (another file, maybe). */
    unsigned char *stored = rd->stored, *ahead = rd->ahead;
    *rd = (struct cz_reader){.fd = fd,
                             .pos = core_offset,
                             .n_pages = n_pages,
                             .bitmap = bitmap,
                             .stored = stored,
                             .ahead = ahead};
}

#define READ_AHEAD (1UL << 20)

/* The len bytes at off inside the read-ahead window, read into it first when they are not there;
 * NULL when unreadable (errno) or when len is half the window or more (no errno: read those
 * straight into their destination). */
static const unsigned char *cz_window(struct cz_reader *rd, uint64_t len, uint64_t off)
{
    if (off >= rd->ahead_at && off + len <= rd->ahead_at + rd->ahead_len)
        return rd->ahead + (off - rd->ahead_at);
    errno = 0;
    if (len >= READ_AHEAD / 2 || (!rd->ahead && !(rd->ahead = malloc(READ_AHEAD))))
        return NULL;
    rd->ahead_len = 0;
    for (;;) { /* up to a window, fewer at the file's end */
        ssize_t n = pread(rd->fd, rd->ahead + rd->ahead_len, READ_AHEAD - rd->ahead_len,
                          (off_t)(off + rd->ahead_len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rd->ahead_len = 0;
            return NULL;
        }
        rd->ahead_len += (uint64_t)n;
        if (n == 0 || rd->ahead_len == READ_AHEAD)
            break;
    }
    rd->ahead_at = off;
    if (rd->ahead_len < len) {
        errno = EIO;
        return NULL;
    }
    return rd->ahead;
}

/* len bytes at off into dst, through the read-ahead window. */
static int cz_fetch(struct cz_reader *rd, void *dst, uint64_t len, uint64_t off)
{
    const unsigned char *at = cz_window(rd, len, off);
    if (at) {
        memcpy(dst, at, len);
        return 0;
    }
    return errno ? -1 : image_pread_full(rd->fd, dst, len, off);
}

static int cz_fetch_header(struct cz_reader *rd, struct crac_chunk_hdr *h)
{
    uint64_t off = rd->pos;
    int in_window = off >= rd->ahead_at && off + sizeof(*h) <= rd->ahead_at + rd->ahead_len;
    if (!in_window && (rd->headers_only || rd->large_before))
        return image_pread_full(rd->fd, h, sizeof(*h), off);
    return cz_fetch(rd, h, sizeof(*h), off);
}

int cz_read_next(struct cz_reader *rd, struct crac_chunk_hdr *h)
{
    if (cz_fetch_header(rd, h) != 0 || h->magic != CRAC_CHUNK_MAGIC ||
        h->method > CRAC_CHUNK_ZSTD || h->n_pages > CRAC_CHUNK_MAX_PAGES)
        return -1;
    if (!h->n_pages)
        return h->stored_len || h->gap ? -1 : 0;
    uint64_t len = (uint64_t)h->n_pages * PAGE;
    if (h->first_page < rd->next || h->first_page + h->n_pages > rd->n_pages ||
        h->stored_len > len || (h->method == CRAC_CHUNK_RAW) != (h->stored_len == len) ||
        h->gap >= PAGE)
        return -1;
    for (uint64_t i = h->first_page; rd->bitmap && i < h->first_page + h->n_pages; i++)
        if (!((rd->bitmap[i / 8] >> (i % 8)) & 1))
            return -1;
    rd->data_at = rd->pos + sizeof(*h) + h->gap;
    rd->next = h->first_page + h->n_pages;
    rd->pos = rd->data_at + ((h->stored_len + 7) & ~7UL);
    rd->large_before = h->stored_len >= READ_AHEAD / 2;
    return 1;
}

int cz_read_pages(struct cz_reader *rd, const struct crac_chunk_hdr *h, unsigned char *dst,
                  char *err, size_t errlen)
{
    uint64_t len = (uint64_t)h->n_pages * PAGE;
    if (h->method == CRAC_CHUNK_RAW) {
        if (cz_fetch(rd, dst, len, rd->data_at) != 0)
            return -1;
    } else {
        if (compress_load((int)h->method, err, errlen) != 0)
            return -2;
        if (!rd->stored && !(rd->stored = malloc(CHUNK_BYTES)))
            return -1;
        if (cz_fetch(rd, rd->stored, h->stored_len, rd->data_at) != 0 ||
            compress_decompress((int)h->method, dst, len, rd->stored, h->stored_len) != 0)
            return -1;
    }
    return crc32c_update(0, dst, len) == h->crc32c ? 0 : -1;
}

const unsigned char *cz_read_raw(struct cz_reader *rd, const struct crac_chunk_hdr *h)
{
    uint64_t len = (uint64_t)h->n_pages * PAGE;
    if (h->method != CRAC_CHUNK_RAW)
        return NULL;
    const unsigned char *at = cz_window(rd, len, rd->data_at);
    return at && crc32c_update(0, at, len) == h->crc32c ? at : NULL;
}

void cz_read_end(struct cz_reader *rd)
{
    free(rd->stored);
    free(rd->ahead);
    rd->stored = rd->ahead = NULL;
    rd->ahead_len = 0;
}

/* ---- the pipeline ---------------------------------------------------------------------------
 * A ring of slots filled in order by the caller; workers take them in order, compress them and
 * mark them done; the caller writes the oldest slot once it is done and the ring is full (and
 * all of them at the end). So the file is written in order by one thread while N compress. */

enum { SLOT_FREE, SLOT_READY, SLOT_BUSY, SLOT_DONE };

struct slot {
    int state;
    struct cz_region *region;
    uint64_t first;
    uint32_t n;
    const unsigned char *src;
    int use;            /* CZ_KEEP, CZ_COPY (src is then `in`) or CZ_DROP */
    unsigned char *in;  /* CHUNK_BYTES, for a copied chunk (made on first use) */
    unsigned char *out; /* the bound of CHUNK_BYTES */
    uint32_t method, stored, crc;
    int tried; /* compress_slot tried to compress it */
};

struct cz_pipe {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int method, level, fd, n_workers, stop, failed;
    struct direct_io *direct; /* RAW chunks of memory go O_DIRECT through it (NULL: none) */
    /* With `direct`: the file's bytes [s_off, s_off + s_len) at sbuf[cur] + s_base (both on a
     * page); sent[i]: the direct write that last took bytes of sbuf[i]. */
    unsigned char *sbuf[2];
    uint64_t sent[2];
    int cur;
    uint64_t s_off, s_len, s_base;
    uint64_t at, kicked;
    uint64_t raw_streak, n_submitted; /* chunks tried that stayed raw, in a row; chunks queued */
    void *probe_zctx;                 /* the caller's, for a streak's sample (made on first use) */
    unsigned char *probe_out;         /* bound(SAMPLE) bytes, likewise */
    size_t out_cap;
    struct slot *slots;
    uint64_t n_slots, head, tail, take; /* head: next to write; take: next for a worker */
    pthread_t workers[MAX_WORKERS];
};

/* Whether the first SAMPLE bytes of src compress by a tenth. */
static int sample_compresses(const struct cz_pipe *p, void *zctx, unsigned char *out, size_t cap,
                             const unsigned char *src)
{
    size_t t = compress(p->method, p->level, zctx, out, cap, src, SAMPLE);
    return t && t <= SAMPLE - SAMPLE / 10;
}

static void compress_slot(struct cz_pipe *p, struct slot *s, void *zctx)
{
    size_t len = (size_t)s->n * PAGE;
    s->method = CRAC_CHUNK_RAW;
    s->stored = (uint32_t)len;
    s->tried = 0;
    if (p->method == CRAC_CHUNK_RAW || (p->method == CRAC_CHUNK_ZSTD && !zctx) || s->region->raw)
        return;
    s->tried = 1;
    if (len >= 4 * SAMPLE && !sample_compresses(p, zctx, s->out, p->out_cap, s->src))
        return;
    size_t c = compress(p->method, p->level, zctx, s->out, p->out_cap, s->src, len);
    if (c && c <= len - len / 10) {
        s->method = (uint32_t)p->method;
        s->stored = (uint32_t)c;
    }
}

static void *worker(void *arg)
{
    struct cz_pipe *p = arg;
    void *zctx = p->method == CRAC_CHUNK_ZSTD ? lib.zstd_create() : NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->take == p->tail)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->take == p->tail)
            break;               /* stop, nothing left */
        if (p->take < p->head) { /* end-of-region markers the writer is already past */
            p->take = p->head;
            continue;
        }
        struct slot *s = &p->slots[p->take++ % p->n_slots];
        if (s->state != SLOT_READY) /* an end-of-region marker, already done */
            continue;
        s->state = SLOT_BUSY;
        pthread_mutex_unlock(&p->mu);
        compress_slot(p, s, zctx);
        pthread_mutex_lock(&p->mu);
        s->state = SLOT_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    if (zctx)
        lib.zstd_free(zctx);
    return NULL;
}

static int write_fully(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n) {
        ssize_t w = pwritev(fd, iov, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        off += (uint64_t)w;
        iov_step(&iov, &n, (size_t)w);
    }
    return 0;
}

/* Chunks written with one pwritev at most (three buffers each: header, bytes, padding). */
#define WRITE_BATCH 64

/* Where a chunk's bytes go O_DIRECT: the long RAW chunks of the program's memory, while the
 * pipeline has a direct descriptor. */
static int goes_direct(const struct cz_pipe *p, const struct slot *s)
{
    return p->direct && s->method == CRAC_CHUNK_RAW && s->use != CZ_COPY &&
           s->n >= DIRECT_MIN_PAGES;
}

/* A slot's pages once its bytes are written, collected or in the direct writer's pipe (which
 * holds its own reference to each page). */
static void drop_written(const struct slot *s)
{
    if (s->use == CZ_DROP && s->n)
        madvise((void *)s->src, (size_t)s->n * PAGE, MADV_DONTNEED);
}

/* The collected bytes, and DATA (the bytes of a direct chunk, or none), in one direct write from
 * s_off. The collected bytes must end on a page: they are the gap before DATA or, at the end,
 * padded to one. The next bytes collect after them in the same buffer (its pages in the pipe are
 * not touched again before the other buffer has been filled in turn). A filesystem that refuses
 * the first direct write (EINVAL) gets this one and every later chunk through the page cache
 * (image_direct.h). */
static int sbuf_put(struct cz_pipe *p, const void *src, size_t len);

static int sbuf_send(struct cz_pipe *p, const void *data, size_t len)
{
    if (!p->direct) /* refused on the way (sbuf_put): through the page cache, in place */
        return sbuf_put(p, data, len);
    struct iovec iov[2];
    int n = 0;
    if (p->s_len)
        iov[n++] = (struct iovec){p->sbuf[p->cur] + p->s_base, p->s_len};
    if (len)
        iov[n++] = (struct iovec){(void *)data, len};
    uint64_t off = p->s_off;
    p->s_off += p->s_len + len;
    if (!n)
        return 0;
    if (direct_writev(p->direct, iov, n, off) != 0) {
        if (errno != EINVAL || direct_write_used)
            return -1;
        direct_finish(p->direct);
        p->direct = NULL;
        p->s_len = 0;
        return write_fully(p->fd, iov, n, off);
    }
    if (p->s_len) /* the last write that took its bytes */
        p->sent[p->cur] = direct_count(p->direct) - 1;
    p->s_base += p->s_len;
    p->s_len = 0;
    return 0;
}

/* LEN bytes of the stream into the collecting buffer. When they do not fit, the whole pages
 * collected go out first, and the rest of the last page moves to the start of the other buffer,
 * once the last write that took that one is done (a buffer's worth of writes ago). */
static int sbuf_put(struct cz_pipe *p, const void *src, size_t len)
{
    if (!len)
        return 0;
    if (!p->direct) { /* refused on the way: through the page cache, in place */
        struct iovec iov = {(void *)src, len};
        p->s_off += len;
        return write_fully(p->fd, &iov, 1, p->s_off - len);
    }
    if (p->s_base + p->s_len + len > SBUF_BYTES) {
        uint64_t whole = p->s_len & ~(PAGE - 1), rest = p->s_len - whole;
        unsigned char tail[PAGE];
        memcpy(tail, p->sbuf[p->cur] + p->s_base + whole, rest);
        p->s_len = whole;
        if (sbuf_send(p, NULL, 0) != 0)
            return -1;
        if (!p->direct) /* refused: both through the page cache (the branch above) */
            return sbuf_put(p, tail, rest) == 0 && sbuf_put(p, src, len) == 0 ? 0 : -1;
        p->cur ^= 1;
        p->s_base = 0;
        if (direct_wait(p->direct, p->sent[p->cur]) != 0)
            return -1;
        memcpy(p->sbuf[p->cur], tail, rest);
        p->s_len = rest;
    }
    memcpy(p->sbuf[p->cur] + p->s_base + p->s_len, src, len);
    p->s_len += len;
    return 0;
}

static const unsigned char zeros[PAGE];

/* The oldest slot's chunk (waiting for its worker) and those after it that are done (up to
 * WRITE_BATCH): with a direct descriptor, a long raw chunk's bytes go O_DIRECT after a gap that
 * puts them on a page, the rest collected before them (sbuf_put); without, all of it goes in one
 * pwritev. Called by the caller's thread only. */
static int write_head(struct cz_pipe *p)
{
    struct crac_chunk_hdr h[WRITE_BATCH];
    struct iovec iov[3 * WRITE_BATCH];
    pthread_mutex_lock(&p->mu);
    while (p->slots[p->head % p->n_slots].state != SLOT_DONE)
        pthread_cond_wait(&p->done, &p->mu);
    uint64_t k = 1;
    while (k < WRITE_BATCH && !p->direct && p->head + k < p->tail &&
           p->slots[(p->head + k) % p->n_slots].state == SLOT_DONE)
        k++;
    pthread_mutex_unlock(&p->mu);
    uint64_t from = p->at;
    int n_iov = 0;
    for (uint64_t i = 0; i < k && !p->failed; i++) {
        struct slot *s = &p->slots[(p->head + i) % p->n_slots];
        int direct = goes_direct(p, s);
        uint32_t gap = direct ? (uint32_t)((PAGE - (p->at + sizeof(h[i])) % PAGE) % PAGE) : 0;
        uint32_t pad = (8 - s->stored % 8) % 8;
        const unsigned char *bytes = s->method == CRAC_CHUNK_RAW ? s->src : s->out;
        h[i] = (struct crac_chunk_hdr){CRAC_CHUNK_MAGIC, s->method, s->first, s->n,
                                       s->stored,        s->crc,    gap};
        struct cz_region *r = s->region;
        if (!r->core_offset)
            r->core_offset = p->at;
        uint64_t bytes_at = p->at + sizeof(h[i]) + gap;
        if (p->direct) {
            if (sbuf_put(p, &h[i], sizeof(h[i])) != 0 ||
                (direct ? sbuf_put(p, zeros, gap) != 0 || sbuf_send(p, s->src, s->stored) != 0
                        : sbuf_put(p, bytes, s->stored) != 0 || sbuf_put(p, zeros, pad) != 0))
                p->failed = errno;
            else
                drop_written(s);
        } else {
            if (!n_iov)
                from = p->at;
            iov[n_iov++] = (struct iovec){&h[i], sizeof(h[i])};
            iov[n_iov++] = (struct iovec){(void *)bytes, s->stored};
            iov[n_iov++] = (struct iovec){(void *)zeros, pad};
        }
        p->at = bytes_at + s->stored + pad;
        if (s->n) {
            r->crc32c = crc32c_update(r->crc32c, &s->crc, 4);
            r->pages += s->n;
        }
        if (s->tried)
            p->raw_streak = s->method == CRAC_CHUNK_RAW ? p->raw_streak + 1 : 0;
    }
    if (!p->failed && n_iov && write_fully(p->fd, iov, n_iov, from) != 0)
        p->failed = errno;
    for (uint64_t i = 0; n_iov && !p->failed && i < k; i++)
        drop_written(&p->slots[(p->head + i) % p->n_slots]);
    if (!p->failed && !p->direct && p->at >= p->kicked + WRITEBACK_STEP) {
        sync_file_range(p->fd, (off_t)p->kicked, (off_t)(p->at - p->kicked), SYNC_FILE_RANGE_WRITE);
        p->kicked = p->at;
    }
    pthread_mutex_lock(&p->mu);
    for (uint64_t i = 0; i < k; i++)
        p->slots[(p->head + i) % p->n_slots].state = SLOT_FREE;
    p->head += k;
    pthread_mutex_unlock(&p->mu);
    return p->failed ? -1 : 0;
}

static int workers_wanted(void)
{
    cpu_set_t set;
    int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    return n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : n;
}

struct cz_pipe *cz_start(int method, int level, int fd, uint64_t at, struct direct_io *direct)
{
    struct cz_pipe *p = calloc(1, sizeof(*p));
    if (!p) {
        direct_finish(direct);
        return NULL;
    }
    p->direct = direct;
    if (direct && (at % PAGE || !(p->sbuf[0] = aligned_alloc(PAGE, SBUF_BYTES)) ||
                   !(p->sbuf[1] = aligned_alloc(PAGE, SBUF_BYTES)))) {
        direct_finish(direct); /* everything through the page cache, as before */
        p->direct = NULL;
    }
    p->s_off = at;
    p->method = method;
    p->level = level;
    p->fd = fd;
    p->at = p->kicked = at;
    p->out_cap = bound(method, CHUNK_BYTES);
    /* RAW (an incremental generation without --compress): no workers; each chunk's CRC-32C is
     * taken as it is queued (cz_submit), and a ring of WRITE_BATCH chunks goes out in one write.
     * Its chunks are often single pages: a hand-off to a worker a chunk cost more than the CRC. */
    int n = method == CRAC_CHUNK_RAW ? 0 : workers_wanted();
    p->n_slots = method == CRAC_CHUNK_RAW ? WRITE_BATCH : 2 * (uint64_t)n + 2;
    p->slots = calloc(p->n_slots, sizeof(*p->slots));
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    if (!p->slots)
        goto fail;
    for (uint64_t i = 0; i < p->n_slots; i++)
        if (method != CRAC_CHUNK_RAW && !(p->slots[i].out = malloc(p->out_cap)))
            goto fail;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&p->workers[i], NULL, worker, p) != 0)
            break;
        p->n_workers++;
    }
    if (p->n_workers || method == CRAC_CHUNK_RAW)
        return p;
fail:
    if (p->slots)
        for (uint64_t i = 0; i < p->n_slots; i++)
            free(p->slots[i].out);
    free(p->slots);
    direct_finish(p->direct);
    free(p->sbuf[0]);
    free(p->sbuf[1]);
    free(p);
    errno = ENOMEM;
    return NULL;
}

uint64_t cz_chunk_pages(const struct cz_pipe *p)
{
    /* Direct, a chunk and the page of its header and gap are one write (image_direct.h; a write
     * is at most a pipe's 256 pages); a write too short for a direct chunk (DIRECT_MIN_PAGES) is
     * not worth keeping chunks to. */
    if (!p->direct)
        return CRAC_CHUNK_MAX_PAGES;
    uint64_t most = direct_run_pages(p->direct) - 1;
    return most < DIRECT_MIN_PAGES ? CRAC_CHUNK_MAX_PAGES - 1 : most;
}

/* A streak's tried chunk, on the caller's thread: 0 when it is to be stored raw at once (its
 * sample does not compress, or its region is kept raw), 1 when a worker is to try it (its sample
 * compresses, it is too short for a sample, or the caller's context cannot be made). */
static int worth_a_worker(struct cz_pipe *p, const struct cz_region *r, const unsigned char *src,
                          uint32_t n)
{
    if (r->raw)
        return 0;
    if ((size_t)n * PAGE < 4 * SAMPLE)
        return 1;
    if (!p->probe_out && !(p->probe_out = malloc(bound(p->method, SAMPLE))))
        return 1;
    if (p->method == CRAC_CHUNK_ZSTD && !p->probe_zctx && !(p->probe_zctx = lib.zstd_create()))
        return 1;
    return sample_compresses(p, p->probe_zctx, p->probe_out, bound(p->method, SAMPLE), src);
}

static struct slot *next_slot(struct cz_pipe *p)
{
    if (p->tail - p->head == p->n_slots && write_head(p) != 0)
        return NULL;
    return &p->slots[p->tail % p->n_slots];
}

/* A slot queued: READY for a worker, or DONE (stored raw at once, an end-of-region marker). Only a
 * READY one wakes a worker: random data's chunks are nearly all DONE, and a wake for each (the
 * worker only stepped past it) doubled the writer's futex calls and context switches. */
static void publish(struct cz_pipe *p, struct slot *s, int state)
{
    pthread_mutex_lock(&p->mu);
    s->state = state;
    p->tail++;
    if (state == SLOT_READY)
        pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

int cz_submit(struct cz_pipe *p, struct cz_region *r, uint64_t first_page, uint32_t n,
              const unsigned char *src, int use)
{
    struct slot *s = next_slot(p);
    if (!s)
        return -1;
    if (use == CZ_COPY) {
        if (!s->in && !(s->in = malloc(CHUNK_BYTES)))
            return -1;
        memcpy(s->in, src, (size_t)n * PAGE);
        src = s->in;
    }
    s->region = r;
    s->first = first_page;
    s->n = n;
    s->src = src;
    s->use = use;
    /* Summed here, while the caller's zero test has just brought the pages into the cache: a
     * worker would read each page from memory once more. */
    s->crc = crc32c_update(0, src, (size_t)n * PAGE);
    if (!p->n_workers) { /* RAW: done here */
        compress_slot(p, s, NULL);
        publish(p, s, SLOT_DONE);
        return 0;
    }
    if (p->raw_streak >= RAW_STREAK &&
        (p->n_submitted++ % TRY_EVERY != 0 || !worth_a_worker(p, r, src, n))) {
        s->method = CRAC_CHUNK_RAW;
        s->stored = n * (uint32_t)PAGE;
        s->tried = 0;
        publish(p, s, SLOT_DONE);
        return 0;
    }
    publish(p, s, SLOT_READY);
    return 0;
}

int cz_end_region(struct cz_pipe *p, struct cz_region *r)
{
    struct slot *s = next_slot(p);
    if (!s)
        return -1;
    *s = (struct slot){.state = s->state, .in = s->in, .out = s->out, .region = r};
    s->method = CRAC_CHUNK_RAW;
    publish(p, s, SLOT_DONE);
    return 0;
}

int cz_finish(struct cz_pipe *p, uint64_t *end)
{
    int rc = 0;
    while (p->head < p->tail)
        if (write_head(p) != 0)
            rc = -1;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->workers[i], NULL);
    /* The bytes collected last, padded to a page (the caller sets the file's size to its end),
     * then every direct write on disk before the caller writes the header and fsyncs. */
    if (p->direct && p->s_len && !p->failed &&
        (sbuf_put(p, zeros, (PAGE - p->s_len % PAGE) % PAGE) != 0 || sbuf_send(p, NULL, 0) != 0))
        p->failed = errno;
    if (direct_finish(p->direct) != 0 && !p->failed)
        p->failed = errno;
    p->direct = NULL;
    free(p->sbuf[0]);
    free(p->sbuf[1]);
    free(p->probe_out);
    if (p->probe_zctx)
        lib.zstd_free(p->probe_zctx);
    for (uint64_t i = 0; i < p->n_slots; i++) {
        free(p->slots[i].in);
        free(p->slots[i].out);
    }
    *end = p->at;
    if (p->failed) {
        errno = p->failed;
        rc = -1;
    }
    free(p->slots);
    free(p);
    return rc;
}
