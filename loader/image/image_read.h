/* image_read.h — reading image files: pread of an exact byte count.
 * One definition for every reader of upper.core and device.img (restart, verify, lazy fill). */
#pragma once

#include <stdint.h>
#include <sys/uio.h>

/* pread of exactly LEN bytes at OFF, retried on EINTR; a short read (past the end of the file)
 * fails with errno EIO, so errno always names this call's failure. 0, or -1. */
int image_pread_full(int fd, void *dst, uint64_t len, uint64_t off);
/* preadv of exactly the N buffers of IOV at OFF, as image_pread_full (IOV is consumed). */
int image_preadv_full(int fd, struct iovec *iov, int n, uint64_t off);
