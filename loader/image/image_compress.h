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

/* Where one region's chunks went: set by the pipeline as it writes them, in order. */
struct cz_region {
    uint64_t core_offset; /* the region's first chunk (0 until one is written) */
    uint32_t crc32c;      /* CRC-32C over its chunks' crc32c */
    uint32_t pages;
};

struct cz_pipe;

/* Start workers compressing with method/level and writing to fd from offset `at`. */
struct cz_pipe *cz_start(int method, int level, int fd, uint64_t at);
/* Queue n (<= CRAC_CHUNK_MAX_PAGES) consecutive saved pages of r, the first being page
 * first_page of the region. src must stay as it is until cz_finish unless copy is set. */
int cz_submit(struct cz_pipe *p, struct cz_region *r, uint64_t first_page, uint32_t n,
              const unsigned char *src, int copy);
/* Queue the chunk that ends r's stream. */
int cz_end_region(struct cz_pipe *p, struct cz_region *r);
/* Write what is queued, stop the workers; the file's end in *end. 0, or -1 (errno set). */
int cz_finish(struct cz_pipe *p, uint64_t *end);

#endif
