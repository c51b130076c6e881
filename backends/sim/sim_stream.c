/* sim_stream.c — streams of the sim: one worker thread per stream (started lazily) runs its work in
 * order; legacy default-stream semantics (the NULL stream waits for, and is waited for by, every
 * blocking stream) are dependencies between queued operations. */
#include "sim.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Internal layout differs between versions, as a driver's does between releases. */
struct sim_stream {
#if CRAC_SIM_VERSION == 1
    uint32_t index, gen;
    int live; /* the handle is valid */
    int busy; /* the slot is in use: live, or destroyed with work or a worker left */
    unsigned flags;
    int has_worker;
    int dying;
    struct sim_op *head, *tail;
    volatile uint64_t submitted, completed;
#else
    volatile uint64_t submitted, completed;
    struct sim_op *head, *tail;
    uint64_t reserved[2];
    unsigned flags;
    int dying, has_worker, busy, live;
    uint32_t gen, index;
#endif
};

static struct sim_stream *streams; /* [0] is the legacy default stream */
static uint32_t high_water = 1;    /* slots [0, high_water) have been used */

int sim_streams_init(void)
{
    streams = bk_alloc(SIM_MAX_STREAMS * sizeof(*streams));
    if (!streams)
        return -1;
    streams[0].busy = streams[0].live = 1;
    return 0;
}

struct sim_op *sim_op_new(int type)
{
    struct sim_op *op = bk_alloc(sizeof(*op));
    if (op) {
        op->type = type;
        op->deps = op->deps_inline;
    }
    return op;
}

static void op_free(struct sim_op *op);

void sim_op_free(struct sim_op *op) { op_free(op); }

static void op_free(struct sim_op *op)
{
    if (op->deps != op->deps_inline)
        bk_free(op->deps, op->n_deps * sizeof(*op->deps));
    if (op->type == OP_KERNEL)
        sim_kernel_free(&op->u.kernel);
    bk_free(op, sizeof(*op));
}

static int is_legacy_handle(cudaStream_t h)
{
    return h == NULL || h == cudaStreamLegacy || h == cudaStreamPerThread;
}

struct sim_stream *sim_stream_get(cudaStream_t h)
{
    if (is_legacy_handle(h))
        return &streams[0];
    uint32_t gen;
    long i = sim_handle_decode(SIM_H_STREAM, (uint64_t)(uintptr_t)h, streams, sizeof(*streams),
                               SIM_MAX_STREAMS, &gen);
    if (i <= 0)
        return NULL;
    struct sim_stream *s = &streams[i];
    if (!__atomic_load_n(&s->live, __ATOMIC_ACQUIRE) || !sim_handle_gen_matches(gen, s->gen))
        return NULL;
    return s;
}

void sim_stream_ident(const struct sim_stream *s, uint32_t *index, uint32_t *gen)
{
    *index = s->index;
    *gen = s->gen;
}

unsigned sim_stream_flags(const struct sim_stream *s) { return s->flags; }

int sim_stream_idle(const struct sim_stream *s)
{
    return __atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >=
           __atomic_load_n(&s->submitted, __ATOMIC_ACQUIRE);
}

int sim_dep_done(const struct sim_dep *d)
{
    const struct sim_stream *s = &streams[d->index];
    if (s->gen != d->gen)
        return 1; /* that stream was destroyed and drained, its slot reused */
    return __atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= d->seq;
}

static int blocking(const struct sim_stream *s)
{
    return s->index != 0 && !(s->flags & cudaStreamNonBlocking);
}

static int add_dep(struct sim_op *op, uint32_t *cap, const struct sim_dep *d)
{
    if (sim_dep_done(d))
        return 0;
    if (op->n_deps == *cap) {
        uint32_t ncap = *cap * 2;
        struct sim_dep *n = bk_alloc(ncap * sizeof(*n));
        if (!n)
            return -1;
        memcpy(n, op->deps, op->n_deps * sizeof(*n));
        if (op->deps != op->deps_inline)
            bk_free(op->deps, *cap * sizeof(*n));
        op->deps = n;
        *cap = ncap;
    }
    op->deps[op->n_deps++] = *d;
    return 0;
}

static void *worker_main(void *arg);

static int start_worker(struct sim_stream *s)
{
    sigset_t all, old;
    sigfillset(&all);
    /* Workers take no signals: a program's handler must never run on a lower-half thread. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &attr, worker_main, s);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return -1;
    s->has_worker = 1;
    return 0;
}

uint64_t sim_stream_enqueue(struct sim_stream *s, struct sim_op *op, const struct sim_dep *extra)
{
    uint32_t cap = SIM_INLINE_DEPS;
    int bad = 0;
    /* A capturing stream puts its work into a graph instead of running it (sim_graph.c). */
    int captured = sim_graph_capture_op(s, op);
    if (captured) {
        if (captured < 0)
            op_free(op);
        return captured > 0 ? SIM_SEQ_CAPTURED : 0;
    }
    if (s->index == 0) {
        /* The legacy stream waits for all work already queued on blocking streams. */
        for (uint32_t i = 1; i < high_water; i++) {
            struct sim_stream *b = &streams[i];
            if (b->busy && blocking(b)) {
                struct sim_dep d = {b->index, b->gen, b->submitted};
                bad |= add_dep(op, &cap, &d);
            }
        }
    } else if (blocking(s)) {
        /* ... and blocking streams wait for the work already queued on it. */
        struct sim_dep d = {0, streams[0].gen, streams[0].submitted};
        bad |= add_dep(op, &cap, &d);
    }
    if (extra)
        bad |= add_dep(op, &cap, extra);
    if (bad || (!s->has_worker && start_worker(s) != 0)) {
        op_free(op);
        return 0;
    }
    op->seq = s->submitted + 1;
    __atomic_store_n(&s->submitted, op->seq, __ATOMIC_RELEASE);
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    pthread_cond_broadcast(&sim_cv);
    return op->seq;
}

void sim_stream_execute(struct sim_op *op)
{
    switch (op->type) {
    case OP_COPY: memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.n); break;
    case OP_SET: memset(op->u.set.dst, op->u.set.value, op->u.set.n); break;
    case OP_KERNEL: sim_kernel_run(&op->u.kernel); break;
    case OP_RECORD:
        sim_event_record_done(op->u.record.index, op->u.record.gen, op->u.record.record_id);
        break;
    case OP_HOSTFN: op->u.hostfn.fn(op->u.hostfn.data); break;
    default: break; /* OP_WAIT: its dependency was the point */
    }
}

static void *worker_main(void *arg)
{
    struct sim_stream *s = arg;
    pid_t tid = gettid();
    if (sim_host.register_thread)
        sim_host.register_thread(tid);
    pthread_mutex_lock(&sim_lock);
    for (;;) {
        while (!s->head && !s->dying)
            pthread_cond_wait(&sim_cv, &sim_lock);
        struct sim_op *op = s->head;
        if (!op)
            break; /* destroyed and drained */
        for (uint32_t i = 0; i < op->n_deps; i++)
            while (!sim_dep_done(&op->deps[i]))
                pthread_cond_wait(&sim_cv, &sim_lock);
        pthread_mutex_unlock(&sim_lock);
        /* After a sticky error the device runs nothing more; records still complete. */
        if (op->type == OP_RECORD || sim_sticky() == cudaSuccess)
            sim_stream_execute(op);
        pthread_mutex_lock(&sim_lock);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        __atomic_store_n(&s->completed, op->seq, __ATOMIC_RELEASE);
        op_free(op);
        pthread_cond_broadcast(&sim_cv);
    }
    s->has_worker = 0;
    s->busy = 0;
    pthread_cond_broadcast(&sim_cv);
    pthread_mutex_unlock(&sim_lock);
    if (sim_host.unregister_thread)
        sim_host.unregister_thread(tid);
    return NULL;
}

void sim_stream_wait_idle(struct sim_stream *s)
{
    while (!sim_stream_idle(s))
        pthread_cond_wait(&sim_cv, &sim_lock);
}

void sim_wait_all_idle(void)
{
    for (uint32_t i = 0; i < high_water; i++)
        if (streams[i].busy)
            sim_stream_wait_idle(&streams[i]);
}

static void destroy_locked(struct sim_stream *s)
{
    __atomic_store_n(&s->live, 0, __ATOMIC_RELEASE);
    s->dying = 1;
    if (!s->has_worker && !s->head)
        s->busy = 0;
    pthread_cond_broadcast(&sim_cv);
}

void sim_streams_reset(void)
{
    for (uint32_t i = 1; i < high_water; i++)
        if (streams[i].live)
            destroy_locked(&streams[i]);
    for (uint32_t i = 1; i < high_water; i++)
        while (streams[i].busy)
            pthread_cond_wait(&sim_cv, &sim_lock);
}

/* ---- API ---- */

cudaError_t sim_cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    SIM_ENTER();
    if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    uint32_t i = 1;
    while (i < SIM_MAX_STREAMS && streams[i].busy)
        i++;
    if (i == SIM_MAX_STREAMS) {
        pthread_mutex_unlock(&sim_lock);
        return sim_ret(cudaErrorMemoryAllocation);
    }
    struct sim_stream *s = &streams[i];
    uint32_t gen = s->gen + 1;
    memset(s, 0, sizeof(*s));
    s->index = i;
    s->gen = gen;
    s->flags = flags;
    s->busy = 1;
    __atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);
    if (i >= high_water)
        high_water = i + 1;
    *pStream =
        (cudaStream_t)(uintptr_t)sim_handle_encode(SIM_H_STREAM, streams, sizeof(*streams), i, gen);
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaStreamCreate(cudaStream_t *pStream)
{
    return sim_cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t sim_cudaStreamDestroy(cudaStream_t stream)
{
    SIM_ENTER();
    if (is_legacy_handle(stream))
        return sim_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    if (s)
        destroy_locked(s);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(s ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t sim_cudaStreamSynchronize(cudaStream_t stream)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    if (s)
        sim_stream_wait_idle(s);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(s ? sim_sticky() : cudaErrorInvalidResourceHandle);
}

/* Lock-free: the handle decodes to a slot whose counters are atomics. */
cudaError_t sim_cudaStreamQuery(cudaStream_t stream)
{
    SIM_ENTER();
    struct sim_stream *s = sim_stream_get(stream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    return sim_stream_idle(s) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t sim_cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    SIM_ENTER();
    if (!fn)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t e = cudaErrorInvalidResourceHandle;
    if (s) {
        struct sim_op *op = sim_op_new(OP_HOSTFN);
        e = cudaErrorMemoryAllocation;
        if (op) {
            op->u.hostfn.fn = fn;
            op->u.hostfn.data = userData;
            if (sim_stream_enqueue(s, op, NULL))
                e = cudaSuccess;
        }
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}
