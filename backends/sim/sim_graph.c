/* sim_graph.c — CUDA graphs on the sim: a graph is its nodes in insertion order (each a chain of
 * stream operations); stream capture diverts a stream's operations into one; launching queues
 * copies of the operations on a stream. Graphs are exported/imported for checkpoints. */
#include "sim.h"

#include <string.h>

/* A graph runs its nodes one after another in the order they were added: every dependency a
 * program can declare points at an earlier node, so insertion order is a valid order (less
 * concurrent than a GPU, never wrong). */
struct sim_gnode {
    uint64_t id;      /* global: node handles are NODE_TAG | id and survive a restart */
    int type;         /* enum cudaGraphNodeType */
    uint32_t n_deps;  /* as declared (only counted: root nodes are those with none) */
    const void *func; /* kernel nodes: the host function */
    struct cudaMemsetParams mset;
    struct sim_op *ops; /* chained through op->next; NULL for an empty node */
};

struct sim_graph {
    uint32_t index, gen;
    int live, is_exec;
    unsigned long long flags;
    struct sim_gnode *nodes;
    uint32_t n, cap;
};

/* Capture state per stream slot (the stream struct itself is sim_stream.c's). */
struct capture {
    uint32_t stream_gen;
    uint32_t graph_index, graph_gen;
    int active;
    int mode;
};

/* Events recorded during a capture: a stream waiting on one joins that capture. */
struct captured_event {
    uint32_t gen, graph_index, graph_gen;
    int valid;
};

#define SIM_MAX_GRAPHS 4096
#define NODE_TAG (0x6e0dULL << 48)
#define GRAPH_MAGIC 0x3148504152474373ULL /* "sCGRAPH1" */

static struct sim_graph *graphs;
static struct capture *captures;
static struct captured_event *cevents;
static uint64_t next_node_id = 1;

/* Lazily, under sim_lock. */
static int ensure_tables(void)
{
    if (graphs)
        return 0;
    struct sim_graph *g = bk_alloc(SIM_MAX_GRAPHS * sizeof(*g));
    struct capture *c = bk_alloc(SIM_MAX_STREAMS * sizeof(*c));
    struct captured_event *e = bk_alloc(SIM_MAX_EVENTS * sizeof(*e));
    if (!g || !c || !e) {
        bk_free(g, SIM_MAX_GRAPHS * sizeof(*g));
        bk_free(c, SIM_MAX_STREAMS * sizeof(*c));
        bk_free(e, SIM_MAX_EVENTS * sizeof(*e));
        return -1;
    }
    graphs = g;
    captures = c;
    cevents = e;
    return 0;
}

static struct sim_graph *graph_get(const void *h, int exec)
{
    if (!graphs)
        return NULL;
    uint32_t gen;
    long i = sim_handle_decode(SIM_H_GRAPH, (uint64_t)(uintptr_t)h, graphs, sizeof(*graphs),
                               SIM_MAX_GRAPHS, &gen);
    if (i < 0 || !graphs[i].live || graphs[i].is_exec != exec ||
        !sim_handle_gen_matches(gen, graphs[i].gen))
        return NULL;
    return &graphs[i];
}

static struct sim_graph *graph_new(int exec)
{
    if (ensure_tables() != 0)
        return NULL;
    for (uint32_t i = 0; i < SIM_MAX_GRAPHS; i++) {
        struct sim_graph *g = &graphs[i];
        if (g->live)
            continue;
        uint32_t gen = g->gen + 1;
        memset(g, 0, sizeof(*g));
        g->index = i;
        g->gen = gen;
        g->live = 1;
        g->is_exec = exec;
        return g;
    }
    return NULL;
}

static uint64_t graph_handle(const struct sim_graph *g)
{
    return sim_handle_encode(SIM_H_GRAPH, graphs, sizeof(*graphs), g->index, g->gen);
}

static void free_chain(struct sim_op *op)
{
    while (op) {
        struct sim_op *next = op->next;
        sim_op_free(op);
        op = next;
    }
}

static void graph_free(struct sim_graph *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        free_chain(g->nodes[i].ops);
    bk_free(g->nodes, g->cap * sizeof(*g->nodes));
    g->nodes = NULL;
    g->n = g->cap = 0;
    g->live = 0;
}

/* A new node at the end of g (its ops still NULL), or NULL when out of memory. */
static struct sim_gnode *node_add(struct sim_graph *g, int type, uint32_t n_deps)
{
    if (g->n == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 16;
        struct sim_gnode *n = bk_alloc(cap * sizeof(*n));
        if (!n)
            return NULL;
        if (g->nodes)
            memcpy(n, g->nodes, g->n * sizeof(*n));
        bk_free(g->nodes, g->cap * sizeof(*n));
        g->nodes = n;
        g->cap = cap;
    }
    struct sim_gnode *nd = &g->nodes[g->n++];
    memset(nd, 0, sizeof(*nd));
    nd->id = next_node_id++;
    nd->type = type;
    nd->n_deps = n_deps;
    return nd;
}

static void chain_append(struct sim_gnode *nd, struct sim_op *op)
{
    op->next = NULL;
    struct sim_op **at = &nd->ops;
    while (*at)
        at = &(*at)->next;
    *at = op;
}

/* A fresh copy of op (no dependencies, its own argument buffer), or NULL. */
static struct sim_op *op_clone(const struct sim_op *src)
{
    struct sim_op *op = sim_op_new(src->type);
    if (!op)
        return NULL;
    op->u = src->u;
    if (src->type == OP_KERNEL) {
        const struct sim_kernel_launch *k = &src->u.kernel;
        op->u.kernel.argbuf = bk_alloc(k->argbuf_size);
        if (!op->u.kernel.argbuf) {
            op->type = OP_WAIT; /* nothing to free */
            sim_op_free(op);
            return NULL;
        }
        memcpy(op->u.kernel.argbuf, k->argbuf, k->argbuf_size);
        for (uint32_t i = 0; i < sim_kernel_n_params(k); i++)
            op->u.kernel.argv[i] = op->u.kernel.argbuf + ((unsigned char *)k->argv[i] - k->argbuf);
    }
    return op;
}

static int node_type_of(int op_type)
{
    switch (op_type) {
    case OP_KERNEL: return cudaGraphNodeTypeKernel;
    case OP_COPY: return cudaGraphNodeTypeMemcpy;
    case OP_SET: return cudaGraphNodeTypeMemset;
    case OP_HOSTFN: return cudaGraphNodeTypeHost;
    default: return cudaGraphNodeTypeEmpty;
    }
}

static struct capture *capture_of(const struct sim_stream *s)
{
    if (!captures)
        return NULL;
    uint32_t index, gen;
    sim_stream_ident(s, &index, &gen);
    struct capture *c = &captures[index];
    return c->active && c->stream_gen == gen ? c : NULL;
}

static struct sim_graph *capture_graph(const struct capture *c)
{
    struct sim_graph *g = &graphs[c->graph_index];
    return g->live && g->gen == c->graph_gen ? g : NULL;
}

int sim_graph_capture_op(struct sim_stream *s, struct sim_op *op)
{
    struct capture *c = capture_of(s);
    if (!c)
        return 0;
    struct sim_graph *g = capture_graph(c);
    if (!g)
        return -1;
    if (op->type == OP_RECORD) {
        /* Remember the event (a stream waiting on it joins this capture); replaying a record of
         * an event of this sim's is meaningless after a restart, so the node is empty. */
        struct captured_event *ce = &cevents[op->u.record.index];
        *ce = (struct captured_event){op->u.record.gen, c->graph_index, c->graph_gen, 1};
        op->type = OP_WAIT;
    }
    /* Dependencies are added after this hook: a captured op has none. */
    struct sim_gnode *nd = node_add(g, node_type_of(op->type), g->n ? 1 : 0);
    if (!nd)
        return -1;
    /* The node names its kernel by the host function (program code, kept by a restart): an
     * nvcc kernel's code in the kernels library is found again through it after a restart. */
    if (op->type == OP_KERNEL)
        nd->func = op->u.kernel.func;
    chain_append(nd, op);
    return 1;
}

int sim_graph_event_join(uint32_t ev_index, uint32_t ev_gen, struct sim_stream *s)
{
    if (!cevents || !cevents[ev_index].valid || cevents[ev_index].gen != ev_gen)
        return 0;
    struct captured_event *ce = &cevents[ev_index];
    struct sim_graph *g = &graphs[ce->graph_index];
    /* Only while that capture is still going on. */
    int going = 0;
    for (uint32_t i = 0; i < SIM_MAX_STREAMS && !going; i++)
        going = captures[i].active && captures[i].graph_index == ce->graph_index &&
                captures[i].graph_gen == ce->graph_gen;
    if (!going || !g->live || g->gen != ce->graph_gen) {
        ce->valid = 0;
        return 0;
    }
    if (capture_of(s))
        return 1; /* already capturing (into this graph or another: joined, not nested) */
    uint32_t index, gen;
    sim_stream_ident(s, &index, &gen);
    captures[index] = (struct capture){gen, ce->graph_index, ce->graph_gen, 1, 0};
    return 1;
}

void sim_graphs_reset(void)
{
    if (!graphs)
        return;
    for (uint32_t i = 0; i < SIM_MAX_GRAPHS; i++)
        if (graphs[i].live)
            graph_free(&graphs[i]);
    memset(captures, 0, SIM_MAX_STREAMS * sizeof(*captures));
    memset(cevents, 0, SIM_MAX_EVENTS * sizeof(*cevents));
}

/* ---- capture API ---- */

static int is_legacy(cudaStream_t s)
{
    return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

cudaError_t sim_cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    SIM_ENTER();
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return sim_ret(cudaErrorInvalidValue);
    if (is_legacy(stream))
        return sim_ret(cudaErrorStreamCaptureUnsupported);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t e = cudaSuccess;
    struct sim_graph *g = NULL;
    if (!s)
        e = cudaErrorInvalidResourceHandle;
    else if (ensure_tables() != 0)
        e = cudaErrorMemoryAllocation;
    else if (capture_of(s))
        e = cudaErrorIllegalState;
    else if (!(g = graph_new(0)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        uint32_t index, gen;
        sim_stream_ident(s, &index, &gen);
        captures[index] = (struct capture){gen, g->index, g->gen, 1, (int)mode};
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    SIM_ENTER();
    if (!pGraph)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = is_legacy(stream) ? NULL : sim_stream_get(stream);
    struct capture *c = s ? capture_of(s) : NULL;
    cudaError_t e = cudaSuccess;
    if (!is_legacy(stream) && !s)
        e = cudaErrorInvalidResourceHandle;
    else if (!c)
        e = cudaErrorIllegalState;
    if (e == cudaSuccess) {
        uint32_t gi = c->graph_index, gg = c->graph_gen;
        /* Ends the capture on every stream that joined it. */
        for (uint32_t i = 0; i < SIM_MAX_STREAMS; i++)
            if (captures[i].active && captures[i].graph_index == gi && captures[i].graph_gen == gg)
                captures[i].active = 0;
        struct sim_graph *g = &graphs[gi];
        if (!g->live || g->gen != gg)
            e = cudaErrorStreamCaptureInvalidated;
        else
            *pGraph = (cudaGraph_t)(uintptr_t)graph_handle(g);
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaStreamIsCapturing(cudaStream_t stream,
                                      enum cudaStreamCaptureStatus *pCaptureStatus)
{
    SIM_ENTER();
    if (!pCaptureStatus)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    if (s)
        *pCaptureStatus =
            capture_of(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(s ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

/* ---- graphs ---- */

cudaError_t sim_cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    SIM_ENTER();
    if (!pGraph || flags)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = graph_new(0);
    if (g)
        *pGraph = (cudaGraph_t)(uintptr_t)graph_handle(g);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(g ? cudaSuccess : cudaErrorMemoryAllocation);
}

static cudaError_t destroy(const void *h, int exec)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = graph_get(h, exec);
    if (g) {
        /* Work already queued from an executable graph holds copies: nothing to wait for. */
        graph_free(g);
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(g ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaGraphDestroy(cudaGraph_t graph) { return destroy(graph, 0); }

cudaError_t sim_cudaGraphExecDestroy(cudaGraphExec_t graphExec) { return destroy(graphExec, 1); }

/* Appends copies of src's nodes to dst (same node ids when keep_ids: instantiation). */
static cudaError_t copy_nodes(struct sim_graph *dst, const struct sim_graph *src, int keep_ids)
{
    for (uint32_t i = 0; i < src->n; i++) {
        const struct sim_gnode *sn = &src->nodes[i];
        struct sim_gnode *nd = node_add(dst, sn->type, sn->n_deps);
        if (!nd)
            return cudaErrorMemoryAllocation;
        if (keep_ids) {
            nd->id = sn->id;
            next_node_id--;
        }
        nd->func = sn->func;
        nd->mset = sn->mset;
        for (const struct sim_op *op = sn->ops; op; op = op->next) {
            struct sim_op *c = op_clone(op);
            if (!c)
                return cudaErrorMemoryAllocation;
            chain_append(nd, c);
        }
    }
    return cudaSuccess;
}

static cudaError_t derive(void **out, const void *from, int exec, unsigned long long flags)
{
    SIM_ENTER();
    if (!out)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_graph *src = graph_get(from, 0);
    struct sim_graph *g = NULL;
    cudaError_t e = cudaSuccess;
    if (!src)
        e = cudaErrorInvalidValue;
    else if (!(g = graph_new(exec)))
        e = cudaErrorMemoryAllocation;
    else if ((e = copy_nodes(g, src, exec)) != cudaSuccess)
        graph_free(g);
    if (e == cudaSuccess) {
        g->flags = flags;
        *out = (void *)(uintptr_t)graph_handle(g);
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph)
{
    return derive((void **)pGraphClone, originalGraph, 0, 0);
}

static const unsigned long long known_instantiate_flags =
    cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
    cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;

cudaError_t sim_cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                     unsigned long long flags)
{
    if (flags & ~known_instantiate_flags)
        return sim_ret(cudaErrorInvalidValue);
    return derive((void **)pGraphExec, graph, 1, flags);
}

cudaError_t sim_cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                              unsigned long long flags)
{
    return sim_cudaGraphInstantiate(pGraphExec, graph, flags);
}

cudaError_t sim_cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long *flags)
{
    SIM_ENTER();
    if (!flags)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_graph *g = graph_get(graphExec, 1);
    if (g)
        *flags = g->flags;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(g ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    const struct sim_graph *g = graph_get(graphExec, 1);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t e = !g ? cudaErrorInvalidValue : !s ? cudaErrorInvalidResourceHandle : cudaSuccess;
    for (uint32_t i = 0; e == cudaSuccess && i < g->n; i++)
        for (const struct sim_op *op = g->nodes[i].ops; op && e == cudaSuccess; op = op->next) {
            struct sim_op *c = op_clone(op);
            if (!c || !sim_stream_enqueue(s, c, NULL))
                e = cudaErrorMemoryAllocation;
        }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    int ok = graph_get(graphExec, 1) != NULL;
    struct sim_stream *s = sim_stream_get(stream);
    pthread_mutex_unlock(&sim_lock);
    /* Nothing to upload: the sim's "device" is this process. */
    return sim_ret(!ok ? cudaErrorInvalidValue : !s ? cudaErrorInvalidResourceHandle : cudaSuccess);
}

/* ---- explicit construction ---- */

static uint64_t node_handle(const struct sim_gnode *nd) { return NODE_TAG | nd->id; }

/* Common start of every cudaGraphAdd*Node: the graph (sim_lock taken) or an error (not). */
static cudaError_t add_begin(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                             const cudaGraphNode_t *deps, size_t n_deps, struct sim_graph **g)
{
    if (!pGraphNode || (n_deps && !deps))
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&sim_lock);
    *g = graph_get(graph, 0);
    if (!*g) {
        pthread_mutex_unlock(&sim_lock);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

static cudaError_t add_end(struct sim_graph *g, struct sim_gnode *nd, cudaGraphNode_t *out,
                           cudaError_t e)
{
    (void)g;
    if (e == cudaSuccess && nd)
        *out = (cudaGraphNode_t)(uintptr_t)node_handle(nd);
    else if (nd)
        g->n--; /* the failed node was the last one added */
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphAddEmptyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                      const cudaGraphNode_t *pDependencies, size_t numDependencies)
{
    SIM_ENTER();
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    struct sim_gnode *nd = node_add(g, cudaGraphNodeTypeEmpty, (uint32_t)numDependencies);
    return add_end(g, nd, pGraphNode, nd ? cudaSuccess : cudaErrorMemoryAllocation);
}

/* A kernel operation for params (the arguments copied, as at a launch), or an error. */
static cudaError_t kernel_op(const struct cudaKernelNodeParams *p, struct sim_op **out)
{
    const struct crac_sim_kernel_desc *d = NULL;
    const struct crac_kernel_entry *ke = NULL;
    cudaError_t e = sim_kernel_code(p->func, &d, &ke);
    if (e != cudaSuccess)
        return e;
    struct sim_op *op = sim_op_new(OP_KERNEL);
    if (!op)
        return cudaErrorMemoryAllocation;
    struct sim_kernel_launch *k = &op->u.kernel;
    k->desc = d;
    k->kentry = ke;
    k->func = p->func;
    if ((sim_kernel_n_params(k) && !p->kernelParams) || p->extra) {
        op->type = OP_WAIT; /* nothing to free */
        sim_op_free(op);
        return cudaErrorInvalidValue;
    }
    if (sim_kernel_copy_args(k, p->kernelParams) != 0) {
        op->type = OP_WAIT;
        sim_op_free(op);
        return cudaErrorMemoryAllocation;
    }
    k->grid = p->gridDim;
    k->block = p->blockDim;
    k->shared = p->sharedMemBytes;
    *out = op;
    return cudaSuccess;
}

cudaError_t sim_cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                       const struct cudaKernelNodeParams *pNodeParams)
{
    SIM_ENTER();
    if (!pNodeParams)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    struct sim_op *op = NULL;
    struct sim_gnode *nd = NULL;
    e = kernel_op(pNodeParams, &op);
    if (e == cudaSuccess && !(nd = node_add(g, cudaGraphNodeTypeKernel, (uint32_t)numDependencies)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        nd->func = pNodeParams->func;
        chain_append(nd, op);
    } else if (op) {
        sim_op_free(op);
    }
    return add_end(g, nd, pGraphNode, e);
}

/* Device side of a copy or set inside one device or managed allocation (sim_lock held). */
static int in_device(const void *p, size_t n)
{
    struct sim_alloc a;
    return sim_mem_find((uint64_t)(uintptr_t)p, n, &a) && a.kind != SIM_MEM_PINNED;
}

cudaError_t sim_cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                         const cudaGraphNode_t *pDependencies,
                                         size_t numDependencies, void *dst, const void *src,
                                         size_t count, enum cudaMemcpyKind kind)
{
    SIM_ENTER();
    if (!dst || !src || (unsigned)kind > cudaMemcpyDefault)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    int want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((want_dst && !in_device(dst, count)) || (want_src && !in_device(src, count)))
        e = cudaErrorInvalidValue;
    struct sim_gnode *nd = NULL;
    struct sim_op *op = NULL;
    if (e == cudaSuccess &&
        (!(op = sim_op_new(OP_COPY)) ||
         !(nd = node_add(g, cudaGraphNodeTypeMemcpy, (uint32_t)numDependencies))))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        op->u.copy.dst = dst;
        op->u.copy.src = src;
        op->u.copy.n = count;
        chain_append(nd, op);
    } else if (op) {
        sim_op_free(op);
    }
    return add_end(g, nd, pGraphNode, e);
}

cudaError_t sim_cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                       const struct cudaMemsetParams *p)
{
    SIM_ENTER();
    if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) ||
        !p->height)
        return sim_ret(cudaErrorInvalidValue);
    /* Operations set bytes: a 2- or 4-byte pattern is supported when all its bytes are equal
     * (0 or -1, what programs clear memory with). */
    unsigned char b = (unsigned char)p->value;
    for (unsigned i = 1; i < p->elementSize; i++)
        if ((unsigned char)(p->value >> (8 * i)) != b)
            return sim_ret(cudaErrorNotSupported);
    size_t row = p->width * p->elementSize;
    size_t pitch = p->height > 1 ? p->pitch : row;
    if (p->height > 1 && pitch < row)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    if (!in_device(p->dst, pitch * (p->height - 1) + row))
        e = cudaErrorInvalidValue;
    struct sim_gnode *nd = NULL;
    if (e == cudaSuccess && !(nd = node_add(g, cudaGraphNodeTypeMemset, (uint32_t)numDependencies)))
        e = cudaErrorMemoryAllocation;
    for (size_t r = 0; e == cudaSuccess && r < p->height; r++) {
        struct sim_op *op = sim_op_new(OP_SET);
        if (!op) {
            e = cudaErrorMemoryAllocation;
            break;
        }
        op->u.set.dst = (unsigned char *)p->dst + r * pitch;
        op->u.set.value = b;
        op->u.set.n = row;
        chain_append(nd, op);
    }
    if (e == cudaSuccess)
        nd->mset = *p;
    else if (nd)
        free_chain(nd->ops);
    return add_end(g, nd, pGraphNode, e);
}

cudaError_t sim_cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                     const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                     const struct cudaHostNodeParams *pNodeParams)
{
    SIM_ENTER();
    if (!pNodeParams || !pNodeParams->fn)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    struct sim_gnode *nd = NULL;
    struct sim_op *op = NULL;
    if (!(op = sim_op_new(OP_HOSTFN)) ||
        !(nd = node_add(g, cudaGraphNodeTypeHost, (uint32_t)numDependencies)))
        e = cudaErrorMemoryAllocation;
    if (e == cudaSuccess) {
        op->u.hostfn.fn = pNodeParams->fn;
        op->u.hostfn.data = pNodeParams->userData;
        chain_append(nd, op);
    } else if (op) {
        sim_op_free(op);
    }
    return add_end(g, nd, pGraphNode, e);
}

/* The child's nodes are copied in (in order) behind one node of type cudaGraphNodeTypeGraph
 * that stands for them. */
cudaError_t sim_cudaGraphAddChildGraphNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                           const cudaGraphNode_t *pDependencies,
                                           size_t numDependencies, cudaGraph_t childGraph)
{
    SIM_ENTER();
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    const struct sim_graph *child = graph_get(childGraph, 0);
    struct sim_gnode *nd = NULL;
    if (!child || child == g)
        e = cudaErrorInvalidValue;
    else if (!(nd = node_add(g, cudaGraphNodeTypeGraph, (uint32_t)numDependencies)))
        e = cudaErrorMemoryAllocation;
    for (uint32_t i = 0; e == cudaSuccess && i < child->n; i++)
        for (const struct sim_op *op = child->nodes[i].ops; op; op = op->next) {
            struct sim_op *c = op_clone(op);
            if (!c) {
                e = cudaErrorMemoryAllocation;
                break;
            }
            chain_append(nd, c);
        }
    if (e != cudaSuccess && nd)
        free_chain(nd->ops);
    return add_end(g, nd, pGraphNode, e);
}

/* ---- queries ---- */

static cudaError_t list_nodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *num, int roots)
{
    SIM_ENTER();
    if (!num)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_graph *g = graph_get(graph, 0);
    size_t k = 0;
    if (g) {
        for (uint32_t i = 0; i < g->n; i++) {
            if (roots && g->nodes[i].n_deps)
                continue;
            if (nodes && k < *num)
                nodes[k] = (cudaGraphNode_t)(uintptr_t)node_handle(&g->nodes[i]);
            k++;
        }
        if (!nodes || k < *num)
            *num = k;
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(g ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    return list_nodes(graph, nodes, numNodes, 0);
}

cudaError_t sim_cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes,
                                      size_t *pNumRootNodes)
{
    return list_nodes(graph, pRootNodes, pNumRootNodes, 1);
}

/* The node a handle names, in a (non-executable) graph; sim_lock held. */
static const struct sim_gnode *node_find(cudaGraphNode_t node)
{
    uint64_t h = (uint64_t)(uintptr_t)node;
    if (!graphs || (h & ~0xffffffffffffULL) != NODE_TAG)
        return NULL;
    uint64_t id = h & 0xffffffffffffULL;
    for (uint32_t i = 0; i < SIM_MAX_GRAPHS; i++) {
        const struct sim_graph *g = &graphs[i];
        if (!g->live || g->is_exec)
            continue;
        for (uint32_t k = 0; k < g->n; k++)
            if (g->nodes[k].id == id)
                return &g->nodes[k];
    }
    return NULL;
}

cudaError_t sim_cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
    SIM_ENTER();
    if (!pType)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_gnode *nd = node_find(node);
    if (nd)
        *pType = (enum cudaGraphNodeType)nd->type;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(nd ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                             struct cudaKernelNodeParams *pNodeParams)
{
    SIM_ENTER();
    if (!pNodeParams)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_gnode *nd = node_find(node);
    int ok = nd && nd->type == cudaGraphNodeTypeKernel && nd->ops;
    if (ok) {
        const struct sim_kernel_launch *k = &nd->ops->u.kernel;
        /* kernelParams points at the node's own copy, valid while the node lives. */
        *pNodeParams = (struct cudaKernelNodeParams){
            (void *)nd->func, k->grid, k->block, (unsigned)k->shared, (void **)k->argv, NULL};
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(ok ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaGraphMemsetNodeGetParams(cudaGraphNode_t node,
                                             struct cudaMemsetParams *pNodeParams)
{
    SIM_ENTER();
    if (!pNodeParams)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    const struct sim_gnode *nd = node_find(node);
    int ok = nd && nd->type == cudaGraphNodeTypeMemset;
    if (ok)
        *pNodeParams = nd->mset;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(ok ? cudaSuccess : cudaErrorInvalidValue);
}

/* ---- checkpoint and restart ----
 * A graph as bytes: header, then per node its fields and its operations. Pointers in it (device
 * addresses, kernel descriptors and host functions of the program, shim trampolines) are upper
 * or device memory, which a restart puts back at the same addresses. */
struct blob_header {
    uint64_t magic, len;
    uint32_t n_nodes, is_exec;
    unsigned long long flags;
};

struct blob_node {
    uint64_t id;
    int32_t type;
    uint32_t n_deps, n_ops, pad;
    const void *func;
    struct cudaMemsetParams mset;
};

struct blob_op {
    int32_t type;
    uint32_t argbuf_size;
    union {
        struct {
            void *dst;
            const void *src;
            size_t n;
        } copy;
        struct {
            void *dst;
            int value;
            size_t n;
        } set;
        struct {
            const struct crac_sim_kernel_desc *desc; /* NULL: a kernels library's kernel */
            const void *func;                        /* its host function (found again by it) */
            dim3 grid, block;
            size_t shared;
            uint32_t argv_off[32]; /* sim_kernel_launch's argv */
        } kernel;
        struct {
            cudaHostFn_t fn;
            void *data;
        } hostfn;
    } u;
};

static uint64_t pad8(uint64_t n) { return (n + 7) & ~7ULL; }

struct writer {
    unsigned char *buf;
    uint64_t cap, len;
};

static void put(struct writer *w, const void *p, uint64_t n)
{
    if (w->len + n <= w->cap)
        memcpy(w->buf + w->len, p, n);
    w->len += pad8(n);
}

/* Writes the graph into buf if it fits; returns the size it needs (0: no such graph). */
uint64_t sim_graph_export(uint64_t handle, void *buf, uint64_t cap)
{
    pthread_mutex_lock(&sim_lock);
    const struct sim_graph *g = graph_get((const void *)(uintptr_t)handle, 0);
    if (!g)
        g = graph_get((const void *)(uintptr_t)handle, 1);
    uint64_t need = 0;
    if (g) {
        struct writer w = {buf, cap, 0};
        struct blob_header h = {GRAPH_MAGIC, 0, g->n, (uint32_t)g->is_exec, g->flags};
        put(&w, &h, sizeof(h));
        for (uint32_t i = 0; i < g->n; i++) {
            const struct sim_gnode *nd = &g->nodes[i];
            struct blob_node bn = {nd->id, nd->type, nd->n_deps, 0, 0, nd->func, nd->mset};
            for (const struct sim_op *op = nd->ops; op; op = op->next)
                bn.n_ops++;
            put(&w, &bn, sizeof(bn));
            for (const struct sim_op *op = nd->ops; op; op = op->next) {
                struct blob_op bo;
                memset(&bo, 0, sizeof(bo));
                bo.type = op->type;
                if (op->type == OP_COPY) {
                    bo.u.copy.dst = op->u.copy.dst;
                    bo.u.copy.src = op->u.copy.src;
                    bo.u.copy.n = op->u.copy.n;
                } else if (op->type == OP_SET) {
                    bo.u.set.dst = op->u.set.dst;
                    bo.u.set.value = op->u.set.value;
                    bo.u.set.n = op->u.set.n;
                } else if (op->type == OP_HOSTFN) {
                    bo.u.hostfn.fn = op->u.hostfn.fn;
                    bo.u.hostfn.data = op->u.hostfn.data;
                } else if (op->type == OP_KERNEL) {
                    const struct sim_kernel_launch *k = &op->u.kernel;
                    bo.argbuf_size = (uint32_t)k->argbuf_size;
                    bo.u.kernel.desc = k->desc;
                    bo.u.kernel.func = k->func;
                    bo.u.kernel.grid = k->grid;
                    bo.u.kernel.block = k->block;
                    bo.u.kernel.shared = k->shared;
                    for (uint32_t a = 0; a < sim_kernel_n_params(k); a++)
                        bo.u.kernel.argv_off[a] =
                            (uint32_t)((unsigned char *)k->argv[a] - k->argbuf);
                }
                put(&w, &bo, sizeof(bo));
                if (op->type == OP_KERNEL)
                    put(&w, op->u.kernel.argbuf, op->u.kernel.argbuf_size);
            }
        }
        need = w.len;
        if (need <= cap)
            ((struct blob_header *)buf)->len = need;
    }
    pthread_mutex_unlock(&sim_lock);
    return need;
}

struct reader {
    const unsigned char *buf;
    uint64_t len, at;
};

static const void *take(struct reader *r, uint64_t n)
{
    if (r->at + n > r->len)
        return NULL;
    const void *p = r->buf + r->at;
    r->at += pad8(n);
    return p;
}

/* A new graph (or executable graph) from an exported one, with the same node ids: its handle,
 * or 0. */
uint64_t sim_graph_import(const void *buf, uint64_t len)
{
    struct reader r = {buf, len, 0};
    const struct blob_header *h = take(&r, sizeof(*h));
    if (!h || h->magic != GRAPH_MAGIC || h->len != len)
        return 0;
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = graph_new((int)h->is_exec);
    int bad = !g;
    if (g)
        g->flags = h->flags;
    for (uint32_t i = 0; !bad && i < h->n_nodes; i++) {
        const struct blob_node *bn = take(&r, sizeof(*bn));
        struct sim_gnode *nd = bn ? node_add(g, bn->type, bn->n_deps) : NULL;
        if (!nd) {
            bad = 1;
            break;
        }
        next_node_id--;
        nd->id = bn->id;
        if (bn->id >= next_node_id)
            next_node_id = bn->id + 1;
        nd->func = bn->func;
        nd->mset = bn->mset;
        for (uint32_t k = 0; !bad && k < bn->n_ops; k++) {
            const struct blob_op *bo = take(&r, sizeof(*bo));
            struct sim_op *op = bo ? sim_op_new(OP_WAIT) : NULL;
            if (!op) {
                bad = 1;
                break;
            }
            if (bo->type == OP_COPY) {
                op->u.copy.dst = bo->u.copy.dst;
                op->u.copy.src = bo->u.copy.src;
                op->u.copy.n = bo->u.copy.n;
            } else if (bo->type == OP_SET) {
                op->u.set.dst = bo->u.set.dst;
                op->u.set.value = bo->u.set.value;
                op->u.set.n = bo->u.set.n;
            } else if (bo->type == OP_HOSTFN) {
                op->u.hostfn.fn = bo->u.hostfn.fn;
                op->u.hostfn.data = bo->u.hostfn.data;
            } else if (bo->type == OP_KERNEL) {
                struct sim_kernel_launch *kl = &op->u.kernel;
                const unsigned char *args = take(&r, bo->argbuf_size);
                kl->argbuf = args ? bk_alloc(bo->argbuf_size) : NULL;
                if (!kl->argbuf) {
                    sim_op_free(op);
                    bad = 1;
                    break;
                }
                memcpy(kl->argbuf, args, bo->argbuf_size);
                kl->argbuf_size = bo->argbuf_size;
                kl->desc = bo->u.kernel.desc;
                kl->func = bo->u.kernel.func;
                /* An nvcc kernel: its code is in this lower half's kernels library, found by
                 * the host function the restored module registered again (shim_state.c runs
                 * before the graphs are imported). */
                if (!kl->desc && sim_kernel_code(kl->func, &kl->desc, &kl->kentry) != cudaSuccess) {
                    op->type = OP_KERNEL; /* frees the argument copy */
                    sim_op_free(op);
                    bad = 1;
                    break;
                }
                kl->grid = bo->u.kernel.grid;
                kl->block = bo->u.kernel.block;
                kl->shared = bo->u.kernel.shared;
                for (uint32_t a = 0; a < sim_kernel_n_params(kl); a++)
                    kl->argv[a] = kl->argbuf + bo->u.kernel.argv_off[a];
            }
            op->type = bo->type;
            chain_append(nd, op);
        }
    }
    uint64_t handle = 0;
    if (bad && g)
        graph_free(g);
    else if (g)
        handle = graph_handle(g);
    pthread_mutex_unlock(&sim_lock);
    return handle;
}

/* ---- changing graphs after they were built ---- */

/* The node a handle names in graph g, or NULL (sim_lock held). */
static struct sim_gnode *node_in(struct sim_graph *g, cudaGraphNode_t node, uint32_t *at)
{
    uint64_t h = (uint64_t)(uintptr_t)node;
    if ((h & ~0xffffffffffffULL) != NODE_TAG)
        return NULL;
    for (uint32_t k = 0; k < g->n; k++)
        if (g->nodes[k].id == (h & 0xffffffffffffULL)) {
            if (at)
                *at = k;
            return &g->nodes[k];
        }
    return NULL;
}

/* Nodes run in insertion order, so an edge is accepted when it points forward (every edge a
 * program can add between nodes it added in dependency order does). */
cudaError_t sim_cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                         const cudaGraphNode_t *to,
                                         const cudaGraphEdgeData *edgeData, size_t numDependencies)
{
    SIM_ENTER();
    if (numDependencies && (!from || !to))
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *g = graph_get(graph, 0);
    cudaError_t e = g ? cudaSuccess : cudaErrorInvalidValue;
    for (size_t i = 0; e == cudaSuccess && i < numDependencies; i++) {
        uint32_t a, b;
        if (edgeData && edgeData[i].type != cudaGraphDependencyTypeDefault)
            e = cudaErrorNotSupported;
        else if (!node_in(g, from[i], &a) || !node_in(g, to[i], &b) || a == b)
            e = cudaErrorInvalidValue;
        else if (a > b)
            e = cudaErrorNotSupported; /* would need reordering: documented limitation */
    }
    for (size_t i = 0; e == cudaSuccess && i < numDependencies; i++)
        node_in(g, to[i], NULL)->n_deps++;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphDestroyNode(cudaGraphNode_t node)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    cudaError_t e = cudaErrorInvalidValue;
    for (uint32_t i = 0; graphs && i < SIM_MAX_GRAPHS && e != cudaSuccess; i++) {
        struct sim_graph *g = &graphs[i];
        uint32_t at;
        if (!g->live || g->is_exec || !node_in(g, node, &at))
            continue;
        free_chain(g->nodes[at].ops);
        memmove(&g->nodes[at], &g->nodes[at + 1], (g->n - at - 1) * sizeof(g->nodes[0]));
        g->n--;
        e = cudaSuccess;
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

/* Replaces a kernel node's launch (the same node in a graph, or its copy in an executable one). */
static cudaError_t set_kernel(struct sim_graph *g, cudaGraphNode_t node,
                              const struct cudaKernelNodeParams *p)
{
    struct sim_gnode *nd = g ? node_in(g, node, NULL) : NULL;
    if (!nd || nd->type != cudaGraphNodeTypeKernel || !p)
        return cudaErrorInvalidValue;
    struct sim_op *op = NULL;
    cudaError_t e = kernel_op(p, &op);
    if (e != cudaSuccess)
        return e;
    free_chain(nd->ops);
    nd->ops = NULL;
    chain_append(nd, op);
    nd->func = p->func;
    return cudaSuccess;
}

cudaError_t sim_cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                             const struct cudaKernelNodeParams *pNodeParams)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    cudaError_t e = cudaErrorInvalidValue;
    for (uint32_t i = 0; graphs && i < SIM_MAX_GRAPHS && e == cudaErrorInvalidValue; i++)
        if (graphs[i].live && !graphs[i].is_exec && node_in(&graphs[i], node, NULL))
            e = set_kernel(&graphs[i], node, pNodeParams);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
                                                 const struct cudaKernelNodeParams *pNodeParams)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    cudaError_t e = set_kernel(graph_get(hGraphExec, 1), node, pNodeParams);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

/* The executable graph takes the graph's node parameters when both have the same nodes (same
 * count and types, in order), as CUDA's whole-graph update. */
cudaError_t sim_cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                    cudaGraphExecUpdateResultInfo *resultInfo)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    struct sim_graph *x = graph_get(hGraphExec, 1);
    const struct sim_graph *g = graph_get(hGraph, 0);
    cudaError_t e = x && g ? cudaSuccess : cudaErrorInvalidValue;
    enum cudaGraphExecUpdateResult res = cudaGraphExecUpdateSuccess;
    if (e == cudaSuccess && x->n != g->n)
        res = cudaGraphExecUpdateErrorTopologyChanged;
    for (uint32_t i = 0; e == cudaSuccess && res == cudaGraphExecUpdateSuccess && i < g->n; i++)
        if (x->nodes[i].type != g->nodes[i].type)
            res = cudaGraphExecUpdateErrorNodeTypeChanged;
    struct sim_graph fresh = {0};
    if (e == cudaSuccess && res == cudaGraphExecUpdateSuccess) {
        fresh.live = 1;
        e = copy_nodes(&fresh, g, 1);
        if (e == cudaSuccess) {
            for (uint32_t i = 0; i < x->n; i++)
                free_chain(x->nodes[i].ops);
            bk_free(x->nodes, x->cap * sizeof(*x->nodes));
            x->nodes = fresh.nodes;
            x->n = fresh.n;
            x->cap = fresh.cap;
        } else {
            graph_free(&fresh);
        }
    }
    if (e == cudaSuccess && res != cudaGraphExecUpdateSuccess)
        e = cudaErrorGraphExecUpdateFailure;
    if (resultInfo && (x && g)) {
        memset(resultInfo, 0, sizeof(*resultInfo));
        resultInfo->result = res;
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                               cudaGraphInstantiateParams *instantiateParams)
{
    if (!instantiateParams)
        return sim_ret(cudaErrorInvalidValue);
    cudaError_t e = sim_cudaGraphInstantiate(pGraphExec, graph, instantiateParams->flags);
    instantiateParams->errNode_out = NULL;
    instantiateParams->result_out =
        e == cudaSuccess ? cudaGraphInstantiateSuccess : cudaGraphInstantiateError;
    return e;
}

/* A 3D copy between linear memory, as one copy operation per row. */
cudaError_t sim_cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                       const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                       const struct cudaMemcpy3DParms *p)
{
    SIM_ENTER();
    if (!p)
        return sim_ret(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return sim_ret(cudaErrorNotSupported);
    const struct cudaExtent *x = &p->extent;
    if (!p->srcPtr.ptr || !p->dstPtr.ptr || x->width > p->srcPtr.pitch ||
        x->width > p->dstPtr.pitch || (unsigned)p->kind > cudaMemcpyDefault)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_graph *g;
    cudaError_t e = add_begin(pGraphNode, graph, pDependencies, numDependencies, &g);
    if (e != cudaSuccess)
        return sim_ret(e);
    struct sim_gnode *nd = node_add(g, cudaGraphNodeTypeMemcpy, (uint32_t)numDependencies);
    if (!nd)
        e = cudaErrorMemoryAllocation;
    size_t s_slice = p->srcPtr.pitch * (p->srcPtr.ysize ? p->srcPtr.ysize : x->height);
    size_t d_slice = p->dstPtr.pitch * (p->dstPtr.ysize ? p->dstPtr.ysize : x->height);
    int want_dst = p->kind == cudaMemcpyHostToDevice || p->kind == cudaMemcpyDeviceToDevice;
    int want_src = p->kind == cudaMemcpyDeviceToHost || p->kind == cudaMemcpyDeviceToDevice;
    for (size_t z = 0; e == cudaSuccess && z < x->depth; z++)
        for (size_t y = 0; e == cudaSuccess && y < x->height; y++) {
            const char *src = (const char *)p->srcPtr.ptr + (p->srcPos.z + z) * s_slice +
                              (p->srcPos.y + y) * p->srcPtr.pitch + p->srcPos.x;
            char *dst = (char *)p->dstPtr.ptr + (p->dstPos.z + z) * d_slice +
                        (p->dstPos.y + y) * p->dstPtr.pitch + p->dstPos.x;
            if ((want_dst && !in_device(dst, x->width)) ||
                (want_src && !in_device(src, x->width))) {
                e = cudaErrorInvalidValue;
                break;
            }
            struct sim_op *op = sim_op_new(OP_COPY);
            if (!op) {
                e = cudaErrorMemoryAllocation;
                break;
            }
            op->u.copy.dst = dst;
            op->u.copy.src = src;
            op->u.copy.n = x->width;
            chain_append(nd, op);
        }
    if (e != cudaSuccess && nd)
        free_chain(nd->ops);
    return add_end(g, nd, pGraphNode, e);
}
