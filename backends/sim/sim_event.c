/* sim_event.c — events of the sim: a record is an operation on a stream that takes a
 * CLOCK_MONOTONIC timestamp when the stream reaches it; waits and queries are dependencies on it. */
#include "sim.h"

#include <string.h>

struct sim_event {
#if CRAC_SIM_VERSION == 1
    uint32_t index, gen;
    int live;
    unsigned flags;
    int recorded;       /* recorded at least once */
    struct sim_dep rec; /* the latest record: done when its stream completed it */
    uint64_t record_id; /* which record the timestamp belongs to */
    int64_t ts_ns;
    int ts_valid;
#else
    int64_t ts_ns;
    uint64_t record_id;
    struct sim_dep rec;
    int ts_valid, recorded, live;
    unsigned flags;
    uint32_t gen, index;
    uint64_t reserved;
#endif
};

static struct sim_event *events;
static uint32_t next_free_hint = 0;

int sim_events_init(void)
{
    events = bk_alloc(SIM_MAX_EVENTS * sizeof(*events));
    return events ? 0 : -1;
}

static struct sim_event *get(cudaEvent_t h)
{
    uint32_t gen;
    long i = sim_handle_decode(SIM_H_EVENT, (uint64_t)(uintptr_t)h, events, sizeof(*events),
                               SIM_MAX_EVENTS, &gen);
    if (i < 0 || !events[i].live || !sim_handle_gen_matches(gen, events[i].gen))
        return NULL;
    return &events[i];
}

void sim_event_record_done(uint32_t index, uint32_t gen, uint64_t record_id)
{
    int64_t now = sim_now_ns();
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = &events[index];
    if (e->live && e->gen == gen && e->record_id == record_id) {
        e->ts_ns = now;
        e->ts_valid = 1;
    }
    pthread_mutex_unlock(&sim_lock);
}

void sim_events_reset(void)
{
    for (uint32_t i = 0; i < SIM_MAX_EVENTS; i++)
        events[i].live = 0;
    next_free_hint = 0;
}

cudaError_t sim_cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    SIM_ENTER();
    unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if (!event || (flags & ~known) ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    uint32_t i = next_free_hint, tries = 0;
    while (tries < SIM_MAX_EVENTS && events[i].live) {
        i = (i + 1) % SIM_MAX_EVENTS;
        tries++;
    }
    if (tries == SIM_MAX_EVENTS) {
        pthread_mutex_unlock(&sim_lock);
        return sim_ret(cudaErrorMemoryAllocation);
    }
    next_free_hint = (i + 1) % SIM_MAX_EVENTS;
    struct sim_event *e = &events[i];
    uint32_t gen = e->gen + 1;
    memset(e, 0, sizeof(*e));
    e->index = i;
    e->gen = gen;
    e->flags = flags;
    e->live = 1;
    *event =
        (cudaEvent_t)(uintptr_t)sim_handle_encode(SIM_H_EVENT, events, sizeof(*events), i, gen);
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaEventCreate(cudaEvent_t *event)
{
    return sim_cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t sim_cudaEventDestroy(cudaEvent_t event)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(event);
    if (e)
        e->live = 0; /* a pending record finds the slot dead (or its generation changed) */
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

cudaError_t sim_cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(event);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t r = cudaErrorInvalidResourceHandle;
    if (e && s) {
        struct sim_op *op = sim_op_new(OP_RECORD);
        r = cudaErrorMemoryAllocation;
        if (op) {
            op->u.record.index = e->index;
            op->u.record.gen = e->gen;
            op->u.record.record_id = ++e->record_id;
            uint64_t seq = sim_stream_enqueue(s, op, NULL);
            if (seq == SIM_SEQ_CAPTURED) {
                r = cudaSuccess; /* a node of the capture: the event itself is unchanged */
            } else if (seq) {
                sim_stream_ident(s, &e->rec.index, &e->rec.gen);
                e->rec.seq = seq;
                e->recorded = 1;
                e->ts_valid = 0;
                r = cudaSuccess;
            }
        }
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(r);
}

cudaError_t sim_cudaEventQuery(cudaEvent_t event)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(event);
    cudaError_t r = cudaErrorInvalidResourceHandle;
    if (e)
        r = (!e->recorded || sim_dep_done(&e->rec)) ? cudaSuccess : cudaErrorNotReady;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(r);
}

cudaError_t sim_cudaEventSynchronize(cudaEvent_t event)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(event);
    if (e && e->recorded) {
        struct sim_dep d = e->rec;
        while (!sim_dep_done(&d))
            pthread_cond_wait(&sim_cv, &sim_lock);
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e ? sim_sticky() : cudaErrorInvalidResourceHandle);
}

cudaError_t sim_cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    SIM_ENTER();
    if (!ms)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_event *a = get(start), *b = get(end);
    cudaError_t r = cudaSuccess;
    if (!a || !b || !a->recorded || !b->recorded ||
        ((a->flags | b->flags) & cudaEventDisableTiming))
        r = cudaErrorInvalidResourceHandle;
    else if (!sim_dep_done(&a->rec) || !sim_dep_done(&b->rec) || !a->ts_valid || !b->ts_valid)
        r = cudaErrorNotReady;
    else
        *ms = (float)((double)(b->ts_ns - a->ts_ns) / 1e6);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(r);
}

cudaError_t sim_cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    SIM_ENTER();
    if (flags & ~1U) /* cudaEventWaitDefault, cudaEventWaitExternal */
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(event);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t r = cudaErrorInvalidResourceHandle;
    if (e && s) {
        r = cudaSuccess;
        if (sim_graph_event_join(e->index, e->gen, s)) {
            /* the event was recorded in a capture: s now captures into the same graph */
        } else if (e->recorded) {
            struct sim_op *op = sim_op_new(OP_WAIT);
            struct sim_dep d = e->rec;
            if (!op || !sim_stream_enqueue(s, op, &d))
                r = cudaErrorMemoryAllocation;
        }
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(r);
}

/* For checkpoints: when a completed record of h happened (CLOCK_MONOTONIC ns), or -1. */
int64_t sim_event_timestamp(cudaEvent_t h)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(h);
    int64_t ts = e && e->recorded && e->ts_valid && sim_dep_done(&e->rec) ? e->ts_ns : -1;
    pthread_mutex_unlock(&sim_lock);
    return ts;
}

/* For restarts: h (new) stands for an event recorded and completed at ts_ns before. */
cudaError_t sim_event_restore(cudaEvent_t h, int64_t ts_ns)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_event *e = get(h);
    if (e) {
        e->recorded = 1;
        e->rec = (struct sim_dep){0, 0, 0}; /* a dependency that is always done */
        e->record_id++;
        e->ts_ns = ts_ns;
        e->ts_valid = 1;
    }
    pthread_mutex_unlock(&sim_lock);
    return e ? cudaSuccess : cudaErrorInvalidResourceHandle;
}
