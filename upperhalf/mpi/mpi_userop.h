/* mpi_userop.h — user reduction operations (MPI_Op_create, docs/MPI.md "User operations"): the
 * TLS-free trampolines the lower library calls, and the queue they hand each call over on. */
#ifndef CRAC_MPI_USEROP_H
#define CRAC_MPI_USEROP_H

#include "../upper_executor.h"
#include "mpi_tramps.h"

#include <stdint.h>

#define UOP_MAX MPI_TRAMP_SLOTS /* user operations alive at once: one trampoline each */

/* One call of a user function, on the stack of the thread the library called the trampoline on
 * (it waits until the executor is done with it). */
struct uop_call {
    struct upper_job job; /* first: the executor's job is the call */
    int slot;
    void *in, *inout;
    int *len;
    void *ltype; /* the library's MPI_Datatype * (a pointer or an int handle) */
};

typedef void (*uop_tramp_fn)(void *, void *, int *, void *);
extern const uop_tramp_fn uop_tramps[UOP_MAX];
extern struct upper_queue uop_queue; /* the calls the executor runs */
/* The executor's part of a call (mpi_userop.c): data, so the TLS-free trampolines reference no
 * code outside their group. */
extern void (*const uop_run)(struct upper_job *);

void mpi_userop_rebuild(void); /* at restart: every live user operation created again */

#endif
