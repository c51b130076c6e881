/* mpi_mprobe.c — matched probes and receives (MPI_Improbe, MPI_Mprobe, MPI_Mrecv, MPI_Imrecv):
 * the program's MPI_Message is a record in upper memory, of the library's matched message or of
 * one kept by a cut (mpi_cut.c). */
#include "mpi_shim.h"

#include <string.h>

static void no_proc_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    memset(st, 0, sizeof(*st));
    st->MPI_SOURCE = MPI_PROC_NULL;
    st->MPI_TAG = MPI_ANY_TAG;
}

static void envelope(MPI_Status *st, const struct drained *d)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    memset(st, 0, sizeof(*st));
    st->MPI_SOURCE = d->source;
    st->MPI_TAG = d->tag;
    st->_ucount = (size_t)d->len;
}

/* MPI_Improbe, the library asked up to TRIES times before the answer is no. */
static int improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                   MPI_Status *status, int tries)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        *message = MPI_MESSAGE_NO_PROC;
        no_proc_status(status);
        return MPI_SUCCESS;
    }
    int rc;
    mpi_enter(c, 0);
    pthread_mutex_lock(&mpi_mu);
    struct drained *d = mpi_message_take(c, source, tag, &rc, tries);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(c, 0);
    *flag = d != NULL;
    if (d) {
        envelope(status, d);
        *message = (MPI_Message)(void *)d;
    }
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
    return improbe(source, tag, comm, flag, message, status, 1);
}

/* A loop in upper code, so a checkpoint can cut between its crossings; each asks the library
 * MPI_WAIT_TRIES times (one crossing a probe made a pickled mpi4py message 1.5 us slower). */
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    unsigned spins = 0;
    for (;;) {
        int flag = 0;
        int rc = improbe(source, tag, comm, &flag, message, status, MPI_WAIT_TRIES);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        mpi_backoff(&spins);
    }
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
    if (*message == MPI_MESSAGE_NO_PROC) {
        *message = MPI_MESSAGE_NULL;
        no_proc_status(status);
        return MPI_SUCCESS;
    }
    if (*message == MPI_MESSAGE_NULL || !*message)
        return MPI_ERR_REQUEST;
    MPI_Status st;
    mpi_enter(NULL, 0);
    pthread_mutex_lock(&mpi_mu);
    mpi_message_unpack((struct drained *)(void *)*message, buf, count, type, &st);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(NULL, 0);
    *message = MPI_MESSAGE_NULL;
    if (status != MPI_STATUS_IGNORE)
        *status = st;
    return st.MPI_ERROR;
}

/* The message is here already: a request complete from the start. */
int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *request)
{
    MPI_Status st;
    int rc = MPI_Mrecv(buf, count, type, message, &st);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_TRUNCATE)
        return rc;
    pthread_mutex_lock(&mpi_mu);
    struct vreq *r = vreq_new();
    r->state = VR_DONE;
    r->is_recv = 1;
    r->buf = buf;
    r->count = count;
    r->type = type;
    r->status = st;
    pthread_mutex_unlock(&mpi_mu);
    *request = (MPI_Request)(void *)r;
    return MPI_SUCCESS;
}
