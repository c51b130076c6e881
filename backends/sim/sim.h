/* sim.h — internals of crac's simulated CUDA device, shared by its files. The sim is built as the
 * lower-half backends libcrac-sim1.so / libcrac-sim2.so and as the native libcudart.so.13. */
#ifndef CRAC_SIM_INTERNAL_H
#define CRAC_SIM_INTERNAL_H

#include <cuda_runtime_api.h>

#include "crac_sim.h"
#include "cudart_sim_api.h" /* generated: the sim_cudaXxx prototypes */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if !defined(CRAC_SIM_VERSION) || (CRAC_SIM_VERSION != 1 && CRAC_SIM_VERSION != 2)
#error "build the sim with -DCRAC_SIM_VERSION=1 or 2"
#endif

/* ---- what differs between sim versions, as between driver releases ---- */
#if CRAC_SIM_VERSION == 1
#define SIM_DRIVER_VERSION 13000
#define SIM_DEVICE_NAME "crac sim device (sim1, driver 13.0)"
#else
#define SIM_DRIVER_VERSION 13010
#define SIM_DEVICE_NAME "crac sim device (sim2, driver 13.1)"
#endif

#define SIM_MAX_STREAMS 1024 /* slot 0 is the legacy default stream */
#define SIM_MAX_EVENTS 65536
#define SIM_MAX_MODULES 4096
#define SIM_DEFAULT_MEMORY (16ULL << 30)
#define SIM_PAGE 4096UL

/* ---- bookkeeping memory (sim_bk.c): v1 on the lower heap, v2 in a private arena ---- */
void *bk_alloc(size_t n); /* zeroed; NULL when out of memory */
void bk_free(void *p, size_t n);

/* ---- device state and errors (sim_core.c) ---- */
struct sim_host {
    uint64_t window_start, window_end; /* where device addresses may be (D under crac) */
    void (*register_thread)(pid_t tid);
    void (*unregister_thread)(pid_t tid);
};

extern struct sim_host sim_host;
extern pthread_mutex_t sim_lock; /* streams, events, queues, modules, allocations */
extern pthread_cond_t sim_cv;    /* broadcast on every change a waiter may wait for */

int sim_init(const struct sim_host *host); /* 0 or -errno; idempotent */
int sim_mem_init(void);
int sim_streams_init(void);
int sim_events_init(void);
int sim_modules_init(void);
/* Entry check of every API call: the sticky error, or cudaSuccess. */
cudaError_t sim_sticky(void);
void sim_set_sticky(cudaError_t e);
/* Return e, recording it as this thread's last error (not cudaSuccess / cudaErrorNotReady). */
cudaError_t sim_ret(cudaError_t e);
/* Address of this thread's last-error variable (a lower __thread under crac): debug entry. */
void *sim_last_error_slot(void);
/* First statement of every call that reports the sticky error: return it (recorded). */
#define SIM_ENTER()                                                                                \
    do {                                                                                           \
        cudaError_t s_ = sim_sticky();                                                             \
        if (s_ != cudaSuccess)                                                                     \
            return sim_ret(s_);                                                                    \
    } while (0)

/* ---- memory (sim_mem.c) ---- */
enum sim_mem_kind { SIM_MEM_DEVICE = 1, SIM_MEM_MANAGED = 2, SIM_MEM_PINNED = 3 };

struct sim_alloc {
    uint64_t start, size;
    int kind;
};

/* Map [addr, addr+size) read-write inside the window and record it; cudaError_t. */
cudaError_t sim_mem_map(uint64_t addr, size_t size, int kind);
/* Forget the allocation starting at addr and map PROT_NONE back over it; *size_out its size. */
cudaError_t sim_mem_unmap(uint64_t addr, int kind, size_t *size_out);
/* Record/forget upper-half pinned memory (mapped by the caller, not by the sim). */
cudaError_t sim_mem_register_pinned(uint64_t addr, size_t size);
cudaError_t sim_mem_unregister_pinned(uint64_t addr, size_t *size_out);
/* The allocation containing [p, p+n), or 0 (copied to *out). Caller holds sim_lock. */
int sim_mem_find(uint64_t p, uint64_t n, struct sim_alloc *out);
/* Drop every allocation (cudaDeviceReset); device/managed ranges are mapped PROT_NONE. */
void sim_mem_reset(void);
uint64_t sim_mem_total(void);
uint64_t sim_mem_used(void);

/* ---- streams and the work they run (sim_stream.c) ---- */
enum sim_op_type { OP_COPY, OP_SET, OP_KERNEL, OP_RECORD, OP_HOSTFN, OP_WAIT };

struct sim_dep {
    uint32_t index, gen; /* stream slot and its generation */
    uint64_t seq;        /* done when that stream completed op number seq */
};

#define SIM_INLINE_DEPS 4

struct crac_kernel_entry;

struct sim_kernel_launch {
    const struct crac_sim_kernel_desc *desc; /* a CRAC_SIM_KERNEL kernel, or NULL */
    const struct crac_kernel_entry *kentry;  /* a kernel from a kernels library, or NULL */
    const void *func;                        /* the host function launched (graphs name it) */
    dim3 grid, block;
    size_t shared;
    void *argv[32]; /* max(CRAC_SIM_MAX_PARAMS, CRAC_KERNEL_MAX_PARAMS) */
    unsigned char *argbuf;
    size_t argbuf_size;
};

struct sim_op {
    struct sim_op *next;
    int type;
    uint64_t seq;
    uint32_t n_deps;
    struct sim_dep deps_inline[SIM_INLINE_DEPS];
    struct sim_dep *deps; /* deps_inline or bk memory */
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
        struct sim_kernel_launch kernel;
        struct {
            uint32_t index, gen;
            uint64_t record_id;
        } record;
        struct {
            cudaHostFn_t fn;
            void *data;
        } hostfn;
    } u;
};

struct sim_stream;

struct sim_op *sim_op_new(int type);
/* Decode a handle (NULL / legacy / per-thread: the legacy stream); NULL when invalid. Caller
 * holds sim_lock. */
struct sim_stream *sim_stream_get(cudaStream_t h);
/* Queue op on s with its implicit (default-stream) dependencies plus extra (may be NULL). Caller
 * holds sim_lock. Returns the op's sequence number. */
uint64_t sim_stream_enqueue(struct sim_stream *s, struct sim_op *op, const struct sim_dep *extra);
/* Wait (sim_lock held) until s has completed everything queued so far. */
void sim_stream_wait_idle(struct sim_stream *s);
void sim_wait_all_idle(void); /* every stream, sim_lock held */
/* Events across checkpoint and restart (sim_event.c). */
int64_t sim_event_timestamp(cudaEvent_t h);
cudaError_t sim_event_restore(cudaEvent_t h, int64_t ts_ns);
int sim_dep_done(const struct sim_dep *d);
void sim_stream_ident(const struct sim_stream *s, uint32_t *index, uint32_t *gen);
int sim_stream_idle(const struct sim_stream *s);
void sim_streams_reset(void);               /* destroy every created stream, sim_lock held */
void sim_stream_execute(struct sim_op *op); /* runs on a worker, without sim_lock */

/* ---- events (sim_event.c) ---- */
void sim_event_record_done(uint32_t index, uint32_t gen, uint64_t record_id);
void sim_events_reset(void);

/* ---- kernels and modules (sim_kernel.c) ---- */
void sim_kernel_run(struct sim_kernel_launch *k); /* on a worker; may set the sticky error */
void sim_kernel_free(struct sim_kernel_launch *k);

/* ---- cudaapi: more of the runtime (sim_attr.c, sim_graph.c) ---- */
/* The kernel registered for host_fun (caller holds sim_lock); *desc NULL for GPU code. */
cudaError_t sim_kernel_lookup(const void *host_fun, const struct crac_sim_kernel_desc **desc);
/* The code a launch of host_fun runs: *desc or *kentry set (caller holds sim_lock). */
cudaError_t sim_kernel_code(const void *host_fun, const struct crac_sim_kernel_desc **desc,
                            const struct crac_kernel_entry **kentry);
uint32_t sim_kernel_n_params(const struct sim_kernel_launch *k);
/* Copies args into k->argbuf/argv as a launch does (k->desc or k->kentry set); -1: no memory. */
int sim_kernel_copy_args(struct sim_kernel_launch *k, void **args);
unsigned sim_stream_flags(const struct sim_stream *s);
void sim_op_free(struct sim_op *op); /* an op never queued (or a graph's) */
/* What sim_stream_enqueue returns for an operation a capturing stream put into its graph. */
#define SIM_SEQ_CAPTURED UINT64_MAX
/* Called by sim_stream_enqueue (sim_lock held): 1 when s is capturing and took op, 0 when s is
 * not capturing, -1 when capturing failed (op not taken). */
int sim_graph_capture_op(struct sim_stream *s, struct sim_op *op);
/* cudaStreamWaitEvent on an event recorded during a capture: s joins that capture (1), or the
 * event was not recorded in a capture (0). Caller holds sim_lock. */
int sim_graph_event_join(uint32_t ev_index, uint32_t ev_gen, struct sim_stream *s);
/* Checkpoint and restart of graphs (lower entries crac_lh_graph_export/import). */
uint64_t sim_graph_export(uint64_t handle, void *buf, uint64_t cap);
uint64_t sim_graph_import(const void *buf, uint64_t len);
void sim_graphs_reset(void); /* cudaDeviceReset: sim_lock held */

/* ---- handle encodings (sim_handle.c): the values differ between sim versions ----
 * Objects live in arrays of elem-sized slots. sim1 hands out the slot's address (as drivers hand
 * out pointers); sim2 an encoded integer (kind, generation, index). */
enum { SIM_H_STREAM = 1, SIM_H_EVENT = 2, SIM_H_MODULE = 3, SIM_H_GRAPH = 4 };
#define SIM_GEN_ANY UINT32_MAX
uint64_t sim_handle_encode(int kind, const void *base, size_t elem, uint32_t index, uint32_t gen);
/* The slot index h names, or -1; *gen: the encoded generation (masked), or SIM_GEN_ANY. */
long sim_handle_decode(int kind, uint64_t h, const void *base, size_t elem, uint32_t n,
                       uint32_t *gen);
int sim_handle_gen_matches(uint32_t encoded, uint32_t gen);

/* ---- time ---- */
int64_t sim_now_ns(void);

/* ---- lower-half only (sim_backend.c): block until a signal handler ran (debug entry) ---- */
long sim_block_until_signal(long timeout_ms);

/* ---- kernels libraries of nvcc-built programs (sim_kernels_lib.c); sim_lock held ---- */
struct crac_kernel_block;
void sim_kernels_set_path(const char *path);
const char *sim_kernels_path(void);
const struct crac_kernel_entry *sim_kernels_find(const char *device_name);
int sim_kernels_run_block(const struct crac_kernel_entry *k, void **args,
                          const struct crac_kernel_block *b); /* CRAC_KERNEL_*, no lock */
void sim_kernels_report_missing(const char *device_name);
void sim_kernels_bind_var(const char *name, uint64_t addr, uint64_t size, int init);

/* ---- nvcc's device variables (sim_vars.c) ---- */
int sim_vars_init(void);
void sim_vars_drop_module(uint32_t module_index); /* sim_lock held */
/* The module index behind a module handle, or -1 (sim_lock held). */
long sim_module_index(void **handle);
uint64_t sim_lh_kernels_path(uint64_t path, uint64_t a1, uint64_t a2); /* lower entry */

#endif
