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
TRAMP(0)
TRAMP(1)
TRAMP(2)
TRAMP(3)
TRAMP(4)
TRAMP(5)
TRAMP(6)
TRAMP(7)
TRAMP(8)
TRAMP(9)
TRAMP(10)
TRAMP(11)
TRAMP(12)
TRAMP(13)
TRAMP(14)
TRAMP(15)

const uop_tramp_fn uop_tramps[UOP_MAX] = {
    tramp_0, tramp_1, tramp_2,  tramp_3,  tramp_4,  tramp_5,  tramp_6,  tramp_7,
    tramp_8, tramp_9, tramp_10, tramp_11, tramp_12, tramp_13, tramp_14, tramp_15,
};
