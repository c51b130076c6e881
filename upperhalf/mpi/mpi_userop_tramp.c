/* mpi_userop_tramp.c — the functions the lower MPI library calls for a user MPI_Op: they run with
 * the lower half's fs, so they are TLS-free (atomics, raw futex) and hand the call to the shim's
 * upper executor thread (mpi_userop.c), waiting until it has run the program's function. */
#include "mpi_userop.h"

struct upper_queue uop_queue;

static void post_and_wait(int slot, void *in, void *inout, int *len, void *ltype)
{
    struct uop_call c;
    c.job.run = uop_run;
    c.slot = slot;
    c.in = in;
    c.inout = inout;
    c.len = len;
    c.ltype = ltype;
    upper_post_and_wait(&uop_queue, &c.job);
}

#define TRAMP(i)                                                                                   \
    static void tramp_##i(void *in, void *inout, int *len, void *ltype)                            \
    {                                                                                              \
        post_and_wait(i, in, inout, len, ltype);                                                   \
    }
MPI_TRAMP_EACH(TRAMP)

const uop_tramp_fn uop_tramps[UOP_MAX] = {MPI_TRAMP_LIST(tramp_)};
