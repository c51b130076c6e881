/* mpi_status_topo.c — a status's fields the program sets, and what a communicator is besides its
 * members (its topology, its parent, its name): answered in upper code, or kept there. */
#include "mpi_shim.h"

#include <stdio.h>
#include <string.h>

/* A status is the program's (Open MPI's layout, whatever library is below). */
int MPI_Status_set_elements_x(MPI_Status *status, MPI_Datatype type, MPI_Count count)
{
    int size = 0;
    int rc = L("MPI_Type_size", U(type_real(type)), U(&size));
    if (rc == MPI_SUCCESS)
        status->_ucount = (size_t)count * (size_t)size;
    return rc;
}

int MPI_Status_set_elements(MPI_Status *status, MPI_Datatype type, int count)
{
    return MPI_Status_set_elements_x(status, type, count);
}

int MPI_Status_set_cancelled(MPI_Status *status, int flag)
{
    status->_cancelled = flag != 0;
    return MPI_SUCCESS;
}

/* Cartesian grids only (mpi_cart.c): graph topologies are refused. */
int MPI_Topo_test(MPI_Comm comm, int *status)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    *status = c->cart ? MPI_CART : MPI_UNDEFINED;
    return MPI_SUCCESS;
}

/* No process is spawned here (MPI_Comm_spawn is refused). */
int MPI_Comm_get_parent(MPI_Comm *parent)
{
    *parent = MPI_COMM_NULL;
    return MPI_SUCCESS;
}

/* The library keeps the name (MPI_Comm_get_name asks it); the record keeps it for the next
 * library, set again at restart. */
int MPI_Comm_set_name(MPI_Comm comm, const char *name)
{
    cross_gate_enter();
    struct vcomm *c = comm_v(comm);
    int rc = MPI_ERR_COMM;
    if (c) {
        snprintf(c->name, sizeof(c->name), "%s", name);
        rc = L("MPI_Comm_set_name", U(c->real), U(c->name));
    }
    cross_gate_leave();
    return rc;
}

void mpi_names_rebuild(void)
{
    for (struct vcomm *c = vcomm_list; c; c = c->next)
        if (!c->freed && !c->ghost && c->real && c->name[0])
            L("MPI_Comm_set_name", U(c->real), U(c->name));
}
