/* mpich_api.c — the MPI functions of the MPICH-ABI shim that take or give handles, statuses or
 * requests: translated here, then the libmpi.so.40 shim's function of the same name does the work. */
#include "mpich_shim.h"

#include "../mpi/mpi_tramps.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The shim's signatures in Open MPI's ABI (handles are pointers). */
typedef int (*f_v)(void);
typedef int (*f_i_p)(int *);

/* ---- the library's life ---- */

int MPI_Init(int *argc, char ***argv)
{
    return err_out(OFN(int (*)(int *, char ***), "MPI_Init")(argc, argv));
}

static int thread_in(int l)
{
    return l == MPI_THREAD_SINGLE       ? (int)OC(MPI_THREAD_SINGLE)
           : l == MPI_THREAD_FUNNELED   ? (int)OC(MPI_THREAD_FUNNELED)
           : l == MPI_THREAD_SERIALIZED ? (int)OC(MPI_THREAD_SERIALIZED)
                                        : (int)OC(MPI_THREAD_MULTIPLE);
}

static int thread_out(int l)
{
    return l == OC(MPI_THREAD_SINGLE)       ? MPI_THREAD_SINGLE
           : l == OC(MPI_THREAD_FUNNELED)   ? MPI_THREAD_FUNNELED
           : l == OC(MPI_THREAD_SERIALIZED) ? MPI_THREAD_SERIALIZED
                                            : MPI_THREAD_MULTIPLE;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int p = 0;
    int rc = OFN(int (*)(int *, char ***, int, int *), "MPI_Init_thread")(argc, argv,
                                                                          thread_in(required), &p);
    if (provided)
        *provided = thread_out(p);
    return err_out(rc);
}

int MPI_Query_thread(int *provided)
{
    int p = 0;
    int rc = OFN(f_i_p, "MPI_Query_thread")(&p);
    *provided = thread_out(p);
    return err_out(rc);
}

int MPI_Initialized(int *flag) { return err_out(OFN(f_i_p, "MPI_Initialized")(flag)); }
int MPI_Finalized(int *flag) { return err_out(OFN(f_i_p, "MPI_Finalized")(flag)); }
int MPI_Finalize(void) { return err_out(OFN(f_v, "MPI_Finalize")()); }
double MPI_Wtime(void) { return OFN(double (*)(void), "MPI_Wtime")(); }
double MPI_Wtick(void) { return OFN(double (*)(void), "MPI_Wtick")(); }

/* Open MPI's MPI_MAX_PROCESSOR_NAME is larger than MPICH's: the name comes through a buffer of
 * the larger size and is cut to the program's. */
int MPI_Get_processor_name(char *name, int *resultlen)
{
    char buf[4096];
    int len = 0;
    if (OC(MPI_MAX_PROCESSOR_NAME) > (int64_t)sizeof(buf) - 1)
        return MPI_ERR_INTERN;
    int rc = OFN(int (*)(char *, int *), "MPI_Get_processor_name")(buf, &len);
    if (rc != 0)
        return err_out(rc);
    if (len > MPI_MAX_PROCESSOR_NAME - 1)
        len = MPI_MAX_PROCESSOR_NAME - 1;
    memcpy(name, buf, (size_t)len);
    name[len] = 0;
    *resultlen = len;
    return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    return err_out(OFN(int (*)(oh, int *), "MPI_Comm_rank")(comm_in(comm), rank));
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    return err_out(OFN(int (*)(oh, int *), "MPI_Comm_size")(comm_in(comm), size));
}

/* ---- point to point ---- */

int mpich_post(f_post f, const void *buf, int count, MPI_Datatype t, int peer, int tag,
               MPI_Comm comm, MPI_Request *req)
{
    oh o = NULL;
    int rc = f(buf, count, type_in(t), rank_in(peer), tag_in(tag), comm_in(comm), &o);
    *req = rc == 0 ? req_out_new(o) : MPI_REQUEST_NULL;
    return err_out(rc);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Isend"), buf, count, t, dest, tag, comm, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Irecv"), buf, count, t, src, tag, comm, req);
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Send_init"), buf, count, t, dest, tag, comm, req);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    return mpich_post(OFN(f_post, "MPI_Recv_init"), buf, count, t, src, tag, comm, req);
}

int MPI_Send(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return err_out(OFN(int (*)(const void *, int, oh, int, int, oh), "MPI_Send")(
        buf, count, type_in(t), rank_in(dest), tag_in(tag), comm_in(comm)));
}

int MPI_Recv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    struct ostatus os;
    int rc = OFN(int (*)(void *, int, oh, int, int, oh, struct ostatus *), "MPI_Recv")(
        buf, count, type_in(t), rank_in(src), tag_in(tag), comm_in(comm), status_arg(st, &os));
    status_out(st, &os);
    return err_out(rc);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st)
{
    struct ostatus os;
    int rc = OFN(
        int (*)(const void *, int, oh, int, int, void *, int, oh, int, int, oh, struct ostatus *),
        "MPI_Sendrecv")(sbuf, scount, type_in(stype), rank_in(dest), tag_in(stag), rbuf, rcount,
                        type_in(rtype), rank_in(src), tag_in(rtag), comm_in(comm),
                        status_arg(st, &os));
    status_out(st, &os);
    return err_out(rc);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *st)
{
    struct ostatus os;
    int rc = OFN(int (*)(int, int, oh, int *, struct ostatus *), "MPI_Iprobe")(
        rank_in(source), tag_in(tag), comm_in(comm), flag, status_arg(st, &os));
    if (*flag)
        status_out(st, &os);
    return err_out(rc);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *st)
{
    struct ostatus os;
    int rc = OFN(int (*)(int, int, oh, struct ostatus *),
                 "MPI_Probe")(rank_in(source), tag_in(tag), comm_in(comm), status_arg(st, &os));
    status_out(st, &os);
    return err_out(rc);
}

/* ---- requests ---- */

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    struct ostatus os;
    oh o = req_in(*req);
    int rc = OFN(int (*)(oh *, struct ostatus *), "MPI_Wait")(&o, status_arg(st, &os));
    req_update(req, o);
    status_out(st, &os);
    return err_out(rc);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    struct ostatus os;
    oh o = req_in(*req);
    int rc = OFN(int (*)(oh *, int *, struct ostatus *), "MPI_Test")(&o, flag, status_arg(st, &os));
    if (*flag) {
        req_update(req, o);
        status_out(st, &os);
    }
    return err_out(rc);
}

int MPI_Request_free(MPI_Request *req)
{
    oh o = req_in(*req);
    int rc = OFN(int (*)(oh *), "MPI_Request_free")(&o);
    req_update(req, o);
    return err_out(rc);
}

int MPI_Start(MPI_Request *req)
{
    oh o = req_in(*req);
    return err_out(OFN(int (*)(oh *), "MPI_Start")(&o));
}

int MPI_Startall(int n, MPI_Request reqs[])
{
    for (int i = 0; i < n; i++) {
        int rc = MPI_Start(&reqs[i]);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* The program's requests (and statuses) of an array call, as the shim's. */
struct reqs {
    oh *o;
    struct ostatus *os;
};

/* STATUSES: the program's status array is not MPI_STATUSES_IGNORE. */
static int reqs_in(struct reqs *a, int n, const MPI_Request reqs[], int statuses)
{
    size_t k = n > 0 ? (size_t)n : 1;
    a->o = malloc(k * sizeof(*a->o));
    a->os = statuses ? calloc(k, sizeof(*a->os)) : NULL;
    if (!a->o || (statuses && !a->os)) {
        free(a->o);
        free(a->os);
        return 0;
    }
    for (int i = 0; i < n; i++)
        a->o[i] = req_in(reqs[i]);
    return 1;
}

static struct ostatus *reqs_statuses(struct reqs *a)
{
    return a->os ? a->os : (struct ostatus *)(intptr_t)OC(MPI_STATUSES_IGNORE);
}

/* Requests the shim freed become MPI_REQUEST_NULL; status I of the shim to the program's J. */
static void reqs_out(struct reqs *a, int n, MPI_Request reqs[])
{
    for (int i = 0; i < n; i++)
        req_update(&reqs[i], a->o[i]);
}

static void status_at(struct reqs *a, MPI_Status sts[], int j, int i)
{
    if (a->os)
        status_out(&sts[j], &a->os[i]);
}

static void reqs_done(struct reqs *a)
{
    free(a->o);
    free(a->os);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    struct reqs a;
    if (!reqs_in(&a, n, reqs, sts != MPI_STATUSES_IGNORE))
        return MPI_ERR_NO_MEM;
    int rc = OFN(int (*)(int, oh *, struct ostatus *), "MPI_Waitall")(n, a.o, reqs_statuses(&a));
    reqs_out(&a, n, reqs);
    for (int i = 0; i < n; i++)
        status_at(&a, sts, i, i);
    reqs_done(&a);
    return err_out(rc);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    struct reqs a;
    if (!reqs_in(&a, n, reqs, sts != MPI_STATUSES_IGNORE))
        return MPI_ERR_NO_MEM;
    int rc = OFN(int (*)(int, oh *, int *, struct ostatus *), "MPI_Testall")(n, a.o, flag,
                                                                             reqs_statuses(&a));
    if (*flag) {
        reqs_out(&a, n, reqs);
        for (int i = 0; i < n; i++)
            status_at(&a, sts, i, i);
    }
    reqs_done(&a);
    return err_out(rc);
}

static int any(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    struct reqs a;
    struct ostatus os;
    if (!reqs_in(&a, n, reqs, 0))
        return MPI_ERR_NO_MEM;
    int f = 1, rc;
    if (flag)
        rc = OFN(int (*)(int, oh *, int *, int *, struct ostatus *),
                 "MPI_Testany")(n, a.o, index, &f, status_arg(st, &os));
    else
        rc = OFN(int (*)(int, oh *, int *, struct ostatus *), "MPI_Waitany")(n, a.o, index,
                                                                             status_arg(st, &os));
    if (f) {
        reqs_out(&a, n, reqs);
        *index = undef_out(*index);
        status_out(st, &os);
    }
    if (flag)
        *flag = f;
    reqs_done(&a);
    return err_out(rc);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
    return any(n, reqs, index, NULL, st);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    return any(n, reqs, index, flag, st);
}

typedef int (*f_some)(int, oh *, int *, int *, struct ostatus *);

/* F: the shim's MPI_Waitsome or MPI_Testsome (each OFN caches one function: not by name here). */
static int some(f_some f, int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    struct reqs a;
    if (!reqs_in(&a, n, reqs, sts != MPI_STATUSES_IGNORE))
        return MPI_ERR_NO_MEM;
    int rc = f(n, a.o, outcount, indices, reqs_statuses(&a));
    *outcount = undef_out(*outcount);
    reqs_out(&a, n, reqs);
    for (int k = 0; *outcount != MPI_UNDEFINED && k < *outcount; k++)
        status_at(&a, sts, k, k);
    reqs_done(&a);
    return err_out(rc);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return some(OFN(f_some, "MPI_Waitsome"), n, reqs, outcount, indices, sts);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return some(OFN(f_some, "MPI_Testsome"), n, reqs, outcount, indices, sts);
}

/* ---- collectives ---- */

int MPI_Barrier(MPI_Comm comm) { return err_out(OFN(int (*)(oh), "MPI_Barrier")(comm_in(comm))); }

int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    return err_out(OFN(int (*)(void *, int, oh, int, oh),
                       "MPI_Bcast")(buf, count, type_in(t), rank_in(root), comm_in(comm)));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm)
{
    return err_out(OFN(int (*)(const void *, void *, int, oh, oh, int, oh), "MPI_Reduce")(
        buf_in(sbuf), rbuf, count, type_in(t), op_in(op), rank_in(root), comm_in(comm)));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    return err_out(OFN(int (*)(const void *, void *, int, oh, oh, oh), "MPI_Allreduce")(
        buf_in(sbuf), rbuf, count, type_in(t), op_in(op), comm_in(comm)));
}

typedef int (*f_a2a)(const void *, int, oh, void *, int, oh, oh);
typedef int (*f_rooted)(const void *, int, oh, void *, int, oh, int, oh);

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    return err_out(OFN(f_a2a, "MPI_Alltoall")(buf_in(sbuf), scount, type_in(stype), rbuf, rcount,
                                              type_in(rtype), comm_in(comm)));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    return err_out(OFN(f_a2a, "MPI_Allgather")(buf_in(sbuf), scount, type_in(stype), rbuf, rcount,
                                               type_in(rtype), comm_in(comm)));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    return err_out(OFN(f_rooted, "MPI_Gather")(buf_in(sbuf), scount, type_in(stype), rbuf, rcount,
                                               type_in(rtype), rank_in(root), comm_in(comm)));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    return err_out(OFN(f_rooted, "MPI_Scatter")(sbuf, scount, type_in(stype), (void *)buf_in(rbuf),
                                                rcount, type_in(rtype), rank_in(root),
                                                comm_in(comm)));
}

/* ---- communicators ---- */

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc =
        OFN(int (*)(oh, int, int, oh *), "MPI_Comm_split")(comm_in(comm), undef_in(color), key, &o);
    if (rc == 0)
        *newcomm = comm_out(o);
    return err_out(rc);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    oh o = NULL;
    int rc = OFN(int (*)(oh, oh *), "MPI_Comm_dup")(comm_in(comm), &o);
    if (rc == 0)
        *newcomm = comm_out(o);
    return err_out(rc);
}

/* MPI_Comm_free or MPI_Comm_disconnect (FN): the program's handle goes once the shim's did. */
static int comm_release(int (*fn)(oh *), MPI_Comm *comm)
{
    oh o = comm_in(*comm);
    int rc = fn(&o);
    if (rc == 0) {
        comm_forget(*comm);
        *comm = MPI_COMM_NULL;
    }
    return err_out(rc);
}

int MPI_Comm_free(MPI_Comm *comm)
{
    return comm_release(OFN(int (*)(oh *), "MPI_Comm_free"), comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
    return comm_release(OFN(int (*)(oh *), "MPI_Comm_disconnect"), comm);
}

/* ---- datatypes ---- */

int MPI_Type_contiguous(int count, MPI_Datatype old, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, oh, oh *), "MPI_Type_contiguous")(count, type_in(old), &o);
    *out = type_out_new(o);
    return err_out(rc);
}

int MPI_Type_vector(int count, int blocklen, int stride, MPI_Datatype old, MPI_Datatype *out)
{
    oh o = NULL;
    int rc = OFN(int (*)(int, int, int, oh, oh *), "MPI_Type_vector")(count, blocklen, stride,
                                                                      type_in(old), &o);
    *out = type_out_new(o);
    return err_out(rc);
}

int MPI_Type_commit(MPI_Datatype *type)
{
    oh o = type_in(*type);
    return err_out(OFN(int (*)(oh *), "MPI_Type_commit")(&o));
}

int MPI_Type_free(MPI_Datatype *type)
{
    oh o = type_in(*type);
    int rc = OFN(int (*)(oh *), "MPI_Type_free")(&o);
    if (rc == 0) {
        type_forget(*type);
        *type = MPI_DATATYPE_NULL;
    }
    return err_out(rc);
}

/* ---- user operations: the shim calls its function with its own datatype handle, so each
 * program function gets a trampoline that passes the program's handle instead ---- */

#define N_UOPS MPI_TRAMP_SLOTS
typedef void (*o_user_fn)(void *, void *, int *, oh *);
static MPI_User_function *user_fn[N_UOPS];
static oh user_op[N_UOPS];
static pthread_mutex_t uop_mu = PTHREAD_MUTEX_INITIALIZER;

static void call_user(int i, void *in, void *inout, int *len, oh *dt)
{
    MPI_Datatype t = type_out(*dt);
    user_fn[i](in, inout, len, &t);
}

#define TRAMP(i)                                                                                   \
    static void tramp##i(void *a, void *b, int *n, oh *d) { call_user(i, a, b, n, d); }
MPI_TRAMP_EACH(TRAMP)
static const o_user_fn tramps[N_UOPS] = {MPI_TRAMP_LIST(tramp)};

int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op)
{
    pthread_mutex_lock(&uop_mu);
    int i = 0;
    while (i < N_UOPS && user_fn[i])
        i++;
    if (i == N_UOPS) {
        pthread_mutex_unlock(&uop_mu);
        return MPI_ERR_INTERN; /* as the shim's own limit (docs/MPI.md) */
    }
    user_fn[i] = fn;
    oh o = NULL;
    int rc = OFN(int (*)(o_user_fn, int, oh *), "MPI_Op_create")(tramps[i], commute, &o);
    if (rc == 0) {
        user_op[i] = o;
        *op = op_out_new(o);
    } else
        user_fn[i] = NULL;
    pthread_mutex_unlock(&uop_mu);
    return err_out(rc);
}

int MPI_Op_free(MPI_Op *op)
{
    oh o = op_in(*op);
    int rc = OFN(int (*)(oh *), "MPI_Op_free")(&o);
    if (rc != 0)
        return err_out(rc);
    pthread_mutex_lock(&uop_mu);
    for (int i = 0; i < N_UOPS; i++)
        if (user_fn[i] && user_op[i] == op_in(*op)) {
            user_fn[i] = NULL;
            user_op[i] = NULL;
        }
    pthread_mutex_unlock(&uop_mu);
    op_forget(*op);
    *op = MPI_OP_NULL;
    return MPI_SUCCESS;
}
