/* mpi_tramps.h — the 16 fixed trampolines of user MPI_Ops, one per live operation (the library
 * passes a reduction function no user pointer, so the slot is in the function): both shims'. */
#ifndef CRAC_MPI_TRAMPS_H
#define CRAC_MPI_TRAMPS_H

#define MPI_TRAMP_SLOTS 16 /* user operations alive at once (docs/MPI.md, "User operations") */

/* DEF(i) for each slot: DEF defines the trampoline of slot i. */
#define MPI_TRAMP_EACH(DEF)                                                                        \
    DEF(0)                                                                                         \
    DEF(1)                                                                                         \
    DEF(2)                                                                                         \
    DEF(3)                                                                                         \
    DEF(4)                                                                                         \
    DEF(5)                                                                                         \
    DEF(6)                                                                                         \
    DEF(7)                                                                                         \
    DEF(8)                                                                                         \
    DEF(9)                                                                                         \
    DEF(10)                                                                                        \
    DEF(11)                                                                                        \
    DEF(12)                                                                                        \
    DEF(13)                                                                                        \
    DEF(14)                                                                                        \
    DEF(15)

/* The initialiser of the table of the trampolines PREFIX##0 .. PREFIX##15, in slot order. */
#define MPI_TRAMP_LIST(PREFIX)                                                                     \
    PREFIX##0, PREFIX##1, PREFIX##2, PREFIX##3, PREFIX##4, PREFIX##5, PREFIX##6, PREFIX##7,        \
        PREFIX##8, PREFIX##9, PREFIX##10, PREFIX##11, PREFIX##12, PREFIX##13, PREFIX##14,          \
        PREFIX##15

#endif
