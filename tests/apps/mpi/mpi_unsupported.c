/* mpi_unsupported.c — calls an MPI function the crac MPI shim does not have (MPI_Win_create):
   `crac launch` must refuse it with one clear line instead of letting it die at the call. */
#include <mpi.h>
#include <stddef.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Win w;
    MPI_Win_create(NULL, 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w);
    MPI_Finalize();
    return 0;
}
