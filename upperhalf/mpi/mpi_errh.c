/* mpi_errh.c — communicators' error handlers (MPI_Comm_set/get_errhandler, MPI_Errhandler_free):
 * the library's predefined handlers, read back from it at each checkpoint, set again at restart. */
#include "mpi_shim.h"

/* The program's (predefined) handle of the handler the library has on C, or NULL. Gate held. */
static MPI_Errhandler lower_errhandler(struct vcomm *c)
{
    void *real = NULL;
    if (L("MPI_Comm_get_errhandler", U(c->real), U(&real)) != MPI_SUCCESS || !real)
        return NULL;
    MPI_Errhandler up = predef_upper_of_lower(real);
    L("MPI_Errhandler_free", U(&real)); /* the reference the call above took */
    return up;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
    void *real = predef_lower(errhandler);
    if (!real) /* MPI_Comm_create_errhandler is refused: nothing else can come here */
        return mpi_refused("MPI_Comm_set_errhandler (a handler not predefined)");
    cross_gate_enter();
    struct vcomm *c = comm_v(comm);
    int rc = c ? L("MPI_Comm_set_errhandler", U(c->real), U(real)) : MPI_ERR_COMM;
    cross_gate_leave();
    return rc;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *errhandler)
{
    cross_gate_enter();
    struct vcomm *c = comm_v(comm);
    MPI_Errhandler up = c ? lower_errhandler(c) : NULL;
    cross_gate_leave();
    if (!c)
        return MPI_ERR_COMM;
    if (!up)
        return MPI_ERR_INTERN;
    *errhandler = up;
    return MPI_SUCCESS;
}

/* The handlers MPI_Comm_get_errhandler gives are predefined (their reference is dropped there). */
int MPI_Errhandler_free(MPI_Errhandler *errhandler)
{
    if (!predef_lower(*errhandler))
        return MPI_ERR_ARG;
    *errhandler = MPI_ERRHANDLER_NULL;
    return MPI_SUCCESS;
}

/* At a checkpoint, after the cut: each live communicator's handler, as the library has it (set
 * by the program, or inherited at its creation). */
void mpi_errh_record(void)
{
    for (struct vcomm *c = vcomm_list; c; c = c->next)
        if (!c->freed && !c->ghost && c->real)
            c->errhandler = lower_errhandler(c);
}

/* At restart, after the communicators are made again: their handlers set again. */
void mpi_errh_rebuild(void)
{
    for (struct vcomm *c = vcomm_list; c; c = c->next) {
        void *real = c->errhandler ? predef_lower(c->errhandler) : NULL;
        if (!c->freed && !c->ghost && c->real && real)
            L("MPI_Comm_set_errhandler", U(c->real), U(real));
    }
}
