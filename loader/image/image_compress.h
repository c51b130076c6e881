/* image_compress.h — compressed regions of upper.core: the codecs (libzstd.so.1, liblz4.so.1
 * loaded with dlopen) and the chunk pipeline that compresses on worker threads (docs/IMAGE.md). */
#ifndef CRAC_IMAGE_COMPRESS_H
#define CRAC_IMAGE_COMPRESS_H

#include "crac_image.h"

#include <stddef.h>
#include <stdint.h>

/* Parse "none", "lz4", "zstd" or "zstd:LEVEL" (1..19) into a CRAC_CHUNK_* method (RAW for none)
 * and a level; -1 if it is none of them. */
int compress_parse(const char *spec, int *method, int *level);
const char *compress_name(int method);

/* Load the library of method (no-op for RAW). 0, or -1 with a one-line reason in err. */
int compress_load(int method, char *err, size_t errlen);

/* Decompress exactly raw_len bytes into dst; -1 if the stored bytes do not make exactly that. */
int compress_decompress(int method, unsigned char *dst, size_t raw_len, const unsigned char *src,
                        size_t stored_len);

/* Reading a compressed region's chunks back (restart, `crac verify`, lazy restart): one chunk
 * header at a time, checked (magic, method, count, order, inside the region and, for a
 * FILE_PRIVATE region, in its bitmap), then its pages decompressed and checked against the
 * chunk's CRC-32C. */
struct cz_reader {
    int fd;
    uint64_t pos;     /* the next chunk header */
    uint64_t data_at; /* the stored bytes of the chunk cz_read_next returned */
    uint64_t n_pages, next;
    const unsigned char *bitmap; /* FILE_PRIVATE: the saved pages; NULL otherwise */
    unsigned char *stored;       /* scratch for compressed bytes (made on first use) */
    /* Read ahead: the file's bytes [ahead_at, ahead_at + ahead_len), so that a stream of small
     * chunks (an incremental generation's: often one page each) costs one read per window, not
     * two per chunk (made on first use). */
    unsigned char *ahead;
    uint64_t ahead_at, ahead_len;
    /* The next header is read alone (a small read), not with a window of what follows it: set by
     * a caller that skips the chunks' bytes, and after a chunk too large for the window (whose
     * bytes go straight to their place: the window would read them twice). */
    int headers_only, large_before;
};

/* Start at a region's first chunk (core_offset) of a region of n_pages pages. */
void cz_read_begin(struct cz_reader *rd, int fd, uint64_t core_offset, uint64_t n_pages,
                   const unsigned char *bitmap);
/* The next chunk's header in *h: 1, 0 at the region's end marker, -1 when unreadable or not a
 * valid next chunk. */
int cz_read_next(struct cz_reader *rd, struct crac_chunk_hdr *h);
/* The pages of the chunk cz_read_next just returned, into dst (h->n_pages pages), checked
 * against its CRC-32C: 0; -1 unreadable or damaged; -2 the codec's library cannot be loaded
 * (err says which). */
int cz_read_pages(struct cz_reader *rd, const struct crac_chunk_hdr *h, unsigned char *dst,
                  char *err, size_t errlen);
/* The pages of a RAW chunk cz_read_next just returned, checked against its CRC-32C, where they
 * lie in the read-ahead window (no copy); NULL when the chunk is not RAW, is too large for the
 * window, or cannot be read or checked: then cz_read_pages says which. */
const unsigned char *cz_read_raw(struct cz_reader *rd, const struct crac_chunk_hdr *h);
/* Release the scratch buffers. */
void cz_read_end(struct cz_reader *rd);

/* Where one region's chunks went: set by the pipeline as it writes them, in order. */
struct cz_region {
    uint64_t core_offset; /* the region's first chunk (0 until one is written) */
    uint32_t crc32c;      /* CRC-32C over its chunks' crc32c */
    uint32_t pages;
    /* Its chunks stored RAW whatever the method: shared memory, which the restart of a tree
     * reads in Python (crac_py/launch/share.py), without zstd or lz4. */
    int raw;
};

struct cz_pipe;
struct direct_io;

/* Start workers compressing with method/level and writing to fd from offset `at`. With DIRECT
 * (the pipeline owns it from here, even when this fails), the long RAW chunks of the program's
 * memory go O_DIRECT by reference, each after a gap that puts its bytes on a page. */
struct cz_pipe *cz_start(int method, int level, int fd, uint64_t at, struct direct_io *direct);
/* The most pages a chunk should hold: CRAC_CHUNK_MAX_PAGES, or while chunks go O_DIRECT one less
 * than a direct write's pages (a chunk and its header's page are one write: direct_run_pages). */
uint64_t cz_chunk_pages(const struct cz_pipe *p);
/* How cz_submit may treat src: copied first (a bounce buffer, reused), or dropped with
 * MADV_DONTNEED once written (the forked writer's copy-on-write view of private memory: the
 * program's next store to it is then no copy, as image_core.c does for uncompressed runs). */
enum { CZ_KEEP, CZ_COPY, CZ_DROP };
/* Queue n (<= cz_chunk_pages) consecutive saved pages of r, the first being page
 * first_page of the region. src must stay as it is until cz_finish unless use is CZ_COPY. */
int cz_submit(struct cz_pipe *p, struct cz_region *r, uint64_t first_page, uint32_t n,
              const unsigned char *src, int use);
/* Queue the chunk that ends r's stream. */
int cz_end_region(struct cz_pipe *p, struct cz_region *r);
/* Write what is queued, stop the workers; the file's end in *end. 0, or -1 (errno set). */
int cz_finish(struct cz_pipe *p, uint64_t *end);

#endif
