/* page_digest.h — the page digest of an image file (upper.core, device.img) computed beside its
 * writer (page_digest.c). */
#ifndef CRAC_PAGE_DIGEST_H
#define CRAC_PAGE_DIGEST_H

#include <stdint.h>

struct page_digest;

/* A helper thread that hashes the file at path (already created, final size file_size, the
 * header below header_end written last, the rest in file order) chunk by chunk as the writer
 * finishes them. NULL if it cannot start: publish then hashes the file itself. */
struct page_digest *page_digest_start(const char *path, uint64_t header_end, uint64_t file_size);
/* The writer: every byte of [header_end, final_below) is written and will not change. */
void page_digest_progress(struct page_digest *d, uint64_t final_below);
/* The writer is done (ok: the whole file, header included, is written; else: give up). */
void page_digest_written(struct page_digest *d, int ok);
/* Waits for the thread; the hex digest (unless hex is NULL), or -1 if hashing failed or was
 * given up. Frees d. */
int page_digest_finish(struct page_digest *d, char hex[65]);
/* Gives up and frees d (a checkpoint abandoned after its core was written); NULL is fine. */
void page_digest_cancel(struct page_digest *d);

#endif
