/* sha256.h — SHA-256 of files, for MANIFEST.json. */
#ifndef CRAC_SHA256_H
#define CRAC_SHA256_H

#include <stddef.h>

/* Hex digest (65 bytes with the NUL) of the file at path; 0, or -1 if it cannot be read. */
int sha256_file(const char *path, char hex[65]);
/* Hex digest of a buffer. */
void sha256_buffer(const void *data, size_t len, char hex[65]);

#endif
