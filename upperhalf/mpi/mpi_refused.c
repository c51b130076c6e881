/* mpi_refused.c — what an MPI function the shim does not implement yet does when called (the
 * weak definitions of build/crac_gen/mpi_refused_gen.c): one line naming it, once, and an error. */
#include "mpi_shim.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REFUSED_NAMED_MAX 64

static pthread_mutex_t refused_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *refused_named[REFUSED_NAMED_MAX];
static int refused_count;

/* Whether NAME was named before (the generated functions pass their own literal: one address
 * each); remembers it if not. */
static int named_before(const char *name)
{
    pthread_mutex_lock(&refused_lock);
    int seen = 0;
    for (int i = 0; i < refused_count && !seen; i++)
        seen = refused_named[i] == name;
    if (!seen && refused_count < REFUSED_NAMED_MAX)
        refused_named[refused_count++] = name;
    pthread_mutex_unlock(&refused_lock);
    return seen;
}

int mpi_refused(const char *name)
{
    if (!named_before(name)) {
        char line[256];
        int n = snprintf(line, sizeof line,
                         "crac: %s is not supported by crac's MPI shim yet (docs/MPI.md): it "
                         "returns MPI_ERR_UNSUPPORTED_OPERATION\n",
                         name);
        if (n > 0)
            (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    }
    return MPI_ERR_UNSUPPORTED_OPERATION;
}
