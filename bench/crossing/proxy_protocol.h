/* proxy_protocol.h — the forwarding baseline's wire format: one fixed-size request and reply per
 * CUDA call over a Unix socket (what a proxy-process design pays per call, docs/ARCHITECTURE.md "The split process"). */
#ifndef CRAC_BENCH_PROXY_PROTOCOL_H
#define CRAC_BENCH_PROXY_PROTOCOL_H

#include <stdint.h>

enum proxy_fn {
    PROXY_GET_LAST_ERROR = 1,
    PROXY_STREAM_QUERY,
    PROXY_STREAM_CREATE,
    PROXY_STREAM_SYNCHRONIZE,
    PROXY_STREAM_DESTROY,
};

struct proxy_request {
    uint32_t fn;
    uint32_t pad;
    uint64_t arg;
};

struct proxy_reply {
    uint64_t ret;
    uint64_t out;
};

/* The server reads requests from this descriptor and writes replies to it. */
#define PROXY_FD 3

#endif
