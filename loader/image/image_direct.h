/* image_direct.h — upper.core's page runs written O_DIRECT by reference (vmsplice, splice), past
 * the page cache (forked writer only; CRAC_DIRECT_WRITE=0 turns it off; docs/DECISIONS.md). */
#ifndef CRAC_IMAGE_DIRECT_H
#define CRAC_IMAGE_DIRECT_H

#include <stddef.h>
#include <stdint.h>

struct direct_io;

/* Whether direct writes are wanted: unless CRAC_DIRECT_WRITE=0 (read once). */
int direct_write_requested(void);
/* A second descriptor of PATH (already created, at its final size) opened O_DIRECT, and a pipe;
 * NULL with errno set where the filesystem or the kernel refuses either. */
struct direct_io *direct_open(const char *path);
/* The most pages a write to D should carry: the most whole requests of its disk (its queue's
 * max_segments and max_sectors_kb) that fit in the pipe, so never more than 256 (1 MiB). */
size_t direct_run_pages(const struct direct_io *d);
/* Queues a write of LEN bytes from SRC at OFF (all three multiples of the page size; the first
 * is written before it returns, so a filesystem that refuses O_DIRECT writes fails it with
 * EINVAL). SRC may be unmapped (MADV_DONTNEED) as soon as it returns: the pipe holds the pages.
 * -1 with errno on a failed queueing or an earlier failed write. */
int direct_write(struct direct_io *d, const void *src, size_t len, uint64_t off);
/* As direct_write, for the N (at most DIRECT_IOV_MAX) buffers of IOV one after another (each of
 * whole pages), as one or more writes of at most direct_run_pages. The splicer may still read
 * them after it returns: none may change before direct_finish, or before direct_wait has seen
 * the last of its writes done (direct_count - 1 after it). */
#define DIRECT_IOV_MAX 4
struct iovec;
int direct_writev(struct direct_io *d, const struct iovec *iov, int n, uint64_t off);
/* The writes D took so far: the number the next one will have (from 0). */
uint64_t direct_count(const struct direct_io *d);
/* Waits until write number N is on disk: its buffers may change then. -1 (errno) when a write
 * failed. */
int direct_wait(struct direct_io *d, uint64_t n);
/* Waits until the write before the last has ended, so that the disk is reading the last one's
 * pages: the caller sums them then, while they are read from memory anyway. */
int direct_overlap_sum(struct direct_io *d);
/* Waits for every write, frees D; -1 with errno if any failed or came back short. */
int direct_finish(struct direct_io *d);

/* 1 once a core_write in this process wrote its pages direct, 0 otherwise (CRAC_TIMING). */
extern int direct_write_used;

#endif
