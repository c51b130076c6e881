/* core_digest.h — the page digest of upper.core computed beside the writer (core_digest.c). */
#ifndef CRAC_CORE_DIGEST_H
#define CRAC_CORE_DIGEST_H

#include <stdint.h>

struct core_digest;

/* A helper thread that hashes upper.core (already created at path, final size file_size, the
 * header below header_end written last) chunk by chunk as the writer finishes them. NULL if it
 * cannot start: the caller then hashes the file itself. */
struct core_digest *core_digest_start(const char *path, uint64_t header_end, uint64_t file_size);
/* The writer: every byte of [header_end, final_below) is written and will not change. */
void core_digest_progress(struct core_digest *d, uint64_t final_below);
/* The writer is done (ok: the whole file, header included, is written; else: give up). */
void core_digest_written(struct core_digest *d, int ok);
/* Waits for the thread; the hex digest (unless hex is NULL), or -1 if hashing failed or was
 * given up. Frees d. */
int core_digest_finish(struct core_digest *d, char hex[65]);
/* Gives up and frees d (a checkpoint abandoned after its core was written); NULL is fine. */
void core_digest_cancel(struct core_digest *d);

#endif
