/* image_read.c — pread of an exact byte count, shared by every reader of an image file
 * (restart, crac verify's checks, lazy fill, compressed chunks, incremental chains). */
#include "image_read.h"
#include "iov_step.h"

#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

int image_pread_full(int fd, void *dst, uint64_t len, uint64_t off)
{
    unsigned char *p = dst;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (uint64_t)n;
        off += (uint64_t)n;
    }
    return 0;
}

int image_preadv_full(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n) {
        ssize_t got = preadv(fd, iov, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = EIO;
            return -1;
        }
        off += (uint64_t)got;
        iov_step(&iov, &n, (size_t)got);
    }
    return 0;
}
