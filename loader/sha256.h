/* sha256.h — SHA-256 of files, for MANIFEST.json. */
#ifndef CRAC_SHA256_H
#define CRAC_SHA256_H

#include <stddef.h>

/* Hex digest (65 bytes with the NUL) of the file at path; 0, or -1 if it cannot be read. */
int sha256_file(const char *path, char hex[65]);
/* The page digest of a sparse file (docs/IMAGE.md): SHA-256 over, for every 4 KiB page that is
 * not all zeros, its index (u64, little-endian) then its bytes, holes skipped unread. */
int sha256_pages_file(const char *path, char hex[65]);
/* Hex digest of a buffer. */
void sha256_buffer(const void *data, size_t len, char hex[65]);

#endif
