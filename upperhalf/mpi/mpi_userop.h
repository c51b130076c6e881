/* mpi_userop.h — user reduction operations (MPI_Op_create, docs/MPI.md "User operations"): the
 * TLS-free trampolines the lower library calls, and the queue they hand each call over on. */
#ifndef CRAC_MPI_USEROP_H
#define CRAC_MPI_USEROP_H

#include <stdint.h>

#define UOP_MAX 16 /* user operations alive at once: one trampoline each */

/* One call of a user function, on the stack of the thread the library called the trampoline on
 * (it waits until the executor is done with it). */
struct uop_call {
    struct uop_call *next;
    int slot;
    void *in, *inout;
    int *len;
    void *ltype;           /* the library's MPI_Datatype * (a pointer or an int handle) */
    volatile int32_t done; /* futex: 1 once the executor ran the function */
};

typedef void (*uop_tramp_fn)(void *, void *, int *, void *);
extern const uop_tramp_fn uop_tramps[UOP_MAX];
extern struct uop_call *volatile uop_head;
extern struct uop_call *uop_tail;
extern volatile int32_t uop_lock; /* raw futex lock of the queue */
extern volatile int32_t uop_seq;  /* futex the executor sleeps on */

void mpi_userop_rebuild(void); /* at restart: every live user operation created again */

#endif
