/* mpi_api.c — the MPI functions of the shim (docs/MPI.md): handles translated, blocking calls
 * run as nonblocking ones plus test loops in upper code, so a checkpoint can cut between tests. */
#include "mpi_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern void *upper_lookup(const char *name) __attribute__((weak));

static int thread_level = MPI_THREAD_SINGLE;

__attribute__((constructor)) static void mpi_shim_ctor(void) { mpi_register_hooks(); }

/* <proc_dir>/mpi_rank: which rank this process is, so `crac restart` under a launcher picks the
 * image of the rank it is started as. */
static void record_rank(void)
{
    long (*query)(long, char *, unsigned long) =
        upper_lookup ? (long (*)(long, char *, unsigned long))upper_lookup("crac_lh_query") : NULL;
    extern uint64_t cross_call(void *fn, uint64_t a0, uint64_t a1, uint64_t a2)
        __attribute__((weak));
    if (!query || !cross_call)
        return;
    char dir[4096], ckdir[4096], path[4200];
    if ((long)cross_call((void *)query, 1 /* CRAC_QUERY_PROC_DIR */, U(dir), sizeof(dir)) < 0 ||
        (long)cross_call((void *)query, 2 /* CRAC_QUERY_CKPT_DIR */, U(ckdir), sizeof(ckdir)) < 0)
        return;
    mkdir(ckdir, 0755);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/mpi_rank", dir);
    FILE *f = fopen(path, "we");
    if (!f)
        return;
    fprintf(f, "%d %d\n", mpi_world_rank, mpi_world_size);
    fclose(f);
}

static int start(int required, int *provided)
{
    if (mpi_inited)
        return MPI_ERR_OTHER;
    mpi_lower_start(); /* sets mpi_inited */
    thread_level = required;
    if (provided)
        *provided = required > MPI_THREAD_MULTIPLE ? MPI_THREAD_MULTIPLE : required;
    record_rank();
    return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return start(MPI_THREAD_SINGLE, NULL);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    (void)argc;
    (void)argv;
    return start(required, provided);
}

int MPI_Initialized(int *flag)
{
    *flag = mpi_inited;
    return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
    *flag = mpi_finalized;
    return MPI_SUCCESS;
}

int MPI_Query_thread(int *provided)
{
    *provided = thread_level;
    return MPI_SUCCESS;
}

/* CRAC_MPI_TEST_FINALIZE_DELAY_MS=MS: world rank 1 waits MS ms between MPI_Finalize's barrier
 * and its agreement, so a test can checkpoint while rank 0 is already leaving (tests/test_mpi.py). */
static void test_finalize_delay(void)
{
    const char *v = getenv("CRAC_MPI_TEST_FINALIZE_DELAY_MS");
    long ms = v ? atol(v) : 0;
    if (ms <= 0 || mpi_world_rank != 1)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int MPI_Finalize(void)
{
    /* As the standard has it, MPI_COMM_SELF's attributes go first (mpi4py's clean-up is one). */
    mpi_attrs_delete_all(MPI_COMM_SELF, vcomm_self);
    /* Everyone reaches here before the library goes: a barrier that a checkpoint can cut. */
    MPI_Barrier(MPI_COMM_WORLD);
    test_finalize_delay();
    mpi_finalize_agree(); /* a checkpoint from here on is refused (docs/MPI.md, "Finalize") */
    mpi_finalized = 1;
    return L("MPI_Finalize", 0);
}

double MPI_Wtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double MPI_Wtick(void) { return 1e-9; }

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    *rank = c->rank;
    return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    *size = c->size;
    return MPI_SUCCESS;
}

/* ---- point to point ---- */

static void set_status(MPI_Status *st, const MPI_Status *from)
{
    if (st != MPI_STATUS_IGNORE)
        *st = *from;
}

static void null_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    memset(st, 0, sizeof(*st));
    st->MPI_SOURCE = MPI_PROC_NULL;
    st->MPI_TAG = MPI_ANY_TAG;
}

/* Under mpi_mu, inside a section: the send R describes, posted (counted for the cut). */
static int start_send(struct vreq *r)
{
    void *real = NULL;
    int rc = r->sync
                 ? L("MPI_Issend", U(r->buf), (uint64_t)r->count, U(type_real(r->type)),
                     (uint64_t)rank_down(r->peer), (uint64_t)r->tag, U(r->comm->real), U(&real))
                 : L("MPI_Isend", U(r->buf), (uint64_t)r->count, U(type_real(r->type)),
                     (uint64_t)rank_down(r->peer), (uint64_t)r->tag, U(r->comm->real), U(&real));
    r->real = real;
    r->state = VR_ACTIVE;
    int w = comm_peer_world(r->comm, r->peer); /* a remote rank on an inter-communicator */
    if (w >= 0)
        mpi_sent_to[w]++;
    return rc;
}

/* Under mpi_mu, inside a section. */
static struct vreq *post_send(const void *buf, int count, MPI_Datatype t, int dest, int tag,
                              struct vcomm *c, int sync, int *rc)
{
    struct vreq *r = vreq_new();
    r->sync = sync;
    r->buf = (void *)buf;
    r->count = count;
    r->type = t;
    r->peer = dest;
    r->tag = tag;
    r->comm = c;
    *rc = start_send(r);
    return r;
}

static struct vreq *post_recv(void *buf, int count, MPI_Datatype t, int src, int tag,
                              struct vcomm *c, int *rc)
{
    struct vreq *r = vreq_new();
    r->buf = buf;
    r->count = count;
    r->type = t;
    r->peer = src;
    r->tag = tag;
    r->comm = c;
    r->is_recv = 1;
    if (src == MPI_PROC_NULL) {
        null_status(&r->status);
        r->state = VR_DONE;
        *rc = MPI_SUCCESS;
        return r;
    }
    *rc = mpi_post_recv(r);
    return r;
}

/* Under mpi_mu. 1 when R is complete; up to TRIES tests of the library in one crossing. */
static int vreq_test(struct vreq *r, int tries)
{
    if (r->state == VR_UNPOSTED)
        mpi_post_recv(r);
    if (r->state == VR_ACTIVE) {
        int flag = 0;
        void *real = r->real;
        lstatus ls;
        mpi_ltest(&real, &flag, &ls, tries);
        if (flag) {
            status_up(&r->status, &ls);
            r->real = real;
            r->state = VR_DONE;
            vreq_completed(r);
        }
    }
    return r->state == VR_DONE;
}

/* Under mpi_mu. R is complete: its status to ST; a persistent request goes inactive (the
 * program keeps its handle), any other is freed and *REQ (when given) becomes MPI_REQUEST_NULL. */
static int vreq_finish_locked(struct vreq *r, MPI_Request *req, MPI_Status *st)
{
    int err = r->status.MPI_ERROR;
    set_status(st, &r->status);
    if (r->persistent) {
        r->state = VR_INACTIVE;
        r->real = NULL;
    } else {
        vreq_free(r);
        if (req)
            *req = MPI_REQUEST_NULL;
    }
    return err == MPI_ERR_TRUNCATE ? err : MPI_SUCCESS;
}

static int vreq_finish(struct vreq *r, MPI_Request *req, MPI_Status *st)
{
    pthread_mutex_lock(&mpi_mu);
    int rc = vreq_finish_locked(r, req, st);
    pthread_mutex_unlock(&mpi_mu);
    return rc;
}

/* Waits for R in upper code, one batch of tests per section, then finishes it. One hold of
 * mpi_mu per batch (the section's bookkeeping, the batch and the finish): the lock is taken
 * once per crossing, not four times (docs/DECISIONS.md, "MPI: fewer crossings per message"). */
static int vreq_wait(struct vreq *r, MPI_Status *st, MPI_Request *req)
{
    unsigned spins = 0;
    for (;;) {
        pthread_mutex_lock(&mpi_mu);
        mpi_enter_locked(NULL, 0);
        int done = vreq_test(r, MPI_WAIT_TRIES);
        mpi_leave_locked(NULL, 0);
        int rc = done ? vreq_finish_locked(r, req, st) : MPI_SUCCESS;
        pthread_mutex_unlock(&mpi_mu);
        if (done)
            return rc;
        mpi_backoff(&spins);
    }
}

/* Under mpi_mu: a request that lived on the stack, still live in the library after its first
 * crossing, copied into the request list so the cut's drain and repost see it. */
static struct vreq *vreq_keep(const struct vreq *s)
{
    struct vreq *r = vreq_new();
    r->real = s->real;
    r->state = s->state;
    r->is_recv = s->is_recv;
    r->sync = s->sync;
    r->buf = s->buf;
    r->count = s->count;
    r->peer = s->peer;
    r->tag = s->tag;
    r->type = s->type;
    r->comm = s->comm;
    return r;
}

/* MPI_Send and MPI_Recv: one section, one hold of mpi_mu and, for a message the library
 * completes at once (an eager send, a receive whose message has arrived), one crossing that
 * posts and tests (mpi_lpost_test). The request lives on the stack until then; only one still
 * incomplete after the first batch goes into the request list, before mpi_mu is let go, so the
 * cut sees every request that is live in the library. */
static int p2p_blocking(void *buf, int count, MPI_Datatype t, int peer, int tag, MPI_Comm comm,
                        int is_recv, int sync, MPI_Status *st)
{
    static struct lcache isend_c, issend_c, irecv_c;
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    /* Only the fields used here set (a status is written before it is read): a memset of the
     * whole record was a `rep stos`, half of this function's own time (docs/PERFORMANCE.md,
     * "MPI per-call cost"). */
    struct vreq s;
    s.real = NULL;
    s.state = 0;
    s.buf = buf;
    s.count = count;
    s.type = t;
    s.peer = peer;
    s.tag = tag;
    s.comm = c;
    s.is_recv = is_recv;
    s.is_coll = 0; /* vreq_completed reads it */
    s.sync = sync;
    pthread_mutex_lock(&mpi_mu);
    mpi_enter_locked(c, 0);
    if (is_recv && peer == MPI_PROC_NULL) {
        null_status(&s.status);
        s.state = VR_DONE;
    } else if (!is_recv || !mpi_drained_match(&s)) {
        void *real = NULL;
        int flag = 0;
        lstatus ls;
        uint64_t a[7] = {U(buf),        (uint64_t)count, U(type_real(t)), (uint64_t)rank_down(peer),
                         (uint64_t)tag, U(c->real),      U(&real)};
        struct lcache *post_c = is_recv ? &irecv_c : sync ? &issend_c : &isend_c;
        const char *post = is_recv ? "MPI_Irecv" : sync ? "MPI_Issend" : "MPI_Isend";
        int rc = mpi_lpost_test(post_c, post, a, 7, &real, &flag, &ls, MPI_WAIT_TRIES);
        if (rc != MPI_SUCCESS && !flag) {
            mpi_leave_locked(c, 0);
            pthread_mutex_unlock(&mpi_mu);
            return rc;
        }
        if (!is_recv) {
            int w = comm_peer_world(c, peer); /* a remote rank on an inter-communicator */
            if (w >= 0)
                mpi_sent_to[w]++;
        }
        s.real = real;
        s.state = VR_ACTIVE;
        if (flag) {
            status_up(&s.status, &ls);
            s.state = VR_DONE;
            if (is_recv)
                mpi_received++;
        }
    }
    if (s.state == VR_DONE) {
        mpi_leave_locked(c, 0);
        pthread_mutex_unlock(&mpi_mu);
        int err = s.status.MPI_ERROR;
        set_status(st, &s.status);
        return err == MPI_ERR_TRUNCATE ? err : MPI_SUCCESS;
    }
    struct vreq *r = vreq_keep(&s);
    mpi_leave_locked(c, 0);
    pthread_mutex_unlock(&mpi_mu);
    return vreq_wait(r, st, NULL);
}

static int isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                 int sync, MPI_Request *req)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    int rc;
    mpi_enter(c, 0);
    pthread_mutex_lock(&mpi_mu);
    struct vreq *r = post_send(buf, count, t, dest, tag, c, sync, &rc);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(c, 0);
    *req = (MPI_Request)(void *)r;
    return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    return isend(buf, count, t, dest, tag, comm, 0, req);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    return isend(buf, count, t, dest, tag, comm, 1, req);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return p2p_blocking((void *)buf, count, t, dest, tag, comm, 0, 1, MPI_STATUS_IGNORE);
}

/* A ready send is a standard send (the standard allows it: the receive is posted already). */
int MPI_Rsend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return MPI_Send(buf, count, t, dest, tag, comm);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    return isend(buf, count, t, dest, tag, comm, 0, req);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    int rc;
    mpi_enter(c, 0);
    pthread_mutex_lock(&mpi_mu);
    struct vreq *r = post_recv(buf, count, t, src, tag, c, &rc);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(c, 0);
    *req = (MPI_Request)(void *)r;
    return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm)
{
    return p2p_blocking((void *)buf, count, t, dest, tag, comm, 0, 0, MPI_STATUS_IGNORE);
}

int MPI_Recv(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm, MPI_Status *st)
{
    return p2p_blocking(buf, count, t, src, tag, comm, 1, 0, st);
}

/* One section, one hold of mpi_mu and, when both messages complete in the first batch, one
 * crossing that posts the receive, then the send, and tests both (mpi_lposts_test; four
 * crossings before: two posts, two waits). As in p2p_blocking, the requests live on the stack
 * and only one still live after that crossing goes into the request list. */
int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf,
                 int rcount, MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status *st)
{
    static struct lcache isend_c, irecv_c;
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    struct vreq v[2]; /* the receive, then the send: posted in that order; set as in p2p_blocking */
    void *bufs[2] = {rbuf, (void *)sbuf};
    int counts[2] = {rcount, scount}, peers[2] = {src, dest}, tags[2] = {rtag, stag};
    MPI_Datatype types[2] = {rtype, stype};
    struct lpost p[2];
    struct ltest t[2];
    struct vreq *posted[2];
    uint64_t a[2][7];
    for (int i = 0; i < 2; i++) {
        v[i].real = NULL;
        v[i].state = 0;
        v[i].buf = bufs[i];
        v[i].count = counts[i];
        v[i].type = types[i];
        v[i].peer = peers[i];
        v[i].tag = tags[i];
        v[i].comm = c;
        v[i].is_recv = i == 0;
        v[i].is_coll = 0;
        t[i].real = NULL;
        t[i].flag = 0;
    }
    pthread_mutex_lock(&mpi_mu);
    mpi_enter_locked(c, 0);
    if (src == MPI_PROC_NULL) {
        null_status(&v[0].status);
        v[0].state = VR_DONE;
    } else
        mpi_drained_match(&v[0]); /* VR_DONE when a drained message matched */
    int np = 0;
    for (int i = 0; i < 2; i++) {
        struct vreq *r = &v[i];
        if (r->state == VR_DONE)
            continue;
        uint64_t *x = a[np];
        x[0] = U(r->buf);
        x[1] = (uint64_t)r->count;
        x[2] = U(type_real(r->type));
        x[3] = (uint64_t)rank_down(r->peer);
        x[4] = (uint64_t)r->tag;
        x[5] = U(c->real);
        x[6] = U(&t[np].real);
        p[np] = (struct lpost){r->is_recv ? &irecv_c : &isend_c,
                               r->is_recv ? "MPI_Irecv" : "MPI_Isend", x, 7};
        posted[np++] = r;
    }
    int rc = np ? mpi_lposts_test(p, t, np, MPI_WAIT_TRIES) : MPI_SUCCESS;
    for (int i = 0; i < np; i++) {
        struct vreq *r = posted[i];
        if (!t[i].flag && !t[i].real)
            continue; /* not posted: the post failed, or one before it */
        if (!r->is_recv) {
            int w = comm_peer_world(c, r->peer); /* a remote rank on an inter-communicator */
            if (w >= 0)
                mpi_sent_to[w]++;
        }
        r->real = t[i].real;
        r->state = VR_ACTIVE;
        if (t[i].flag) {
            status_up(&r->status, &t[i].ls);
            r->state = VR_DONE;
            vreq_completed(r);
        }
    }
    struct vreq *live[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        if (v[i].state == VR_ACTIVE)
            live[i] = vreq_keep(&v[i]);
    mpi_leave_locked(c, 0);
    pthread_mutex_unlock(&mpi_mu);
    if (rc != MPI_SUCCESS)
        return rc;
    if (live[1])
        vreq_wait(live[1], MPI_STATUS_IGNORE, NULL);
    if (live[0])
        return vreq_wait(live[0], st, NULL);
    set_status(st, &v[0].status);
    return v[0].status.MPI_ERROR == MPI_ERR_TRUNCATE ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
}

/* Drained messages first: they were sent before anything the library holds now. */
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *st)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    if (source == MPI_PROC_NULL) {
        *flag = 1;
        null_status(st);
        return MPI_SUCCESS;
    }
    mpi_enter(c, 0);
    pthread_mutex_lock(&mpi_mu);
    int rc = MPI_SUCCESS;
    *flag = mpi_drained_peek(c, source, tag, st);
    if (!*flag) {
        lstatus ls;
        rc = L("MPI_Iprobe", (uint64_t)rank_down(source), (uint64_t)tag, U(c->real), U(flag),
               U(&ls));
        if (*flag && st != MPI_STATUS_IGNORE)
            status_up(st, &ls);
    }
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(c, 0);
    return rc;
}

/* A loop of MPI_Iprobe in upper code, so a checkpoint can cut between the probes. */
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *st)
{
    unsigned spins = 0;
    for (;;) {
        int flag = 0;
        int rc = MPI_Iprobe(source, tag, comm, &flag, st);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        mpi_backoff(&spins);
    }
}

static struct vreq *req_v(MPI_Request r)
{
    if ((void *)r == (void *)&ompi_request_null || !r)
        return NULL;
    struct vreq *v = (struct vreq *)(void *)r;
    return v->magic == VMAGIC ? v : NULL;
}

int MPI_Wait(MPI_Request *req, MPI_Status *st)
{
    struct vreq *r = req_v(*req);
    if (!r || r->state == VR_INACTIVE) {
        null_status(st);
        return MPI_SUCCESS;
    }
    return vreq_wait(r, st, req);
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st)
{
    struct vreq *r = req_v(*req);
    if (!r || r->state == VR_INACTIVE) {
        *flag = 1;
        null_status(st);
        return MPI_SUCCESS;
    }
    mpi_enter(NULL, 0);
    pthread_mutex_lock(&mpi_mu);
    *flag = vreq_test(r, 1);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(NULL, 0);
    return *flag ? vreq_finish(r, req, st) : MPI_SUCCESS;
}

static MPI_Status *status_at(MPI_Status sts[], int i)
{
    return sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i];
}

/* Under mpi_mu, inside a section: up to TRIES rounds of tests of every active request of REQS,
 * all in one crossing (mpi_ltests; one crossing per request before); DONE[i] set for the
 * complete ones. Returns how many are active (neither MPI_REQUEST_NULL nor an inactive
 * persistent one). */
static int test_reqs_locked(int n, MPI_Request reqs[], char *done, int tries)
{
    struct ltest t_stack[16];
    struct vreq *v_stack[16];
    struct ltest *t = n <= 16 ? t_stack : malloc(sizeof(*t) * (size_t)n);
    struct vreq **v = n <= 16 ? v_stack : malloc(sizeof(*v) * (size_t)n);
    if (!t || !v)
        mpi_die("out of memory in the MPI shim");
    int active = 0, m = 0;
    for (int i = 0; i < n; i++) {
        struct vreq *r = req_v(reqs[i]);
        done[i] = 0;
        if (!r || r->state == VR_INACTIVE)
            continue;
        active++;
        if (r->state == VR_UNPOSTED)
            mpi_post_recv(r);
        if (r->state != VR_ACTIVE) {
            done[i] = r->state == VR_DONE;
            continue;
        }
        memset(&t[m], 0, sizeof(t[m]));
        t[m].real = r->real;
        v[m++] = r;
    }
    if (m)
        mpi_ltests(t, m, tries);
    for (int k = 0; k < m; k++) {
        if (!t[k].flag)
            continue;
        struct vreq *r = v[k];
        status_up(&r->status, &t[k].ls);
        r->real = t[k].real;
        r->state = VR_DONE;
        vreq_completed(r);
    }
    for (int i = 0; i < n; i++) {
        struct vreq *r = req_v(reqs[i]);
        done[i] = r && r->state == VR_DONE;
    }
    if (t != t_stack)
        free(t);
    if (v != v_stack)
        free(v);
    return active;
}

/* One test of each active request of REQS in one section and one crossing. */
static int poll_reqs(int n, MPI_Request reqs[], char *done)
{
    pthread_mutex_lock(&mpi_mu);
    mpi_enter_locked(NULL, 0);
    int active = test_reqs_locked(n, reqs, done, 1);
    mpi_leave_locked(NULL, 0);
    pthread_mutex_unlock(&mpi_mu);
    return active;
}

/* Every request tested in one crossing per round (Jacobi's halo exchange: one crossing, not one
 * per request), one hold of mpi_mu per round; finished together once all are complete. */
int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    char d_stack[16];
    char *done = n <= 16 ? d_stack : malloc((size_t)n);
    if (!done)
        return MPI_ERR_NO_MEM;
    int rc = MPI_SUCCESS;
    unsigned spins = 0;
    for (;;) {
        pthread_mutex_lock(&mpi_mu);
        mpi_enter_locked(NULL, 0);
        int active = test_reqs_locked(n, reqs, done, MPI_WAIT_TRIES), ndone = 0;
        mpi_leave_locked(NULL, 0);
        for (int i = 0; i < n; i++)
            ndone += done[i];
        if (ndone == active) {
            for (int i = 0; i < n; i++) {
                struct vreq *r = req_v(reqs[i]);
                if (!r || r->state == VR_INACTIVE)
                    null_status(status_at(sts, i));
                else if (vreq_finish_locked(r, &reqs[i], status_at(sts, i)) != MPI_SUCCESS)
                    rc = MPI_ERR_IN_STATUS;
            }
            pthread_mutex_unlock(&mpi_mu);
            break;
        }
        pthread_mutex_unlock(&mpi_mu);
        mpi_backoff(&spins);
    }
    if (done != d_stack)
        free(done);
    return rc;
}

/* MPI_Waitany/Testany (WAIT 0: one poll): the first complete request, finished. */
static int any(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st, int wait)
{
    char *done = malloc(n > 0 ? (size_t)n : 1);
    if (!done)
        return MPI_ERR_NO_MEM;
    unsigned spins = 0;
    int rc = MPI_SUCCESS;
    for (;;) {
        if (!poll_reqs(n, reqs, done)) {
            *index = MPI_UNDEFINED;
            *flag = 1;
            null_status(st);
            break;
        }
        int i = 0;
        while (i < n && !done[i])
            i++;
        if (i < n) {
            *index = i;
            *flag = 1;
            rc = vreq_finish(req_v(reqs[i]), &reqs[i], st);
            break;
        }
        if (!wait) {
            *index = MPI_UNDEFINED;
            *flag = 0;
            break;
        }
        mpi_backoff(&spins);
    }
    free(done);
    return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st)
{
    int flag;
    return any(n, reqs, index, &flag, st, 1);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st)
{
    return any(n, reqs, index, flag, st, 0);
}

/* MPI_Waitsome/Testsome (WAIT 0: one poll): every request complete at one poll, finished. */
static int some(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[], int wait)
{
    char *done = malloc(n > 0 ? (size_t)n : 1);
    if (!done)
        return MPI_ERR_NO_MEM;
    unsigned spins = 0;
    int rc = MPI_SUCCESS;
    for (;;) {
        if (!poll_reqs(n, reqs, done)) {
            *outcount = MPI_UNDEFINED;
            break;
        }
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!done[i])
                continue;
            indices[k] = i;
            if (vreq_finish(req_v(reqs[i]), &reqs[i], status_at(sts, k)) != MPI_SUCCESS)
                rc = MPI_ERR_IN_STATUS;
            k++;
        }
        *outcount = k;
        if (k || !wait)
            break;
        mpi_backoff(&spins);
    }
    free(done);
    return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return some(n, reqs, outcount, indices, sts, 1);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[])
{
    return some(n, reqs, outcount, indices, sts, 0);
}

/* Complete only when every request is; then all are finished, else none is touched. */
int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    char *done = malloc(n > 0 ? (size_t)n : 1);
    if (!done)
        return MPI_ERR_NO_MEM;
    int active = poll_reqs(n, reqs, done), ndone = 0, rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++)
        ndone += done[i];
    *flag = ndone == active;
    for (int i = 0; i < n && *flag; i++) {
        struct vreq *r = req_v(reqs[i]);
        if (!r || r->state == VR_INACTIVE)
            null_status(status_at(sts, i));
        else if (vreq_finish(r, &reqs[i], status_at(sts, i)) != MPI_SUCCESS)
            rc = MPI_ERR_IN_STATUS;
    }
    free(done);
    return rc;
}

/* ---- persistent requests: a description kept in upper memory; each MPI_Start posts an
 * ordinary nonblocking call below, so the cut and a restart treat a started one like any
 * other request, and an inactive one holds nothing in the library. ---- */

static int persistent_new(void *buf, int count, MPI_Datatype t, int peer, int tag, MPI_Comm comm,
                          int is_recv, MPI_Request *req)
{
    struct vcomm *c = comm_v(comm);
    if (!c)
        return MPI_ERR_COMM;
    pthread_mutex_lock(&mpi_mu);
    struct vreq *r = vreq_new();
    r->buf = buf;
    r->count = count;
    r->type = t;
    r->peer = peer;
    r->tag = tag;
    r->comm = c;
    r->is_recv = is_recv;
    r->persistent = 1;
    r->state = VR_INACTIVE;
    pthread_mutex_unlock(&mpi_mu);
    *req = (MPI_Request)(void *)r;
    return MPI_SUCCESS;
}

int MPI_Send_init(const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    return persistent_new((void *)buf, count, t, dest, tag, comm, 0, req);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype t, int src, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    return persistent_new(buf, count, t, src, tag, comm, 1, req);
}

int MPI_Start(MPI_Request *req)
{
    struct vreq *r = req_v(*req);
    if (!r || !r->persistent || r->state != VR_INACTIVE)
        return MPI_ERR_REQUEST;
    int rc = MPI_SUCCESS;
    mpi_enter(r->comm, 0);
    pthread_mutex_lock(&mpi_mu);
    vreq_to_tail(r);
    memset(&r->status, 0, sizeof(r->status));
    if (!r->is_recv)
        rc = start_send(r);
    else if (r->peer == MPI_PROC_NULL) {
        null_status(&r->status);
        r->state = VR_DONE;
    } else
        rc = mpi_post_recv(r);
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(r->comm, 0);
    return rc;
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

/* An active request is completed first (the standard lets it finish in the background; here
 * the program waits for it, which only matters for a receive nobody sends to). */
/* A receive is cancelled at once, in the library and here: its request complete, cancelled or
 * received, before the call returns, so that no other completion path (nor the cut) ever sees a
 * cancelled one. One the cut took back (to post after the checkpoint) is simply not posted. */
int MPI_Cancel(MPI_Request *req)
{
    struct vreq *r = req_v(*req);
    if (!r)
        return MPI_ERR_REQUEST;
    if (!r->is_recv)
        return mpi_refused("MPI_Cancel (of a send)");
    mpi_enter(NULL, 0);
    pthread_mutex_lock(&mpi_mu);
    int rc = MPI_SUCCESS;
    if (r->state == VR_UNPOSTED) {
        null_status(&r->status);
        r->status._cancelled = 1;
        r->state = VR_DONE;
    } else if (r->state == VR_ACTIVE) {
        void *real = r->real;
        lstatus ls;
        int cancelled = 0;
        rc = L("MPI_Cancel", U(&real));
        if (rc == MPI_SUCCESS)
            rc = L("MPI_Wait", U(&real), U(&ls));
        if (rc == MPI_SUCCESS) {
            L("MPI_Test_cancelled", U(&ls), U(&cancelled));
            status_up(&r->status, &ls);
            r->status._cancelled = cancelled != 0;
            r->real = real;
            r->state = VR_DONE;
            if (!cancelled)
                mpi_received++;
        }
    }
    pthread_mutex_unlock(&mpi_mu);
    mpi_leave(NULL, 0);
    return rc;
}

int MPI_Test_cancelled(const MPI_Status *status, int *flag)
{
    *flag = status->_cancelled != 0;
    return MPI_SUCCESS;
}

/* Memory the program asks MPI for is the program's: upper memory, saved with it (the library's
 * would be gone at a restart). */
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    (void)info;
    void *p = malloc(size > 0 ? (size_t)size : 1);
    if (!p)
        return MPI_ERR_NO_MEM;
    *(void **)baseptr = p;
    return MPI_SUCCESS;
}

int MPI_Free_mem(void *base)
{
    free(base);
    return MPI_SUCCESS;
}

int MPI_Request_free(MPI_Request *req)
{
    struct vreq *r = req_v(*req);
    if (!r)
        return MPI_ERR_REQUEST;
    if (r->state != VR_INACTIVE)
        vreq_wait(r, MPI_STATUS_IGNORE, NULL);
    if (r->persistent) {
        pthread_mutex_lock(&mpi_mu);
        vreq_free(r);
        pthread_mutex_unlock(&mpi_mu);
    }
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* ---- collectives: nonblocking below, counted on the communicator ---- */

static int coll_wait(struct vcomm *c, void *real, int rc)
{
    if (rc != MPI_SUCCESS) {
        mpi_leave(c, 1);
        return rc;
    }
    mpi_leave(c, 0);
    unsigned spins = 0;
    for (;;) {
        int flag = 0;
        mpi_enter(NULL, 0);
        lstatus ls;
        mpi_ltest(&real, &flag, &ls, MPI_WAIT_TRIES);
        mpi_leave(c, flag);
        if (flag)
            return MPI_SUCCESS;
        mpi_backoff(&spins);
    }
}

/* A collective's post and first batch of tests in one crossing: a small one (an 8-double
 * allreduce on a node) usually completes in it, and then costs one crossing, not two. */
static int coll_run(struct vcomm *c, struct lcache *lc, const char *name, const uint64_t *a, int n,
                    void **real)
{
    int flag = 0;
    lstatus ls;
    int rc = mpi_lpost_test(lc, name, a, n, real, &flag, &ls, MPI_WAIT_TRIES);
    if (flag) {
        mpi_leave(c, 1);
        return MPI_SUCCESS;
    }
    return coll_wait(c, *real, rc);
}

/* A nonblocking collective the program posts (A: its arguments, the last one left for the
 * library's request): a request in the list, its collective in flight on C until it completes,
 * wherever that is seen, the program's tests or the cut's (which completes it: by then every
 * member has posted it, the cut letting those behind through). Entered by COLL_BEGIN. */
static int icoll_post(struct vcomm *c, struct lcache *lc, const char *name, uint64_t *a, int n,
                      MPI_Request *req)
{
    void *real = NULL;
    a[n - 1] = U(&real);
    int rc = (int)mpi_lcall(lc, name, a, n);
    pthread_mutex_lock(&mpi_mu);
    if (rc != MPI_SUCCESS) {
        mpi_leave_locked(c, 1);
        pthread_mutex_unlock(&mpi_mu);
        return rc;
    }
    struct vreq *r = vreq_new();
    r->real = real;
    r->state = VR_ACTIVE;
    r->is_coll = 1;
    r->comm = c;
    mpi_leave_locked(c, 0);
    pthread_mutex_unlock(&mpi_mu);
    *req = (MPI_Request)(void *)r;
    return MPI_SUCCESS;
}

#define ICOLL_RUN(name, ...)                                                                       \
    ({                                                                                             \
        static struct lcache lc_;                                                                  \
        uint64_t la_[] = {__VA_ARGS__, 0};                                                         \
        icoll_post(c, &lc_, name, la_, (int)(sizeof(la_) / sizeof(la_[0])), req);                  \
    })

#define COLL_BEGIN(comm)                                                                           \
    struct vcomm *c = comm_v(comm);                                                                \
    if (!c)                                                                                        \
        return MPI_ERR_COMM;                                                                       \
    void *real = NULL;                                                                             \
    mpi_enter(c, 1)

/* The collective NAME posted and tested in one crossing (mpi_lpost_test); REAL its request. */
#define COLL_RUN(name, ...)                                                                        \
    ({                                                                                             \
        static struct lcache lc_;                                                                  \
        uint64_t la_[] = {__VA_ARGS__};                                                            \
        coll_run(c, &lc_, name, la_, (int)(sizeof(la_) / sizeof(la_[0])), &real);                  \
    })

int MPI_Barrier(MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ibarrier", U(c->real), U(&real));
}

int MPI_Bcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ibcast", U(buf), (uint64_t)count, U(type_real(t)),
                    (uint64_t)rank_down(root), U(c->real), U(&real));
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ireduce", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                    U(op_real(op)), (uint64_t)rank_down(root), U(c->real), U(&real));
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iallreduce", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                    U(op_real(op)), U(c->real), U(&real));
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ialltoall", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)), U(rbuf),
                    (uint64_t)rcount, U(type_real(rtype)), U(c->real), U(&real));
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iallgather", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)),
                    U(rbuf), (uint64_t)rcount, U(type_real(rtype)), U(c->real), U(&real));
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Igather", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)), U(rbuf),
                    (uint64_t)rcount, U(type_real(rtype)), (uint64_t)rank_down(root), U(c->real),
                    U(&real));
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iscatter", U(sbuf), (uint64_t)scount, U(type_real(stype)), buf_down(rbuf),
                    (uint64_t)rcount, U(type_real(rtype)), (uint64_t)rank_down(root), U(c->real),
                    U(&real));
}

/* The v collectives (mpi4py's gather, scatter, allgather and alltoall of Python objects are
 * these): the counts and displacements are the program's arrays, read by the library until the
 * collective completes, which it does before any checkpoint (the cut lets it through). */
int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, const int rcounts[],
                const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Igatherv", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)), U(rbuf),
                    U(rcounts), U(displs), U(type_real(rtype)), (uint64_t)rank_down(root),
                    U(c->real), U(&real));
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iscatterv", U(sbuf), U(scounts), U(displs), U(type_real(stype)),
                    buf_down(rbuf), (uint64_t)rcount, U(type_real(rtype)),
                    (uint64_t)rank_down(root), U(c->real), U(&real));
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iallgatherv", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)),
                    U(rbuf), U(rcounts), U(displs), U(type_real(rtype)), U(c->real), U(&real));
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ialltoallv", buf_down(sbuf), U(scounts), U(sdispls), U(type_real(stype)),
                    U(rbuf), U(rcounts), U(rdispls), U(type_real(rtype)), U(c->real), U(&real));
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iscan", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                    U(op_real(op)), U(c->real), U(&real));
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Iexscan", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                    U(op_real(op)), U(c->real), U(&real));
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype t, MPI_Op op,
                             MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ireduce_scatter_block", buf_down(sbuf), U(rbuf), (uint64_t)rcount,
                    U(type_real(t)), U(op_real(op)), U(c->real), U(&real));
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype t, MPI_Op op,
                       MPI_Comm comm)
{
    COLL_BEGIN(comm);
    return COLL_RUN("MPI_Ireduce_scatter", buf_down(sbuf), U(rbuf), U(rcounts), U(type_real(t)),
                    U(op_real(op)), U(c->real), U(&real));
}

/* ---- nonblocking collectives the program calls (icoll_post) ---- */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Ibarrier", U(c->real));
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Ibcast", U(buf), (uint64_t)count, U(type_real(t)),
                     (uint64_t)rank_down(root), U(c->real));
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Ireduce", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                     U(op_real(op)), (uint64_t)rank_down(root), U(c->real));
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Iallreduce", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                     U(op_real(op)), U(c->real));
}

int MPI_Ialltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Ialltoall", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)),
                     U(rbuf), (uint64_t)rcount, U(type_real(rtype)), U(c->real));
}

int MPI_Iallgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Iallgather", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)),
                     U(rbuf), (uint64_t)rcount, U(type_real(rtype)), U(c->real));
}

int MPI_Igather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Igather", buf_down(sbuf), (uint64_t)scount, U(type_real(stype)), U(rbuf),
                     (uint64_t)rcount, U(type_real(rtype)), (uint64_t)rank_down(root), U(c->real));
}

int MPI_Iscatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Iscatter", U(sbuf), (uint64_t)scount, U(type_real(stype)), buf_down(rbuf),
                     (uint64_t)rcount, U(type_real(rtype)), (uint64_t)rank_down(root), U(c->real));
}

int MPI_Iscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
              MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Iscan", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                     U(op_real(op)), U(c->real));
}

int MPI_Iexscan(const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                MPI_Request *req)
{
    COLL_BEGIN(comm);
    (void)real;
    return ICOLL_RUN("MPI_Iexscan", buf_down(sbuf), U(rbuf), (uint64_t)count, U(type_real(t)),
                     U(op_real(op)), U(c->real));
}

/* ---- communicators ---- */

/* Creating a communicator is a collective on its parent: counted, and blocking in the lower
 * half (every member gets there, or the cut lets it). */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    if (comm_v(comm) && comm_v(comm)->inter)
        mpi_die("MPI_Comm_split of an inter-communicator is not supported yet (docs/MPI.md)");
    COLL_BEGIN(comm);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    int rc = L("MPI_Comm_split", U(c->real), (uint64_t)color, (uint64_t)key, U(&real));
    rc = mpi_comm_made(real, rc, newcomm);
    cross_gate_leave();
    mpi_leave(c, 1);
    return rc;
}

/* Its members stay its members across a restart (rebuilt from their world ranks, as any
 * communicator), even where the restart put them on other nodes (docs/MPI.md, "mpi4py"). */
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    void *info_real = predef_lower(info); /* MPI_Info_create is refused: MPI_INFO_NULL, ENV */
    if (!info_real)
        return MPI_ERR_INFO;
    int lower_type = split_type; /* MPICH's MPI_COMM_TYPE_SHARED is 1; MPI_UNDEFINED the same */
    if (mpi_abi.mpich && split_type != MPI_UNDEFINED) {
        if (split_type != MPI_COMM_TYPE_SHARED)
            return mpi_refused("MPI_Comm_split_type (Open MPI's own split types, under MPICH)");
        lower_type = 1;
    }
    if (comm_v(comm) && comm_v(comm)->inter)
        return MPI_ERR_COMM;
    COLL_BEGIN(comm);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    int rc = L("MPI_Comm_split_type", U(c->real), (uint64_t)lower_type, (uint64_t)key, U(info_real),
               U(&real));
    rc = mpi_comm_made(real, rc, newcomm);
    cross_gate_leave();
    mpi_leave(c, 1);
    return rc;
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    COLL_BEGIN(comm);
    cross_gate_enter(); /* to the record made: see mpi_comm_made */
    int rc = L("MPI_Comm_dup", U(c->real), U(&real));
    if (rc == MPI_SUCCESS && c->inter)
        rc = mpi_inter_dup(c, real, newcomm);
    else
        rc = mpi_comm_made(real, rc, newcomm);
    cross_gate_leave();
    mpi_leave(c, 1);
    if (rc == MPI_SUCCESS)
        rc = mpi_cart_copy(c, *newcomm);
    if (rc == MPI_SUCCESS)
        rc = mpi_attrs_copy(comm, c, *newcomm);
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    struct vcomm *c = comm_v(*comm);
    if (!c || c == vcomm_world || c == vcomm_self)
        return MPI_ERR_COMM;
    int attr_rc = mpi_attrs_delete_all(*comm, c);
    if (attr_rc != MPI_SUCCESS)
        return attr_rc;
    /* The handle read, freed below and marked freed as one step: under mpi_mu, or the cut's
     * drain probed the communicator the library had just freed ("Invalid communicator"); with
     * the gate held, or a checkpoint between reading and freeing left a handle of the library
     * before the restart. */
    cross_gate_enter();
    pthread_mutex_lock(&mpi_mu);
    void *real = c->real;
    int rc = L("MPI_Comm_free", U(&real));
    c->freed = 1;
    pthread_mutex_unlock(&mpi_mu);
    cross_gate_leave();
    *comm = MPI_COMM_NULL;
    return rc;
}

/* A collective free once the communication on COMM is done (mpi4py.futures ends its pools with
 * it): the shim's barrier, which a checkpoint can cut, then the free. The library's own
 * MPI_Comm_disconnect would wait in one crossing, holding the checkpoint gate, for every process
 * of COMM to arrive. */
int MPI_Comm_disconnect(MPI_Comm *comm)
{
    struct vcomm *c = comm_v(*comm);
    if (!c || c == vcomm_world || c == vcomm_self)
        return MPI_ERR_COMM;
    int rc = MPI_Barrier(*comm);
    return rc != MPI_SUCCESS ? rc : MPI_Comm_free(comm);
}

/* ---- datatypes: mpi_types.c ---- */
