/* proxy_client.c — the client half of the forwarding baseline: a libcudart.so.13 (same soname and
 * symbol version as NVIDIA's) whose entry points send each call to proxy_server over a Unix socket
 * and wait for the reply. Preloaded into crossing_app by bench/crossing.py. */
#define _POSIX_C_SOURCE 200809L
#include "proxy_protocol.h"

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static int sock = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void start_server(void)
{
    int sv[2];
    const char *server = getenv("CRAC_BENCH_PROXY_SERVER");
    if (!server || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        fprintf(stderr, "proxy: CRAC_BENCH_PROXY_SERVER unset or socketpair failed\n");
        exit(1);
    }
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("LD_PRELOAD"); /* the server runs the real (native sim) library */
        dup2(sv[1], PROXY_FD);
        execl(server, server, (char *)NULL);
        _exit(127);
    }
    close(sv[1]);
    sock = sv[0];
}

static uint64_t call(uint32_t fn, uint64_t arg, uint64_t *out)
{
    struct proxy_request rq = {fn, 0, arg};
    struct proxy_reply rp;
    pthread_mutex_lock(&lock);
    if (sock < 0)
        start_server();
    if (write(sock, &rq, sizeof(rq)) != (ssize_t)sizeof(rq) ||
        recv(sock, &rp, sizeof(rp), MSG_WAITALL) != (ssize_t)sizeof(rp)) {
        fprintf(stderr, "proxy: the server went away\n");
        exit(1);
    }
    pthread_mutex_unlock(&lock);
    if (out)
        *out = rp.out;
    return rp.ret;
}

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    return (cudaError_t)call(PROXY_GET_LAST_ERROR, 0, NULL);
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t s)
{
    return (cudaError_t)call(PROXY_STREAM_QUERY, (uint64_t)(uintptr_t)s, NULL);
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s)
{
    return (cudaError_t)call(PROXY_STREAM_SYNCHRONIZE, (uint64_t)(uintptr_t)s, NULL);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s)
{
    return (cudaError_t)call(PROXY_STREAM_DESTROY, (uint64_t)(uintptr_t)s, NULL);
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s)
{
    uint64_t out = 0;
    cudaError_t r = (cudaError_t)call(PROXY_STREAM_CREATE, 0, &out);
    *s = (cudaStream_t)(uintptr_t)out;
    return r;
}
