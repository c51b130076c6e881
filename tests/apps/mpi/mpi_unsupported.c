/* mpi_unsupported.c — calls an MPI function the crac MPI shim does not have (MPI_Comm_create):
   `crac launch` must refuse it with one clear line instead of letting it die at the call. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm c;
    MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_EMPTY, &c);
    MPI_Finalize();
    return 0;
}
