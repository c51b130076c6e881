/* proxy_server.c — the server half of the forwarding baseline: a separate process that owns the
 * (native sim) CUDA runtime and executes each forwarded call. Started by proxy_client.c. */
#include "proxy_protocol.h"

#include <cuda_runtime_api.h>

#include <stdint.h>
#include <unistd.h>

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int main(void)
{
    struct proxy_request rq;
    while (read_full(PROXY_FD, &rq, sizeof(rq)) == 0) {
        struct proxy_reply rp = {0, 0};
        cudaStream_t s = (cudaStream_t)(uintptr_t)rq.arg;
        switch (rq.fn) {
        case PROXY_GET_LAST_ERROR: rp.ret = cudaGetLastError(); break;
        case PROXY_STREAM_QUERY: rp.ret = cudaStreamQuery(s); break;
        case PROXY_STREAM_SYNCHRONIZE: rp.ret = cudaStreamSynchronize(s); break;
        case PROXY_STREAM_DESTROY: rp.ret = cudaStreamDestroy(s); break;
        case PROXY_STREAM_CREATE:
            rp.ret = cudaStreamCreate(&s);
            rp.out = (uint64_t)(uintptr_t)s;
            break;
        default: rp.ret = cudaErrorNotSupported; break;
        }
        if (write(PROXY_FD, &rp, sizeof(rp)) != (ssize_t)sizeof(rp))
            return 1;
    }
    return 0;
}
