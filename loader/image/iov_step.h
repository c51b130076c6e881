/* iov_step.h — an iovec array moved past the bytes a partial preadv, pwritev or vmsplice took:
 * the loops that go on until every buffer is done share it. */
#ifndef CRAC_IOV_STEP_H
#define CRAC_IOV_STEP_H

#include <stddef.h>
#include <sys/uio.h>

/* Drops the buffers of *IOV (*N of them) that DONE bytes cover and trims the next one. */
static inline void iov_step(struct iovec **iov, int *n, size_t done)
{
    while (*n && done >= (*iov)->iov_len) {
        done -= (*iov)->iov_len;
        (*iov)++;
        (*n)--;
    }
    if (*n) {
        (*iov)->iov_base = (char *)(*iov)->iov_base + done;
        (*iov)->iov_len -= done;
    }
}

#endif
