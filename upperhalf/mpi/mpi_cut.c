/* mpi_cut.c — a consistent cut of an MPI job at a checkpoint (docs/MPI.md, "The cut"): collectives
 * brought to the same count on every member (sequence numbers), then point-to-point stopped and
 * every message in flight received into upper memory, served first afterwards. */
#include "mpi_shim.h"

#include "crac_hooks.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern int crac_upper_hook_register(const char *name, enum crac_event event, int order,
                                    unsigned flags, crac_hook_fn fn, void *arg)
    __attribute__((weak));

pthread_mutex_t mpi_mu = PTHREAD_MUTEX_INITIALIZER;
int64_t *mpi_sent_to;
int64_t mpi_received;

/* The cut's state. Hooks that run with threads parked (PRE_RESUME, RESTART) only store these
 * words and wake the futex: a parked thread may hold mpi_mu. */
static volatile int32_t stop_coll; /* collectives beyond their target wait */
static volatile int32_t stop_p2p;  /* every communicating section waits */
static volatile int32_t wake_word; /* futex the waiting threads sleep on */
static volatile int32_t repost;    /* receives cancelled by the drain are to be posted again */
static int active;                 /* threads inside a communicating section (mpi_mu) */

static struct drained *drained_head, **drained_tail = &drained_head;

static void futex_wait(volatile int32_t *w, int32_t v)
{
    struct timespec ts = {0, 50 * 1000 * 1000}; /* re-check now and then: flags are plain words */
    syscall(SYS_futex, w, 0 /* FUTEX_WAIT */, v, &ts, NULL, 0);
}

static void futex_wake_all(volatile int32_t *w)
{
    syscall(SYS_futex, w, 1 /* FUTEX_WAKE */, INT_MAX, NULL, NULL, 0);
}

static void release_waiters(void)
{
    __atomic_store_n(&stop_coll, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&stop_p2p, 0, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&wake_word, 1, __ATOMIC_SEQ_CST);
    futex_wake_all(&wake_word);
}

/* Between two tests of a wait loop. The first tests follow each other at once, as a native
 * blocking call polls: the library's progress engine already yields the CPU when it is told the
 * node is oversubscribed (Open MPI's mpi_yield_when_idle), and a sched_yield of ours on every
 * test cost a 2-rank 8-byte ping-pong several times its native latency (docs/PERFORMANCE.md, "MPI").
 * Then yields, then short sleeps: a long wait (a peer computing) leaves the CPU to others. */
void mpi_backoff(unsigned *spins)
{
    ++*spins;
    if (*spins < 256) {
        __builtin_ia32_pause();
        return;
    }
    if (*spins < 512) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 20 * 1000};
    nanosleep(&ts, NULL);
}

/* Posts the receives the last drain cancelled, in the order the program posted them. */
static void do_repost(void)
{
    /* A plain load first: the exchange is a locked instruction, paid by every call otherwise. */
    if (!__atomic_load_n(&repost, __ATOMIC_ACQUIRE) ||
        !__atomic_exchange_n(&repost, 0, __ATOMIC_SEQ_CST))
        return;
    for (struct vreq *r = vreq_list; r; r = r->next)
        if (r->state == VR_UNPOSTED)
            mpi_post_recv(r);
}

void mpi_enter_locked(struct vcomm *comm, int is_coll)
{
    for (;;) {
        int32_t w = __atomic_load_n(&wake_word, __ATOMIC_SEQ_CST);
        int at_target = is_coll && comm && __atomic_load_n(&stop_coll, __ATOMIC_SEQ_CST) &&
                        comm->seq >= comm->target;
        if (!at_target && !__atomic_load_n(&stop_p2p, __ATOMIC_SEQ_CST))
            break;
        if (at_target) /* the cut lets it through if this rank is behind elsewhere */
            comm->held++;
        pthread_mutex_unlock(&mpi_mu);
        futex_wait(&wake_word, w);
        pthread_mutex_lock(&mpi_mu);
        if (at_target)
            comm->held--;
    }
    /* Only once not held: receives posted while a cut holds the threads would be live in the
     * library the image is cut from, and stale after a restart. */
    do_repost();
    active++;
    if (is_coll && comm) {
        comm->seq++;
        comm->inflight++;
    }
}

void mpi_enter(struct vcomm *comm, int is_coll)
{
    pthread_mutex_lock(&mpi_mu);
    mpi_enter_locked(comm, is_coll);
    pthread_mutex_unlock(&mpi_mu);
}

void mpi_leave_locked(struct vcomm *comm, int coll_done)
{
    active--;
    if (coll_done && comm)
        comm->inflight--;
}

void mpi_leave(struct vcomm *comm, int coll_done)
{
    pthread_mutex_lock(&mpi_mu);
    mpi_leave_locked(comm, coll_done);
    pthread_mutex_unlock(&mpi_mu);
}

/* ---- drained messages ---- */

/* Matched messages (mpi_message_take) the program has not received yet: still the library's. */
static struct drained *taken_head;

static void taken_unlink(struct drained *d)
{
    for (struct drained **pp = &taken_head; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            return;
        }
}

/* At the cut: each matched message the library still holds received into upper memory, as a
 * drained one is, so that no matched message of the library outlives it. */
static void keep_taken_messages(void)
{
    void *byte = lower_named("ompi_mpi_byte");
    for (struct drained *d = taken_head; d; d = d->next) {
        lstatus ls;
        if (!(d->data = malloc(d->len > 0 ? (size_t)d->len : 1)))
            mpi_die("out of memory keeping a matched MPI message");
        L("MPI_Mrecv", U(d->data), (uint64_t)d->len, U(byte), U(&d->real), U(&ls));
        d->real = NULL;
    }
    taken_head = NULL;
}

void mpi_message_unpack(struct drained *d, void *buf, int count, MPI_Datatype type_up,
                        MPI_Status *st)
{
    if (d->real) { /* still the library's: received straight into the program's buffer */
        lstatus ls = {{0}};
        taken_unlink(d);
        int rc =
            L("MPI_Mrecv", U(buf), (uint64_t)count, U(type_real(type_up)), U(&d->real), U(&ls));
        status_up(st, &ls);
        st->MPI_ERROR = rc; /* MPI_ERR_TRUNCATE, as the unpacking below says it */
        free(d);
        return;
    }
    int pos = 0;
    void *type = type_real(type_up);
    int size = 0;
    L("MPI_Type_size", U(type), U(&size));
    int fits = size > 0 ? d->len / size : 0;
    if (fits > count)
        fits = count;
    L("MPI_Unpack", U(d->data), (uint64_t)d->len, U(&pos), U(buf), (uint64_t)fits, U(type),
      U(d->comm->real));
    memset(st, 0, sizeof(*st));
    st->MPI_SOURCE = d->source;
    st->MPI_TAG = d->tag;
    st->MPI_ERROR = d->len > count * size ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
    st->_ucount = (size_t)(d->len < count * size ? d->len : count * size);
    free(d->data);
    free(d);
}

static int drained_matches(const struct drained *d, const struct vcomm *c, int source, int tag)
{
    return d->comm == c && (source == MPI_ANY_SOURCE || source == d->source) &&
           (tag == MPI_ANY_TAG || tag == d->tag);
}

/* The first drained message matching (C, SOURCE, TAG), out of the list; NULL if none. */
static struct drained *drained_take(const struct vcomm *c, int source, int tag)
{
    for (struct drained **pp = &drained_head; *pp; pp = &(*pp)->next) {
        struct drained *d = *pp;
        if (!drained_matches(d, c, source, tag))
            continue;
        *pp = d->next;
        if (drained_tail == &d->next)
            drained_tail = pp;
        d->next = NULL;
        return d;
    }
    return NULL;
}

int mpi_drained_match(struct vreq *r)
{
    struct drained *d = drained_take(r->comm, r->peer, r->tag);
    if (!d)
        return 0;
    mpi_message_unpack(d, r->buf, r->count, r->type, &r->status);
    r->state = VR_DONE;
    return 1;
}

struct drained *mpi_message_take(struct vcomm *c, int source, int tag, int *rc, int tries)
{
    *rc = MPI_SUCCESS;
    struct drained *d = drained_take(c, source, tag);
    if (d)
        return d;
    int flag = 0;
    void *msg = NULL;
    lstatus ls;
    *rc = mpi_limprobe(rank_down(source), tag, c->real, &flag, &msg, &ls, tries);
    if (*rc != MPI_SUCCESS || !flag)
        return NULL;
    MPI_Status st;
    status_up(&st, &ls); /* its byte count, either library's: no MPI_Get_count crossing */
    int len = st._ucount > INT_MAX ? INT_MAX : (int)st._ucount;
    if (!(d = calloc(1, sizeof(*d))))
        mpi_die("out of memory receiving an MPI message");
    d->comm = c;
    d->source = st.MPI_SOURCE;
    d->tag = st.MPI_TAG;
    d->len = len;
    d->real = msg;
    d->next = taken_head;
    taken_head = d;
    mpi_received++; /* gone from the library's queue: the cut counts it as received */
    return d;
}

int mpi_drained_peek(struct vcomm *c, int source, int tag, MPI_Status *st)
{
    for (struct drained *d = drained_head; d; d = d->next) {
        if (!drained_matches(d, c, source, tag))
            continue;
        if (st != MPI_STATUS_IGNORE) {
            memset(st, 0, sizeof(*st));
            st->MPI_SOURCE = d->source;
            st->MPI_TAG = d->tag;
            st->_ucount = (size_t)d->len;
        }
        return 1;
    }
    return 0;
}

int mpi_post_recv(struct vreq *r)
{
    if (mpi_drained_match(r))
        return 0;
    void *real = NULL;
    int rc = L("MPI_Irecv", U(r->buf), (uint64_t)r->count, U(type_real(r->type)),
               (uint64_t)rank_down(r->peer), (uint64_t)r->tag, U(r->comm->real), U(&real));
    r->real = real;
    r->state = VR_ACTIVE;
    return rc;
}

/* ---- the checkpoint ---- */

#define MAX_KEYS 128
struct seq_rec {
    uint64_t key, seq, inflight, held;
};
/* A rank's first record in the cut's allgather when its MPI_Finalize, not its cut, made the call
 * (docs/MPI.md, "Finalize"). Communicator keys are hashes, never this. */
#define FIN_KEY 1ULL

/* Serialises this process's calls on the control communicator: the cut (hook thread) and the
 * agreement of MPI_Finalize (a program thread) each make a whole sequence of them, and the
 * ranks match them by order. */
static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static int fin_started; /* under ctl_mu: this rank's MPI_Finalize passed its barrier */

static int ctl_allgather(void *mine, int n, void *all)
{
    return L("MPI_Allgather", U(mine), (uint64_t)n, U(lower_named("ompi_mpi_byte")), U(all),
             (uint64_t)n, U(lower_named("ompi_mpi_byte")), U(mpi_ctl_comm));
}

/* The program's active requests, nonblocking collectives (COLLS) or the others, tested once;
 * completed ones keep their status for the program's next Wait/Test. The cut completes the
 * collectives, since the program may not wait for one before the cut ends (its thread held at
 * its next collective, say, while this one is still in flight). */
static void test_requests(int colls)
{
    for (struct vreq *r = vreq_list; r; r = r->next) {
        if (r->state != VR_ACTIVE || !r->is_coll != !colls)
            continue;
        int flag = 0;
        void *real = r->real;
        lstatus ls;
        L("MPI_Test", U(&real), U(&flag), U(&ls));
        if (flag) {
            status_up(&r->status, &ls);
            r->real = real;
            r->state = VR_DONE;
            if (colls)
                vreq_completed(r);
            else if (r->is_recv && r->status.MPI_SOURCE != MPI_PROC_NULL)
                mpi_received++;
        }
    }
}

/* One communicator's counts across the gathered table: the lowest and the highest. */
struct key_span {
    uint64_t key, lo, hi;
};

static int span_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct key_span *)a)->key, y = ((const struct key_span *)b)->key;
    return (x > y) - (x < y);
}

/* The distinct keys of ALL (TOTAL records) into SPANS, sorted, each with its lowest and highest
 * count; returns how many. One sort, not every record compared with every other: 128 records a
 * rank, so that was (128 n)^2 comparisons a round. */
static size_t key_spans(const struct seq_rec *all, size_t total, struct key_span *spans)
{
    size_t m = 0, out = 0;
    for (size_t i = 0; i < total; i++)
        if (all[i].key)
            spans[m++] = (struct key_span){all[i].key, all[i].seq, all[i].seq};
    qsort(spans, m, sizeof(*spans), span_cmp);
    for (size_t i = 0; i < m; i++) {
        struct key_span *last = out ? &spans[out - 1] : NULL;
        if (last && last->key == spans[i].key) {
            last->lo = spans[i].lo < last->lo ? spans[i].lo : last->lo;
            last->hi = spans[i].hi > last->hi ? spans[i].hi : last->hi;
        } else {
            spans[out++] = spans[i];
        }
    }
    return out;
}

static struct key_span *span_of(struct key_span *spans, size_t m, uint64_t key)
{
    struct key_span probe = {key, 0, 0};
    return bsearch(&probe, spans, m, sizeof(*spans), span_cmp);
}

/* A rank behind on a communicator (another member started more collectives there) whose
 * thread waits at another one's target must first do that one's next collective: the
 * collectives it still owes come after it in its program (MPI_Iscatter on a grid's row, then
 * MPI_Iallgather on the grid: the ranks ahead wait for the held ones' Iallgather, and without
 * this the cut waited for ever). So that one's count is raised by one in ALL and in SPANS (then
 * the target on every member, who all do that collective), decided from the table alone like
 * the rest. */
static void let_through(struct seq_rec *all, size_t n, struct key_span *spans, size_t m)
{
    char *behind = calloc(n, 1);
    if (!behind)
        return; /* the next round tries again */
    for (size_t r = 0; r < n; r++) {
        const struct seq_rec *mine = all + r * MAX_KEYS;
        for (size_t i = 0; i < MAX_KEYS && mine[i].key && !behind[r]; i++)
            behind[r] = mine[i].seq < span_of(spans, m, mine[i].key)->hi;
    }
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; behind[r] && i < MAX_KEYS && all[r * MAX_KEYS + i].key; i++) {
            struct seq_rec *rec = &all[r * MAX_KEYS + i];
            if (!rec->held) /* only to raise the target: not sent again */
                continue;
            struct key_span *span = span_of(spans, m, rec->key);
            if (++rec->seq > span->hi)
                span->hi = rec->seq;
        }
    free(behind);
}

/* Phase 1: every member of every communicator has started the same number of collectives on
 * it, and none is inside one. Ranks behind are let through to the highest count; new
 * collectives wait. 1 (refused) when a rank is finalizing: its MPI_Finalize's allgather met
 * this one, and every rank sees that in the same round. */
static int cut_collectives(void)
{
    pthread_mutex_lock(&mpi_mu);
    for (struct vcomm *c = vcomm_list; c; c = c->next)
        c->target = c->seq;
    __atomic_store_n(&stop_coll, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mpi_mu);
    size_t n = (size_t)mpi_world_size;
    struct seq_rec *mine = calloc(MAX_KEYS, sizeof(*mine));
    struct seq_rec *all = calloc(MAX_KEYS * n, sizeof(*all));
    struct key_span *spans = calloc(MAX_KEYS * n, sizeof(*spans));
    if (!mine || !all || !spans) {
        free(mine);
        free(all);
        free(spans);
        return -1;
    }
    unsigned spins = 0;
    for (;;) {
        memset(mine, 0, MAX_KEYS * sizeof(*mine));
        int k = 0;
        pthread_mutex_lock(&mpi_mu);
        test_requests(1);
        for (struct vcomm *c = vcomm_list; c && k < MAX_KEYS; c = c->next)
            if (!c->freed) /* size 1 too: a collective there may be in progress */
                mine[k++] =
                    (struct seq_rec){c->key, c->seq, (uint64_t)c->inflight, (uint64_t)c->held};
        pthread_mutex_unlock(&mpi_mu);
        ctl_allgather(mine, MAX_KEYS * (int)sizeof(*mine), all);
        int finalizing = 0;
        for (size_t r = 0; r < n; r++)
            finalizing |= all[r * MAX_KEYS].key == FIN_KEY;
        if (finalizing) {
            free(mine);
            free(all);
            free(spans);
            return 1;
        }
        /* Decided from the gathered table alone, so every rank decides alike. */
        size_t m = key_spans(all, MAX_KEYS * n, spans);
        int settled = 1;
        for (size_t i = 0; i < MAX_KEYS * n; i++)
            settled &= !(all[i].key && all[i].inflight);
        for (size_t i = 0; i < m; i++)
            settled &= spans[i].lo == spans[i].hi;
        let_through(all, n, spans, m);
        pthread_mutex_lock(&mpi_mu);
        for (struct vcomm *c = vcomm_list; c; c = c->next) {
            struct key_span *span = c->freed ? NULL : span_of(spans, m, c->key);
            if (span && span->hi > c->target)
                c->target = span->hi;
        }
        pthread_mutex_unlock(&mpi_mu);
        __atomic_add_fetch(&wake_word, 1, __ATOMIC_SEQ_CST);
        futex_wake_all(&wake_word);
        if (settled)
            break;
        mpi_backoff(&spins);
    }
    free(mine);
    free(all);
    free(spans);
    return 0;
}

static int64_t pending_sends(void)
{
    int64_t n = 0;
    for (struct vreq *r = vreq_list; r; r = r->next)
        if (r->state == VR_ACTIVE && !r->is_recv)
            n++;
    return n;
}

static void drain_one_comm(struct vcomm *c)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        lstatus ls;
        L("MPI_Iprobe", (uint64_t)rank_down(MPI_ANY_SOURCE), (uint64_t)MPI_ANY_TAG, U(c->real),
          U(&flag), U(&ls));
        if (!flag)
            return;
        int len = 0;
        void *byte = lower_named("ompi_mpi_byte");
        L("MPI_Get_count", U(&ls), U(byte), U(&len));
        status_up(&st, &ls);
        struct drained *d = calloc(1, sizeof(*d));
        if (!d || !(d->data = malloc(len > 0 ? (size_t)len : 1)))
            mpi_die("out of memory draining MPI messages");
        d->comm = c;
        d->source = st.MPI_SOURCE;
        d->tag = st.MPI_TAG;
        d->len = len;
        L("MPI_Recv", U(d->data), (uint64_t)len, U(byte), (uint64_t)rank_down(st.MPI_SOURCE),
          (uint64_t)st.MPI_TAG, U(c->real), U(&ls));
        *drained_tail = d;
        drained_tail = &d->next;
        mpi_received++;
    }
}

/* Phase 2: no communicating section runs; every message sent anywhere is received, either by
 * a receive the program posted or into the drain list; receives still open are cancelled. */
static int cut_p2p(void)
{
    __atomic_store_n(&stop_p2p, 1, __ATOMIC_SEQ_CST);
    unsigned spins = 0;
    pthread_mutex_lock(&mpi_mu);
    while (active) {
        pthread_mutex_unlock(&mpi_mu);
        mpi_backoff(&spins);
        pthread_mutex_lock(&mpi_mu);
    }
    /* From here on this thread alone uses the program's requests, and holds mpi_mu to the end:
     * a program thread may still free a completed request (outside any section). */
    keep_taken_messages();
    size_t n = (size_t)mpi_world_size;
    int64_t *total = calloc(n, sizeof(*total));
    if (!total) {
        pthread_mutex_unlock(&mpi_mu);
        return -1;
    }
    L("MPI_Allreduce", U(mpi_sent_to), U(total), (uint64_t)n, U(lower_named("ompi_mpi_int64_t")),
      U(lower_named("ompi_mpi_op_sum")), U(mpi_ctl_comm));
    int64_t expected = total[mpi_world_rank];
    free(total);
    spins = 0;
    for (;;) {
        test_requests(0);
        for (struct vcomm *c = vcomm_list; c; c = c->next)
            if (!c->freed && !c->ghost) /* a ghost is a counter, no communicator */
                drain_one_comm(c);
        /* Done only when every rank is: a rank that stopped calling the library could leave
         * a peer's message in its own send queue (a send completes once its buffer is
         * copied, not once it is delivered); the allreduce itself drives the progress. */
        int mine = mpi_received >= expected && !pending_sends(), all = 0;
        L("MPI_Allreduce", U(&mine), U(&all), 1, U(lower_named("ompi_mpi_int")),
          U(lower_named("ompi_mpi_op_min")), U(mpi_ctl_comm));
        if (all)
            break;
        mpi_backoff(&spins);
    }
    for (struct vreq *r = vreq_list; r; r = r->next) {
        if (r->state != VR_ACTIVE || !r->is_recv)
            continue;
        void *real = r->real;
        MPI_Status st;
        int cancelled = 0;
        L("MPI_Cancel", U(&real));
        lstatus ls;
        L("MPI_Wait", U(&real), U(&ls));
        L("MPI_Test_cancelled", U(&ls), U(&cancelled));
        status_up(&st, &ls);
        if (cancelled) {
            r->state = VR_UNPOSTED;
            r->real = NULL;
        } else {
            r->status = st;
            r->state = VR_DONE;
            mpi_received++;
        }
    }
    __atomic_store_n(&repost, 1, __ATOMIC_SEQ_CST);
    mpi_adopt_sockets();
    if (getenv("CRAC_DEBUG") && *getenv("CRAC_DEBUG") == '1') {
        int n_drained = 0, n_cancelled = 0;
        for (struct drained *d = drained_head; d; d = d->next)
            n_drained++;
        for (struct vreq *r = vreq_list; r; r = r->next)
            n_cancelled += r->state == VR_UNPOSTED;
        fprintf(stderr,
                "crac: debug: mpi rank %d cut: %lld received of %lld sent to it, %d drained, %d "
                "receives to post again\n",
                mpi_world_rank, (long long)mpi_received, (long long)expected, n_drained,
                n_cancelled);
    }
    pthread_mutex_unlock(&mpi_mu);
    return 0;
}

static int on_event(enum crac_event ev, void *arg)
{
    (void)arg;
    if (ev == CRAC_EV_PRE_SUSPEND && __atomic_load_n(&mpi_initing, __ATOMIC_SEQ_CST)) {
        /* A program thread is inside MPI_Init, holding the checkpoint gate, and MPI_Init returns
         * only once every rank has called it. A rank still before its MPI_Init has no MPI state
         * and lets its checkpoint through, then is held suspended: waiting here for MPI_Init
         * hung the job (the coordinator gave up after its phase timeout, and this hook's cut
         * then ran alone once the others resumed). Refused at once instead: the coordinator
         * calls the checkpoint off and every rank goes on (docs/MPI.md, "Before MPI_Init"). */
        fprintf(stderr,
                "crac: warning: MPI: checkpoint refused, this rank is in MPI_Init (waiting for "
                "ranks that have not called it yet)\n");
        return -1;
    }
    if (!mpi_inited || mpi_finalized)
        return 0;
    switch (ev) {
    case CRAC_EV_PRE_SUSPEND: {
        pthread_mutex_lock(&ctl_mu);
        int rc = fin_started ? 1 : cut_collectives();
        if (rc == 0)
            rc = cut_p2p();
        if (rc == 0)
            mpi_errh_record();
        pthread_mutex_unlock(&ctl_mu);
        if (rc == 1) {
            /* No PRE_RESUME follows a failed PRE_SUSPEND: let held collectives go now. */
            release_waiters();
            fprintf(stderr,
                    "crac: warning: MPI rank %d: checkpoint refused, the job is in "
                    "MPI_Finalize\n",
                    mpi_world_rank);
        }
        return rc == 0 ? 0 : -1;
    }
    case CRAC_EV_PRE_RESUME: release_waiters(); return 0;
    case CRAC_EV_RESTART:
        mpi_lower_rebuild();
        release_waiters();
        return 0;
    default: return 0;
    }
}

void mpi_register_hooks(void)
{
    if (!crac_upper_hook_register)
        return;
    crac_upper_hook_register("mpi.cut", CRAC_EV_PRE_SUSPEND, 0, 0, on_event, NULL);
    crac_upper_hook_register("mpi.release", CRAC_EV_PRE_RESUME, 0, 0, on_event, NULL);
    crac_upper_hook_register("mpi.rebuild", CRAC_EV_RESTART, 0, 0, on_event, NULL);
}

/* MPI_Finalize, after its barrier: the ranks agree to leave MPI on the control communicator,
 * with the same allgather the cut makes, so that a cut running on another rank meets it (and is
 * refused there) instead of waiting for a rank that is gone. Repeated until every rank's record
 * says finalizing; from then on this rank's cut is refused without a call. */
void mpi_finalize_agree(void)
{
    pthread_mutex_lock(&ctl_mu);
    fin_started = 1;
    size_t n = (size_t)mpi_world_size;
    struct seq_rec *mine = calloc(MAX_KEYS, sizeof(*mine));
    struct seq_rec *all = calloc(MAX_KEYS * n, sizeof(*all));
    if (!mine || !all)
        mpi_die("out of memory in the MPI shim");
    mine[0] = (struct seq_rec){FIN_KEY, UINT64_MAX, 0, 0};
    for (int done = 0; !done;) {
        ctl_allgather(mine, MAX_KEYS * (int)sizeof(*mine), all);
        done = 1;
        for (size_t r = 0; r < n; r++)
            done &= all[r * MAX_KEYS].key == FIN_KEY;
    }
    free(mine);
    free(all);
    pthread_mutex_unlock(&ctl_mu);
}
