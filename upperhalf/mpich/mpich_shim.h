/* mpich_shim.h — the MPICH-ABI MPI shim (libmpich.so.12 / libmpi.so.12, docs/MPI.md): a program's
 * MPICH handles, statuses and constants translated to the libmpi.so.40 shim's, which does the rest. */
#ifndef CRAC_MPICH_SHIM_H
#define CRAC_MPICH_SHIM_H

#include <mpi.h> /* MPICH's: the compiler checks every function against it */

#include "mpich_consts_gen.h"

#include <stddef.h>
#include <stdint.h>

/* A handle of the libmpi.so.40 shim (Open MPI's ABI: a pointer). */
typedef void *oh;

/* Open MPI's MPI_Status (its mpi.h, struct ompi_status_public_t). */
struct ostatus {
    int source, tag, error, cancelled;
    size_t ucount;
};

/* The libmpi.so.40 shim's function NAME (dies when it has none). */
void *o_fn(const char *name);
#define OFN(type, name)                                                                            \
    ({                                                                                             \
        static __typeof__(type) f_;                                                                \
        if (!f_)                                                                                   \
            f_ = (type)o_fn(name);                                                                 \
        f_;                                                                                        \
    })
#define OC(name) crac_ompi_consts[OC_##name]

/* ---- handles (mpich_handles.c): predefined ones by MPI name, created ones in tables ---- */
oh predef_handle_in(int h);          /* any kind's predefined object (errhandlers, MPI_INFO_NULL) */
int predef_handle_out(oh o, int *h); /* 1 and *H when O is predefined in MPICH too */
oh comm_in(MPI_Comm c);              /* NULL for an unknown handle: the shim answers MPI_ERR_COMM */
MPI_Comm comm_out(oh o);             /* a new handle for a new communicator, or a predefined one */
void comm_forget(MPI_Comm c);        /* freed by the program */
oh type_in(MPI_Datatype t);
MPI_Datatype type_out_new(oh o);
MPI_Datatype type_out(oh o); /* an existing type's handle (a user operation's argument) */
void type_forget(MPI_Datatype t);
oh op_in(MPI_Op o);
MPI_Op op_out_new(oh o);
void op_forget(MPI_Op o);
oh group_in(MPI_Group g);  /* NULL for an unknown handle: the shim answers MPI_ERR_GROUP */
MPI_Group group_out(oh o); /* a new handle for a new group, or MPI_GROUP_EMPTY / MPI_GROUP_NULL */
void group_forget(MPI_Group g);
oh req_in(MPI_Request r);
MPI_Request req_out_new(oh o);
/* *R after the shim's call left its request O: MPI_REQUEST_NULL (the slot freed) when the shim
 * freed it, unchanged otherwise. */
void req_update(MPI_Request *r, oh o);
oh o_request_null(void);
/* A nonblocking send or receive (F: the shim's MPI_Isend, MPI_Irecv, MPI_Issend ...): the
 * program's request for the shim's (mpich_api.c). */
typedef int (*f_post)(const void *, int, oh, int, int, oh, oh *);
int mpich_post(f_post f, const void *buf, int count, MPI_Datatype t, int peer, int tag,
               MPI_Comm comm, MPI_Request *req);

/* ---- constants and statuses (mpich_handles.c) ---- */
int rank_in(int r); /* MPI_ANY_SOURCE, MPI_PROC_NULL, MPI_ROOT */
int rank_out(int r);
int tag_in(int t);
int tag_out(int t);
int undef_out(int v); /* MPI_UNDEFINED */
int undef_in(int v);
const void *buf_in(const void *p); /* MPI_IN_PLACE */
int err_in(int e);
int err_out(int e);
/* The shim's status argument for the program's ST (NULL for MPI_STATUS_IGNORE). */
struct ostatus *status_arg(MPI_Status *st, struct ostatus *tmp);
void status_out(MPI_Status *st, const struct ostatus *o); /* no-op for MPI_STATUS_IGNORE */
const struct ostatus *status_in(struct ostatus *o, const MPI_Status *st);

#endif
