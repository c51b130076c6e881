/* mpich_topo.c — the MPICH-ABI shim's Cartesian grids, MPI_Topo_test, MPI_Comm_split_type and the
 * predefined error handlers, translated for the libmpi.so.40 shim (docs/MPI.md). */
#include "mpich_shim.h"

static int new_comm(int rc, oh o, MPI_Comm *newcomm)
{
    if (rc == 0)
        *newcomm = comm_out(o);
    return err_out(rc);
}

/* ---- Cartesian grids: dimensions, periods and coordinates are plain ints in both ABIs ---- */

int MPI_Cart_create(MPI_Comm old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, int, const int *, const int *, int, oh *),
                 "MPI_Cart_create")(comm_in(old), ndims, dims, periods, reorder, &o);
    return new_comm(rc, o, newcomm);
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, const int *, oh *), "MPI_Cart_sub")(comm_in(comm), remain_dims, &o);
    return new_comm(rc, o, newcomm);
}

int MPI_Cartdim_get(MPI_Comm comm, int *ndims)
{
    return err_out(OFN(int (*)(oh, int *), "MPI_Cartdim_get")(comm_in(comm), ndims));
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[])
{
    return err_out(OFN(int (*)(oh, int, int *, int *, int *),
                       "MPI_Cart_get")(comm_in(comm), maxdims, dims, periods, coords));
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[])
{
    return err_out(
        OFN(int (*)(oh, int, int, int *), "MPI_Cart_coords")(comm_in(comm), rank, maxdims, coords));
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int *rank)
{
    return err_out(
        OFN(int (*)(oh, const int *, int *), "MPI_Cart_rank")(comm_in(comm), coords, rank));
}

/* A shift off a non-periodic edge gives MPI_PROC_NULL, MPICH's value out. */
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int *source, int *dest)
{
    int s = 0, d = 0;
    int rc = OFN(int (*)(oh, int, int, int *, int *), "MPI_Cart_shift")(comm_in(comm), direction,
                                                                        disp, &s, &d);
    if (rc == 0) {
        *source = rank_out(s);
        *dest = rank_out(d);
    }
    return err_out(rc);
}

int MPI_Topo_test(MPI_Comm comm, int *status)
{
    int t = 0;
    int rc = OFN(int (*)(oh, int *), "MPI_Topo_test")(comm_in(comm), &t);
    if (rc == 0)
        *status = t == OC(MPI_CART)         ? MPI_CART
                  : t == OC(MPI_GRAPH)      ? MPI_GRAPH
                  : t == OC(MPI_DIST_GRAPH) ? MPI_DIST_GRAPH
                                            : undef_out(t);
    return err_out(rc);
}

/* ---- communicators by node, and error handlers ---- */

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    int type =
        split_type == MPI_COMM_TYPE_SHARED ? (int)OC(MPI_COMM_TYPE_SHARED) : undef_in(split_type);
    oh i = predef_handle_in(info); /* MPI_INFO_NULL: info objects are not translated */
    if (!i)
        return MPI_ERR_INFO;
    oh o = NULL;
    int rc = OFN(int (*)(oh, int, int, oh, oh *), "MPI_Comm_split_type")(comm_in(comm), type, key,
                                                                         i, &o);
    return new_comm(rc, o, newcomm);
}

/* Only MPI_ERRORS_ARE_FATAL and MPI_ERRORS_RETURN (MPI_Comm_create_errhandler is not translated:
 * its function would be called with the other ABI's arguments). */
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler eh)
{
    oh o = predef_handle_in(eh);
    if (!o)
        return MPI_ERR_ARG;
    return err_out(OFN(int (*)(oh, oh), "MPI_Comm_set_errhandler")(comm_in(comm), o));
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *eh)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh *), "MPI_Comm_get_errhandler")(comm_in(comm), &o);
    if (rc != 0)
        return err_out(rc);
    int h;
    if (!predef_handle_out(o, &h))
        return MPI_ERR_INTERN; /* a handler this shim never hands out */
    *eh = h;
    return MPI_SUCCESS;
}

int MPI_Errhandler_free(MPI_Errhandler *eh)
{
    oh o = predef_handle_in(*eh);
    if (!o)
        return MPI_ERR_ARG;
    int rc = OFN(int (*)(oh *), "MPI_Errhandler_free")(&o);
    if (rc == 0)
        *eh = MPI_ERRHANDLER_NULL;
    return err_out(rc);
}
