/* mpich_types.c — the MPICH-ABI shim's datatype constructors past contiguous and vector, and
 * MPI_Alloc_mem: translated for the libmpi.so.40 shim, which records and rebuilds (docs/MPI.md). */
#include "mpich_shim.h"

#include <stdlib.h>

static int new_type(int rc, oh o, MPI_Datatype *out)
{
    *out = rc == 0 ? type_out_new(o) : MPI_DATATYPE_NULL;
    return err_out(rc);
}

int MPI_Type_indexed(int count, const int blocklens[], const int displs[], MPI_Datatype old,
                     MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, const int *, const int *, oh, oh *),
                 "MPI_Type_indexed")(count, blocklens, displs, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_indexed_block(int count, int blocklen, const int displs[], MPI_Datatype old,
                                  MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, int, const int *, oh, oh *),
                 "MPI_Type_create_indexed_block")(count, blocklen, displs, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_hvector(int count, int blocklen, MPI_Aint stride, MPI_Datatype old,
                            MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, int, MPI_Aint, oh, oh *),
                 "MPI_Type_create_hvector")(count, blocklen, stride, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_hindexed(int count, const int blocklens[], const MPI_Aint displs[],
                             MPI_Datatype old, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, const int *, const MPI_Aint *, oh, oh *),
                 "MPI_Type_create_hindexed")(count, blocklens, displs, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_hindexed_block(int count, int blocklen, const MPI_Aint displs[],
                                   MPI_Datatype old, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, int, const MPI_Aint *, oh, oh *),
                 "MPI_Type_create_hindexed_block")(count, blocklen, displs, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_struct(int count, const int blocklens[], const MPI_Aint displs[],
                           const MPI_Datatype types[], MPI_Datatype *out)
{
    if (count < 0)
        return MPI_ERR_COUNT;
    oh *in = malloc(sizeof(oh) * (size_t)(count ? count : 1));
    if (!in)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < count; i++)
        in[i] = type_in(types[i]);
    oh o = NULL;
    int rc = OFN(int (*)(int, const int *, const MPI_Aint *, const oh *, oh *),
                 "MPI_Type_create_struct")(count, blocklens, displs, in, &o);
    free(in);
    return new_type(rc, o, out);
}

int MPI_Type_create_resized(MPI_Datatype old, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, MPI_Aint, MPI_Aint, oh *), "MPI_Type_create_resized")(type_in(old), lb,
                                                                                   extent, &o);
    return new_type(rc, o, out);
}

int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[],
                             int order, MPI_Datatype old, MPI_Datatype *out)
{
    int o_order = order == MPI_ORDER_C         ? (int)OC(MPI_ORDER_C)
                  : order == MPI_ORDER_FORTRAN ? (int)OC(MPI_ORDER_FORTRAN)
                                               : -1;
    if (o_order < 0)
        return MPI_ERR_ARG;
    oh o = NULL;
    int rc =
        OFN(int (*)(int, const int *, const int *, const int *, int, oh, oh *),
            "MPI_Type_create_subarray")(ndims, sizes, subsizes, starts, o_order, type_in(old), &o);
    return new_type(rc, o, out);
}

int MPI_Type_dup(MPI_Datatype old, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh *), "MPI_Type_dup")(type_in(old), &o);
    return new_type(rc, o, out);
}

/* ---- memory for one-sided communication or fast messages: the library's ---- */

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    oh i = predef_handle_in(info); /* MPI_INFO_NULL: info objects are not translated */
    if (!i)
        return MPI_ERR_INFO;
    return err_out(OFN(int (*)(MPI_Aint, oh, void *), "MPI_Alloc_mem")(size, i, baseptr));
}

int MPI_Free_mem(void *base) { return err_out(OFN(int (*)(void *), "MPI_Free_mem")(base)); }
