/* sha256.h — SHA-256 of files, for MANIFEST.json. */
#ifndef CRAC_SHA256_H
#define CRAC_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Hex digest (65 bytes with the NUL) of the file at path; 0, or -1 if it cannot be read. */
int sha256_file(const char *path, char hex[65]);
/* The same, remembered in *memo with the file's identity and times: a file hashed at every
 * checkpoint (the program, the loader) is read again only when its size, mtime or ctime moved
 * or it is another file. */
struct sha256_memo {
    int valid;
    uint64_t dev, ino, size, mtime_ns, ctime_ns;
    char hex[65];
};
int sha256_file_memo(struct sha256_memo *memo, const char *path, char hex[65]);
/* The page digest of a sparse file (docs/IMAGE.md, "Checksums"): the file is cut into chunks of
 * SHA256_PAGES_CHUNK pages; a chunk's digest is SHA-256 over, for every 4 KiB page of it that is
 * not all zeros, its index in the file (u64, little-endian) then its bytes (holes skipped
 * unread); the file's digest is SHA-256 over the chunk digests in order. Chunks can be hashed in
 * any order, so the hashing can follow the writer (page_digest.c). */
#define SHA256_PAGES_CHUNK 16384ULL /* 64 MiB */
#define SHA256_PAGES_CHUNK_BYTES (SHA256_PAGES_CHUNK * 4096)
#define SHA256_PAGES_SCRATCH (1 << 20) /* the buffer sha256_pages_chunk reads through */
static inline uint64_t sha256_pages_chunks(uint64_t file_size)
{
    return (file_size + SHA256_PAGES_CHUNK_BYTES - 1) / SHA256_PAGES_CHUNK_BYTES;
}
/* Chunk `chunk` of the open file fd of file_size bytes into out; buf: SHA256_PAGES_SCRATCH
 * bytes of scratch. */
int sha256_pages_chunk(int fd, uint64_t chunk, uint64_t file_size, unsigned char out[32],
                       unsigned char *buf);
/* Hex SHA-256 of n chunk digests laid end to end: the page digest. */
void sha256_of_digests(const unsigned char *digests, size_t n, char hex[65]);
/* The page digest of the file at path, chunk after chunk. */
int sha256_pages_file(const char *path, char hex[65]);
/* Hex digest of a buffer. */
void sha256_buffer(const void *data, size_t len, char hex[65]);

#endif
