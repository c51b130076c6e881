/* shim_module.c — nvcc's fat-binary registration entry points in the shim: the backend's module
 * handle is kept behind a virtual handle, like streams and events. */
#include "shim.h"

#include "cudart_shim_gen.h"
#include "cudart_sim_api.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

/* Registrations, kept (upper memory) to be made again on a restart's new backend. Registration
 * happens once per module at start-up, so a list is enough. */
struct fn_reg {
    struct fn_reg *next;
    uint64_t module; /* the program's (virtual) module handle */
    const char *hostFun;
    char *deviceFun;
    const char *deviceName;
    int thread_limit;
};

static struct fn_reg *fn_regs;
static pthread_mutex_t fn_regs_lock = PTHREAD_MUTEX_INITIALIZER;

void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin)
{
    shim_kernels_announce();
    struct crac_args___cudaRegisterFatBinary a = {fatCubin};
    /* The backend's registration and the shim's record of it happen in one gate: a checkpoint
     * between the two would restart with a module the shim does not know to register again. */
    shim_gate_enter();
    uint64_t backend = crac_cross___cudaRegisterFatBinary(&a);
    uint64_t v = 0;
    int ok = backend && shim_vh_wrap_flags(SHIM_VH_MODULE, backend, 0,
                                           (uint64_t)(uintptr_t)fatCubin, &v) == cudaSuccess;
    shim_gate_leave();
    return ok ? (void **)(uintptr_t)v : NULL;
}

static int reregister(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    struct crac_args___cudaRegisterFatBinary a = {(void *)(uintptr_t)v->recipe};
    v->backend = crac_cross___cudaRegisterFatBinary(&a);
    if (!v->backend)
        return -1;
    for (struct fn_reg *f = fn_regs; f; f = f->next) {
        if (f->module != v->handle)
            continue;
        struct crac_args___cudaRegisterFunction r = {(void **)(uintptr_t)v->backend,
                                                     f->hostFun,
                                                     f->deviceFun,
                                                     f->deviceName,
                                                     f->thread_limit,
                                                     NULL,
                                                     NULL,
                                                     NULL,
                                                     NULL,
                                                     NULL};
        crac_cross___cudaRegisterFunction(&r);
    }
    shim_vars_restore(v->handle, (void **)(uintptr_t)v->backend);
    struct crac_args___cudaRegisterFatBinaryEnd e = {(void **)(uintptr_t)v->backend};
    crac_cross___cudaRegisterFatBinaryEnd(&e);
    return 0;
}

int shim_modules_restore(void)
{
    shim_kernels_resend();
    return shim_vh_foreach(SHIM_VH_MODULE, reregister, NULL);
}

static void **backend_module(void **handle)
{
    return (void **)(uintptr_t)shim_vh_backend(SHIM_VH_MODULE, (uint64_t)(uintptr_t)handle);
}

void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    struct crac_args___cudaRegisterFatBinaryEnd a = {backend_module(fatCubinHandle)};
    crac_cross___cudaRegisterFatBinaryEnd(&a);
}

void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    struct crac_args___cudaUnregisterFatBinary a = {backend_module(fatCubinHandle)};
    crac_cross___cudaUnregisterFatBinary(&a);
    shim_vh_release(SHIM_VH_MODULE, (uint64_t)(uintptr_t)fatCubinHandle);
}

void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    struct crac_args___cudaRegisterFunction a = {backend_module(fatCubinHandle),
                                                 hostFun,
                                                 deviceFun,
                                                 deviceName,
                                                 thread_limit,
                                                 tid,
                                                 bid,
                                                 bDim,
                                                 gDim,
                                                 wSize};
    shim_gate_enter(); /* registered and recorded together, as for the fat binary */
    crac_cross___cudaRegisterFunction(&a);
    struct fn_reg *f = malloc(sizeof(*f));
    if (f) {
        *f = (struct fn_reg){NULL,       (uint64_t)(uintptr_t)fatCubinHandle,
                             hostFun,    deviceFun,
                             deviceName, thread_limit};
        pthread_mutex_lock(&fn_regs_lock);
        f->next = fn_regs;
        fn_regs = f;
        pthread_mutex_unlock(&fn_regs_lock);
    }
    shim_gate_leave();
}
