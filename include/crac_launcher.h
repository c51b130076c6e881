/* crac_launcher.h — the variables by which an MPI launcher (Open MPI, MPICH/Hydra, PMIx, Slurm)
 * marks a process as one of its ranks: the front and the loader's exec read them alike. */
#ifndef CRAC_LAUNCHER_H
#define CRAC_LAUNCHER_H

#include <string.h>

/* crac_py/launch/mpi.py's RANK_VARS lists the same names (tests/test_launch.py checks). */
#define CRAC_LAUNCHER_RANK_VARS "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"

/* Whether the environment entry ENTRY ("NAME=value") is a launcher's rank variable. */
static inline int crac_launcher_rank_entry(const char *entry)
{
    static const char *const names[] = {CRAC_LAUNCHER_RANK_VARS};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(entry, names[i], n) == 0 && entry[n] == '=')
            return 1;
    }
    return 0;
}

#endif
