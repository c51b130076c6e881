/* lower_mpi.h — the lower-half entries of the MPI library (docs/MPI.md): load it, look up its
 * functions, record its threads and descriptors, call a function with many arguments. */
#ifndef CRAC_LOWER_MPI_H
#define CRAC_LOWER_MPI_H

#include "crac_lh_api.h"

#define LOWER_MPI_N_ENTRIES 12
extern const struct crac_lh_entry lower_mpi_entries[LOWER_MPI_N_ENTRIES];

#endif
