/* mpi_userop.c — MPI_Op_create/MPI_Op_free (docs/MPI.md, "User operations"): the library below
 * gets a trampoline per operation (mpi_userop_tramp.c); the program's function runs on an upper
 * executor thread of the shim, with the upper fs, its datatype argument translated back. */
#include "mpi_shim.h"
#include "mpi_userop.h"

#include <stdlib.h>

struct vop {
    uint64_t magic;
    void *real;
    MPI_User_function *fn;
    int commute, slot;
};

static struct vop *slots[UOP_MAX];

/* The program's MPI_Datatype for the library's handle *LTYPE. */
static MPI_Datatype type_up(void *ltype)
{
    void *low = mpi_abi.mpich ? (void *)(intptr_t)*(int *)ltype : *(void **)ltype;
    void *up = predef_upper_of_lower(low);
    if (up)
        return (MPI_Datatype)up;
    /* MPICH's handle of a created type sits zero-extended in its pointer-sized slot (the
     * library writes 4 bytes of a zeroed word); the predefined values above are sign-extended
     * (mpi_mpich_gen.c): 0x8c000005 must match too. */
    void *created = mpi_abi.mpich ? (void *)(uintptr_t)(uint32_t)*(int *)ltype : low;
    for (struct vtype *t = vtype_list; t; t = t->next)
        if (t->real == created && !t->freed)
            return (MPI_Datatype)(void *)t;
    return (MPI_Datatype)low;
}

/* On the executor thread, with the upper fs: the program's function, given the program's
 * datatype. */
static void run_call(struct upper_job *j)
{
    struct uop_call *c = (struct uop_call *)j;
    struct vop *v = slots[c->slot];
    MPI_Datatype t = type_up(c->ltype);
    if (v)
        v->fn(c->in, c->inout, c->len, &t);
}
void (*const uop_run)(struct upper_job *) = run_call;

int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
    if (!fn)
        return MPI_ERR_ARG;
    struct vop *v = calloc(1, sizeof(*v));
    if (!v)
        return MPI_ERR_NO_MEM;
    pthread_mutex_lock(&mpi_mu);
    int slot = 0;
    while (slot < UOP_MAX && slots[slot])
        slot++;
    if (slot == UOP_MAX || upper_executor_ensure(&uop_queue) != 0) { /* under mpi_mu */
        pthread_mutex_unlock(&mpi_mu);
        free(v);
        return slot == UOP_MAX ? MPI_ERR_INTERN : MPI_ERR_OTHER;
    }
    *v = (struct vop){VMAGIC, NULL, fn, commute, slot};
    slots[slot] = v;
    pthread_mutex_unlock(&mpi_mu);
    /* The handle into its record before any checkpoint, as MPI_Type_* (a checkpoint just
     * before the gate only has the restart make one the call then replaces: a leak). */
    void *real = NULL;
    cross_gate_enter();
    int rc = L("MPI_Op_create", U(uop_tramps[slot]), (uint64_t)commute, U(&real));
    v->real = real;
    cross_gate_leave();
    *op = (MPI_Op)(void *)v;
    return rc;
}

static struct vop *op_v(MPI_Op op)
{
    struct vop *v = (struct vop *)(void *)op;
    if (!v || predef_lower(v) || v->magic != VMAGIC)
        return NULL;
    return v;
}

void *userop_real(MPI_Op op)
{
    struct vop *v = op_v(op);
    return v ? v->real : NULL;
}

int MPI_Op_free(MPI_Op *op)
{
    struct vop *v = op_v(*op);
    if (!v)
        return MPI_ERR_OP;
    /* One step with the gate held, as MPI_Comm_free. */
    cross_gate_enter();
    pthread_mutex_lock(&mpi_mu);
    void *real = v->real;
    int rc = L("MPI_Op_free", U(&real));
    slots[v->slot] = NULL;
    v->magic = 0;
    pthread_mutex_unlock(&mpi_mu);
    cross_gate_leave();
    free(v);
    *op = MPI_OP_NULL;
    return rc;
}

void mpi_userop_rebuild(void)
{
    for (int i = 0; i < UOP_MAX; i++) {
        struct vop *v = slots[i];
        if (!v)
            continue;
        void *real = NULL;
        L("MPI_Op_create", U(uop_tramps[i]), (uint64_t)v->commute, U(&real));
        v->real = real;
    }
}
