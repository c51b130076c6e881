/* mpi_predef.h — the predefined handle objects of the MPI shim (generated: mpi_predef_gen.c) and
 * what each stands for in the lower half's real library (resolved by name at every MPI_Init). */
#ifndef CRAC_MPI_PREDEF_H
#define CRAC_MPI_PREDEF_H

#include <stdint.h>

enum {
    MPI_K_COMM = 1,
    MPI_K_GROUP = 2,
    MPI_K_TYPE = 3,
    MPI_K_OP = 4,
    MPI_K_REQUEST = 5,
};

struct mpi_predef {
    const char *name;
    void *upper;   /* the shim's object: its address is the program's handle */
    uint64_t size; /* the real library's st_size (a copy relocation needs the same) */
    int kind;
    void *lower; /* the real library's object of that name, in the current lower half */
};

extern struct mpi_predef mpi_predefs[];
extern const int mpi_n_predefs;

#endif
