/* jacobi.c — Jacobi iterations for the Laplace equation on an N x N grid in managed memory. The
 * host reads and writes the managed arrays between kernels: it moves a heat source along the top
 * edge every iteration and computes the residual every 50 iterations. The same iterations on
 * plain host arrays give the reference; the results must match exactly.
 * Usage: jacobi [N] [ITERS] */
#include "common.h"
#include "crac_sim.h"

#include <math.h>
#include <string.h>

CRAC_SIM_KERNEL(jacobi_step, (const double *, u), (double *, unew), (int, n))
{
    int j = (int)(ctx->blockIdx.x * ctx->blockDim.x + ctx->threadIdx.x);
    int i = (int)(ctx->blockIdx.y * ctx->blockDim.y + ctx->threadIdx.y);
    if (i <= 0 || j <= 0 || i >= n - 1 || j >= n - 1)
        return;
    unew[i * n + j] =
        0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
}

/* The host's part of every iteration: the heat source on the top edge moves. */
static void set_boundary(double *u, int n, int it)
{
    for (int j = 0; j < n; j++)
        u[j] = 0.0;
    int hot = 1 + (it / 10) % (n - 2);
    u[hot] = 100.0;
}

static double residual(const double *a, const double *b, int n)
{
    double r = 0;
    for (int k = 0; k < n * n; k++)
        r = fmax(r, fabs(a[k] - b[k]));
    return r;
}

static void reference_step(const double *u, double *unew, int n)
{
    for (int i = 1; i < n - 1; i++)
        for (int j = 1; j < n - 1; j++)
            unew[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] +
                                      u[i * n + j + 1]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 96;
    int iters = argc > 2 ? atoi(argv[2]) : 400;
    if (n < 4 || n > 4096 || iters <= 0) {
        fprintf(stderr, "usage: jacobi [4 <= N <= 4096] [ITERS]\n");
        return 2;
    }
    size_t bytes = (size_t)n * n * sizeof(double);
    double *u, *unew;
    CHECK(cudaMallocManaged((void **)&u, bytes, cudaMemAttachGlobal));
    CHECK(cudaMallocManaged((void **)&unew, bytes, cudaMemAttachGlobal));
    memset(u, 0, bytes); /* host writes managed memory directly */
    memset(unew, 0, bytes);
    double *ref = calloc((size_t)n * n, sizeof(double));
    double *refnew = calloc((size_t)n * n, sizeof(double));
    if (!ref || !refnew)
        return 1;

    dim3 block = {16, 16, 1};
    dim3 grid = {(unsigned)(n + 15) / 16, (unsigned)(n + 15) / 16, 1};
    double last_residual = 0;
    for (int it = 0; it < iters; it++) {
        set_boundary(u, n, it);
        set_boundary(unew, n, it);
        void *args[] = {&u, &unew, &n};
        CHECK(cudaLaunchKernel((const void *)jacobi_step, grid, block, args, 0, NULL));
        CHECK(cudaDeviceSynchronize()); /* before the host touches managed memory again */
        set_boundary(ref, n, it);
        set_boundary(refnew, n, it);
        reference_step(ref, refnew, n);
        if (it % 50 == 49) {
            last_residual = residual(u, unew, n);
            fprintf(stderr, "jacobi: iteration %d residual %.3e\n", it + 1, last_residual);
        }
        double *t = u;
        u = unew;
        unew = t;
        t = ref;
        ref = refnew;
        refnew = t;
    }
    double checksum = 0, diff = residual(u, ref, n);
    for (int k = 0; k < n * n; k++)
        checksum += u[k];
    if (diff != 0.0) {
        fprintf(stderr, "jacobi: device result differs from the host reference by %.3e\n", diff);
        return 1;
    }
    CHECK(cudaFree(u));
    CHECK(cudaFree(unew));
    free(ref);
    free(refnew);
    printf("jacobi: n=%d iters=%d checksum=%.12e residual=%.6e OK\n", n, iters, checksum,
           last_residual);
    return 0;
}
