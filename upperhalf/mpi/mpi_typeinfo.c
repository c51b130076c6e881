/* mpi_typeinfo.c — what a datatype is made of (MPI_Type_get_envelope, MPI_Type_get_contents),
 * answered from its record (the library below may be MPICH, whose combiner values differ); a
 * status's fields the program sets; what a communicator is besides its members. */
#include "mpi_shim.h"

static struct vtype *vtype_of(MPI_Datatype t)
{
    struct vtype *v = (struct vtype *)(void *)t;
    return !predef_lower((void *)t) && v && v->magic == VMAGIC ? v : NULL;
}

int MPI_Type_get_envelope(MPI_Datatype type, int *num_integers, int *num_addresses,
                          int *num_datatypes, int *combiner)
{
    struct vtype *v = vtype_of(type);
    *num_addresses = 0;
    if (!v) {
        if (!predef_lower((void *)type))
            return MPI_ERR_TYPE;
        *num_integers = *num_datatypes = 0;
        *combiner = MPI_COMBINER_NAMED;
        return MPI_SUCCESS;
    }
    *num_datatypes = 1;
    *num_integers = v->ctor == VT_CONTIG ? 1 : 3;
    *combiner = v->ctor == VT_CONTIG ? MPI_COMBINER_CONTIGUOUS : MPI_COMBINER_VECTOR;
    return MPI_SUCCESS;
}

int MPI_Type_get_contents(MPI_Datatype type, int max_integers, int max_addresses, int max_datatypes,
                          int integers[], MPI_Aint addresses[], MPI_Datatype datatypes[])
{
    (void)max_addresses, (void)addresses;
    struct vtype *v = vtype_of(type);
    if (!v) /* a predefined type has no contents */
        return predef_lower((void *)type) ? MPI_ERR_ARG : MPI_ERR_TYPE;
    int n = v->ctor == VT_CONTIG ? 1 : 3;
    if (max_integers < n || max_datatypes < 1)
        return MPI_ERR_ARG;
    integers[0] = v->count;
    if (v->ctor == VT_VECTOR) {
        integers[1] = v->blocklen;
        integers[2] = v->stride;
    }
    /* The program frees a derived type it gets here: it would free the record this one uses. */
    if (!predef_lower((void *)v->old))
        return mpi_refused("MPI_Type_get_contents (of a type made from a derived type)");
    datatypes[0] = v->old;
    return MPI_SUCCESS;
}

/* A status is the program's (Open MPI's layout, whatever library is below). */
int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype type, MPI_Count count)
{
    int size = 0;
    int rc = L("MPI_Type_size", U(type_real(type)), U(&size));
    if (rc == MPI_SUCCESS)
        status->_ucount = (size_t)count * (size_t)size;
    return rc;
}

int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype type, int count)
{
    return MPI_Status_set_elements_x(status, type, count);
}

int MPI_Status_set_cancelled(MPI_Status *status, int flag)
{
    status->_cancelled = flag != 0;
    return MPI_SUCCESS;
}

/* Cartesian grids only (mpi_cart.c): graph topologies are refused. */
int MPI_Topo_test(MPI_Comm comm, int *status)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    *status = c->cart ? MPI_CART : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

/* No process is spawned here (MPI_Comm_spawn is refused). */
int MPI_Comm_get_parent(MPI_Comm *parent)
{
    *parent = MPI_COMM_NULL;
    return MPI_SUCCESS;
}
