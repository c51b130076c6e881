/* mpi_cart.c — Cartesian topologies (MPI_Cart_create and its queries): a communicator of the
 * first ranks, made as any other, with its grid kept on its record in upper memory. */
#include "mpi_shim.h"

#include <stdlib.h>
#include <string.h>

#define CART_DIMS_MAX 16

struct vcart {
    int ndims;
    int dims[CART_DIMS_MAX], periods[CART_DIMS_MAX];
};

static struct vcart *cart_of(MPI_Comm comm)
{
    struct vcomm *c = comm_v(comm);
    return c ? c->cart : NULL;
}

/* NEWCOMM's record gets the grid (NDIMS, DIMS, PERIODS): no library call, so no checkpoint
 * between the communicator and its grid can lose either (the program's thread sets it again
 * after a restart, before it returns). */
static int cart_attach(MPI_Comm newcomm, int ndims, const int dims[], const int periods[])
{
    struct vcomm *c = comm_v(newcomm);
    if (!c)
        return MPI_SUCCESS; /* MPI_COMM_NULL: a rank outside the grid */
    struct vcart *g = calloc(1, sizeof(*g));
    if (!g)
        return MPI_ERR_NO_MEM;
    g->ndims = ndims;
    for (int i = 0; i < ndims; i++) {
        g->dims[i] = dims[i];
        g->periods[i] = periods[i] != 0;
    }
    c->cart = g;
    return MPI_SUCCESS;
}

int MPI_Cart_create(MPI_Comm old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm)
{
    (void)reorder; /* ranks kept: the standard lets an implementation not reorder */
    struct vcomm *c = comm_v(old);
    if (!c || c->inter)
        return MPI_ERR_COMM;
    if (ndims < 0 || ndims > CART_DIMS_MAX)
        return MPI_ERR_DIMS;
    long n = 1;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] <= 0)
            return MPI_ERR_DIMS;
        n *= dims[i];
    }
    if (n > c->size)
        return MPI_ERR_DIMS;
    int rc = MPI_Comm_split(old, c->rank < n ? 0 : MPI_UNDEFINED, c->rank, newcomm);
    return rc == MPI_SUCCESS ? cart_attach(*newcomm, ndims, dims, periods) : rc;
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    *ndims = g->ndims;
    return MPI_SUCCESS;
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    if (rank < 0 || rank >= comm_v(comm)->size || maxdims < g->ndims)
        return MPI_ERR_ARG;
    for (int i = g->ndims - 1; i >= 0; i--) { /* row-major: the last dimension varies fastest */
        coords[i] = rank % g->dims[i];
        rank /= g->dims[i];
    }
    return MPI_SUCCESS;
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    if (maxdims < g->ndims)
        return MPI_ERR_ARG;
    memcpy(dims, g->dims, sizeof(int) * (size_t)g->ndims);
    memcpy(periods, g->periods, sizeof(int) * (size_t)g->ndims);
    return MPI_Cart_coords(comm, comm_v(comm)->rank, maxdims, coords);
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    int r = 0;
    for (int i = 0; i < g->ndims; i++) {
        int x = coords[i];
        if (g->periods[i])
            x = ((x % g->dims[i]) + g->dims[i]) % g->dims[i];
        else if (x < 0 || x >= g->dims[i])
            return MPI_ERR_ARG;
        r = r * g->dims[i] + x;
    }
    *rank = r;
    return MPI_SUCCESS;
}

/* The neighbour DISP steps along DIRECTION, or MPI_PROC_NULL past a non-periodic edge. */
static int cart_step(MPI_Comm comm, const struct vcart *g, const int *here, int direction, int disp)
{
    int at[CART_DIMS_MAX];
    memcpy(at, here, sizeof(int) * (size_t)g->ndims);
    at[direction] += disp;
    if (!g->periods[direction] && (at[direction] < 0 || at[direction] >= g->dims[direction]))
        return MPI_PROC_NULL;
    int r = MPI_PROC_NULL;
    MPI_Cart_rank(comm, at, &r);
    return r;
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *source, int *dest)
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    if (direction < 0 || direction >= g->ndims)
        return MPI_ERR_ARG;
    int here[CART_DIMS_MAX];
    MPI_Cart_coords(comm, comm_v(comm)->rank, CART_DIMS_MAX, here);
    *dest = cart_step(comm, g, here, direction, disp);
    *source = cart_step(comm, g, here, direction, -disp);
    return MPI_SUCCESS;
}

/* The grids of the dimensions REMAIN_DIMS keeps: one communicator per value of the others. */
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    struct vcart *g = cart_of(comm);
    if (!g)
        return MPI_ERR_TOPOLOGY;
    int here[CART_DIMS_MAX], dims[CART_DIMS_MAX], periods[CART_DIMS_MAX];
    MPI_Cart_coords(comm, comm_v(comm)->rank, CART_DIMS_MAX, here);
    int color = 0, key = 0, n = 0;
    for (int i = 0; i < g->ndims; i++) {
        if (remain_dims[i]) {
            key = key * g->dims[i] + here[i];
            dims[n] = g->dims[i];
            periods[n++] = g->periods[i];
        } else {
            color = color * g->dims[i] + here[i];
        }
    }
    int rc = MPI_Comm_split(comm, color, key, newcomm);
    if (rc != MPI_SUCCESS)
        return rc;
    if (n == 0) { /* every dimension dropped: a 0-dimensional grid of one process */
        dims[0] = 1;
        periods[0] = 0;
    }
    return cart_attach(*newcomm, n, dims, periods);
}

/* MPI_Comm_dup keeps the grid. */
int mpi_cart_copy(struct vcomm *from, MPI_Comm to)
{
    struct vcomm *t = comm_v(to);
    if (!from->cart || !t)
        return MPI_SUCCESS;
    return cart_attach(to, from->cart->ndims, from->cart->dims, from->cart->periods);
}
