/* image_direct.h — upper.core's page runs written with O_DIRECT and Linux AIO, behind the page
 * cache (CRAC_DIRECT_WRITE=1, the forked writer only; docs/DECISIONS.md "Direct writes"). */
#ifndef CRAC_IMAGE_DIRECT_H
#define CRAC_IMAGE_DIRECT_H

#include <stddef.h>
#include <stdint.h>

struct direct_io;

/* Whether CRAC_DIRECT_WRITE asks for direct writes (read once). */
int direct_write_requested(void);
/* A second descriptor of PATH (already created, at its final size) opened O_DIRECT, and an AIO
 * context; NULL with errno set where the filesystem or the kernel refuses either. */
struct direct_io *direct_open(const char *path);
/* Queues a write of LEN bytes from SRC at OFF (all three multiples of the page size). SRC must
 * stay allocated until direct_finish; it may be unmapped (MADV_DONTNEED) meanwhile: the kernel
 * holds the pages it writes. -1 with errno on a failed submission or an earlier failed write. */
int direct_write(struct direct_io *d, const void *src, size_t len, uint64_t off);
/* Waits for every write, frees D; -1 with errno if any failed or came back short. */
int direct_finish(struct direct_io *d);

/* 1 once a core_write in this process wrote its pages direct, 0 otherwise (CRAC_TIMING). */
extern int direct_write_used;

#endif
