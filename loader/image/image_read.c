/* image_read.c — pread of an exact byte count, shared by every reader of an image file
 * (restart, crac verify's checks, lazy fill, compressed chunks, incremental chains). */
#include "image_read.h"

#include <errno.h>
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
