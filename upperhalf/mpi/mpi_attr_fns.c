/* mpi_attr_fns.c — the predefined attribute copy and delete functions (MPI_COMM_NULL_COPY_FN,
 * MPI_COMM_DUP_FN ... are Open MPI's OMPI_C_* functions): what the standard says they do. */
#include "mpi_shim.h"

#include <string.h>

/* Copy nothing: the attribute is not copied to the new object. */
static int null_copy(void *attribute_val_out, int *flag)
{
    (void)attribute_val_out;
    *flag = 0;
    return MPI_SUCCESS;
}

/* Copy the attribute's value (a pointer-sized word) as it is. */
static int dup_copy(void *attribute_val_in, void *attribute_val_out, int *flag)
{
    memcpy(attribute_val_out, &attribute_val_in, sizeof(void *));
    *flag = 1;
    return MPI_SUCCESS;
}

int OMPI_C_MPI_COMM_NULL_COPY_FN(MPI_Comm comm, int keyval, void *extra, void *in, void *out,
                                 int *flag)
{
    (void)comm, (void)keyval, (void)extra, (void)in;
    return null_copy(out, flag);
}

int OMPI_C_MPI_NULL_COPY_FN(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)comm, (void)keyval, (void)extra, (void)in;
    return null_copy(out, flag);
}

int OMPI_C_MPI_TYPE_NULL_COPY_FN(MPI_Datatype type, int keyval, void *extra, void *in, void *out,
                                 int *flag)
{
    (void)type, (void)keyval, (void)extra, (void)in;
    return null_copy(out, flag);
}

int OMPI_C_MPI_WIN_NULL_COPY_FN(MPI_Win win, int keyval, void *extra, void *in, void *out,
                                int *flag)
{
    (void)win, (void)keyval, (void)extra, (void)in;
    return null_copy(out, flag);
}

int OMPI_C_MPI_COMM_DUP_FN(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)comm, (void)keyval, (void)extra;
    return dup_copy(in, out, flag);
}

int OMPI_C_MPI_DUP_FN(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)comm, (void)keyval, (void)extra;
    return dup_copy(in, out, flag);
}

int OMPI_C_MPI_TYPE_DUP_FN(MPI_Datatype type, int keyval, void *extra, void *in, void *out,
                           int *flag)
{
    (void)type, (void)keyval, (void)extra;
    return dup_copy(in, out, flag);
}

int OMPI_C_MPI_WIN_DUP_FN(MPI_Win win, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)win, (void)keyval, (void)extra;
    return dup_copy(in, out, flag);
}

int OMPI_C_MPI_COMM_NULL_DELETE_FN(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)keyval, (void)val, (void)extra;
    return MPI_SUCCESS;
}

int OMPI_C_MPI_NULL_DELETE_FN(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)keyval, (void)val, (void)extra;
    return MPI_SUCCESS;
}

int OMPI_C_MPI_TYPE_NULL_DELETE_FN(MPI_Datatype type, int keyval, void *val, void *extra)
{
    (void)type, (void)keyval, (void)val, (void)extra;
    return MPI_SUCCESS;
}

int OMPI_C_MPI_WIN_NULL_DELETE_FN(MPI_Win win, int keyval, void *val, void *extra)
{
    (void)win, (void)keyval, (void)val, (void)extra;
    return MPI_SUCCESS;
}
