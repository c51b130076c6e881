/* shim_state.c — the shim's part of a checkpoint and a restart (docs/ARCHITECTURE.md "Restart" step 4). At a checkpoint
 * (every thread parked) it notes when each completed event happened; at a restart, before any
 * thread runs, it creates every live stream, event and module again on the new backend (with the
 * flags they were created with) and points the program's virtual handles at them. Device memory
 * is the loader's job (device.img, same addresses). */
#include "shim.h"

#include "cudart_args.h"
#include "cudart_shim_gen.h"
#include "crac_registry.h"

#include <stdint.h>
#include <time.h>

#include "crac_hooks.h"

/* Weak: the shim also runs natively, without libcrac-upper.so. */
extern int crac_upper_hook_register(const char *name, enum crac_event event, int order,
                                    unsigned flags, crac_hook_fn fn, void *arg)
    __attribute__((weak));

int shim_modules_restore(void);
int shim_pinned_restore(void);
int32_t shim_pinned_count(void);
extern struct crac_registry crac_registry __attribute__((weak));

/* CLOCK_MONOTONIC at the checkpoint: event times are moved so that the time the image spent on
 * disk does not count (elapsed times between events recorded before it are kept exactly). */
static int64_t clock_at_checkpoint;
static int64_t shift_at_restart;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static uint64_t lower(const char *name, uint64_t a0, uint64_t a1)
{
    void *fn = shim_resolve(name);
    return fn ? cross_call(fn, a0, a1, 0) : (uint64_t)-1;
}

static int note_event(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    v->saved = (int64_t)lower("crac_lh_event_timestamp", v->backend, 0);
    return 0;
}

static int count(struct shim_vh_view *v, void *ctx)
{
    (void)v;
    (*(int32_t *)ctx)++;
    return 0;
}

static int on_checkpoint(void)
{
    clock_at_checkpoint = now_ns();
    if (&crac_registry) {
        crac_registry.dev_streams = crac_registry.dev_events = crac_registry.dev_modules = 0;
        shim_vh_foreach(SHIM_VH_STREAM, count, &crac_registry.dev_streams);
        shim_vh_foreach(SHIM_VH_EVENT, count, &crac_registry.dev_events);
        shim_vh_foreach(SHIM_VH_MODULE, count, &crac_registry.dev_modules);
        crac_registry.dev_pinned = shim_pinned_count();
    }
    return shim_vh_foreach(SHIM_VH_EVENT, note_event, NULL);
}

static int new_stream(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    cudaStream_t s = 0;
    struct crac_args_cudaStreamCreateWithFlags a = {&s, v->flags};
    if ((cudaError_t)crac_cross_cudaStreamCreateWithFlags(&a) != cudaSuccess)
        return -1;
    v->backend = (uint64_t)(uintptr_t)s;
    return 0;
}

static int new_event(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    cudaEvent_t e = 0;
    struct crac_args_cudaEventCreateWithFlags a = {&e, v->flags};
    if ((cudaError_t)crac_cross_cudaEventCreateWithFlags(&a) != cudaSuccess)
        return -1;
    v->backend = (uint64_t)(uintptr_t)e;
    if (v->saved >= 0 &&
        lower("crac_lh_event_restore", v->backend, (uint64_t)(v->saved + shift_at_restart)) != 0)
        return -1;
    return 0;
}

static int on_restart(void)
{
    shift_at_restart = now_ns() - clock_at_checkpoint;
    if (shim_vh_foreach(SHIM_VH_STREAM, new_stream, NULL) != 0 ||
        shim_vh_foreach(SHIM_VH_EVENT, new_event, NULL) != 0 || shim_modules_restore() != 0 ||
        shim_pinned_restore() != 0)
        return -1;
    return 0;
}

static int on_event(enum crac_event event, void *arg)
{
    (void)arg;
    return event == CRAC_EV_PARKED ? on_checkpoint() : on_restart();
}

/* Order 0: the device state; a library above CUDA (MPI) registers a lower order at PARKED to
 * finish first, a higher one at RESTART to find its streams recreated. */
__attribute__((constructor)) static void shim_state_init(void)
{
    if (crac_upper_hook_register) {
        crac_upper_hook_register("cudart.device_state", CRAC_EV_PARKED, 0, 0, on_event, NULL);
        crac_upper_hook_register("cudart.device_state", CRAC_EV_RESTART, 0, 0, on_event, NULL);
    }
}
