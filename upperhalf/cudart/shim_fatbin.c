/* shim_fatbin.c — the shim's part of running nvcc-built programs (docs/SIM.md "Programs built by
 * nvcc"): where the kernels library is, nvcc's device variables (device memory crac assigns,
 * registrations kept in upper memory for a restart), and the launch-handle entries. */
#include "shim.h"

#include "cudart_shim_gen.h"
#include "cudart_sim_api.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

/* The kernels library's path, decided once: $CRAC_KERNELS, else the program's path +
 * ".kernels.so". Upper memory, so a restart (which may run with another environment and cwd)
 * uses the same library. */
static char kernels_path[PATH_MAX + 16];
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void decide_path(void)
{
    const char *env = getenv("CRAC_KERNELS");
    if (env && *env) {
        char *abs = realpath(env, NULL);
        snprintf(kernels_path, sizeof(kernels_path), "%s", abs ? abs : env);
        free(abs);
        return;
    }
    const char *exe = (const char *)getauxval(AT_EXECFN);
    char *abs = exe ? realpath(exe, NULL) : NULL;
    if (abs)
        snprintf(kernels_path, sizeof(kernels_path), "%s.kernels.so", abs);
    free(abs);
}

static void send_path(void)
{
    /* shim_cross, not shim_resolve + cross_call: a thread that waits at the gate across a
     * checkpoint must look the entry up again in the restarted lower half. */
    static struct shim_entry_cache cache;
    int found;
    shim_cross(&cache, "crac_lh_kernels_path", (uint64_t)(uintptr_t)kernels_path, 0, 0, &found);
}

void shim_kernels_announce(void)
{
    pthread_once(&kernels_once, decide_path);
    send_path();
}

/* The restart hook runs while the program's threads are parked wherever the checkpoint found
 * them, possibly inside decide_path: waiting on the once-control there would never end. The
 * path as saved is sent; a thread that was deciding it sends the finished one when it resumes
 * (the sim starts over when the path changes). */
void shim_kernels_resend(void) { send_path(); }

/* ---- variables ---- */

struct var_reg {
    struct var_reg *next;
    uint64_t module;          /* the program's (virtual) module handle */
    char *hostVar;            /* __cudaRegisterVar: the host shadow */
    void **hostVarPtrAddress; /* __cudaRegisterManagedVar */
    char *deviceAddress;
    const char *deviceName;
    int ext, constant, global;
    size_t size;
    uint64_t addr; /* in D */
};

static struct var_reg *var_regs;
static pthread_mutex_t var_regs_lock = PTHREAD_MUTEX_INITIALIZER;

static void **backend_of(void **handle)
{
    return (void **)(uintptr_t)shim_vh_backend(SHIM_VH_MODULE, (uint64_t)(uintptr_t)handle);
}

static void cross_var(const struct var_reg *v, void **backend)
{
    if (v->hostVarPtrAddress) {
        struct crac_args___cudaRegisterManagedVar a = {
            backend, v->hostVarPtrAddress, v->deviceAddress, v->deviceName, v->ext,
            v->size, v->constant,          v->global,        v->addr};
        crac_cross___cudaRegisterManagedVar(&a);
    } else {
        struct crac_args___cudaRegisterVar a = {backend,       v->hostVar, v->deviceAddress,
                                                v->deviceName, v->ext,     v->size,
                                                v->constant,   v->global,  v->addr};
        crac_cross___cudaRegisterVar(&a);
    }
}

static void register_var(struct var_reg *tmpl)
{
    if (!tmpl->size)
        return;
    /* Address, registration and record together (shim_module.c): a checkpoint after the
     * address alone would save a device range the backend has not mapped (shim_mem.c). */
    shim_gate_enter();
    tmpl->addr = shim_dev_alloc(tmpl->size, tmpl->hostVarPtrAddress != NULL);
    struct var_reg *v = tmpl->addr ? malloc(sizeof(*v)) : NULL;
    if (!v) { /* as with a GPU out of memory: the module's variables are unusable */
        if (tmpl->addr)
            shim_dev_free(tmpl->addr);
        shim_gate_leave();
        return;
    }
    *v = *tmpl;
    cross_var(v, backend_of((void **)(uintptr_t)v->module));
    pthread_mutex_lock(&var_regs_lock);
    v->next = var_regs;
    var_regs = v;
    pthread_mutex_unlock(&var_regs_lock);
    shim_gate_leave();
}

void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant,
                                 int global)
{
    struct var_reg t = {NULL,
                        (uint64_t)(uintptr_t)fatCubinHandle,
                        hostVar,
                        NULL,
                        deviceAddress,
                        deviceName,
                        ext,
                        constant,
                        global,
                        size,
                        0};
    register_var(&t);
}

void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global)
{
    struct var_reg t = {NULL,
                        (uint64_t)(uintptr_t)fatCubinHandle,
                        NULL,
                        hostVarPtrAddress,
                        deviceAddress,
                        deviceName,
                        ext,
                        constant,
                        global,
                        size,
                        0};
    register_var(&t);
}

/* At a restart the variables' device memory is back already (device.img, same addresses): the
 * new backend only learns where each variable is and binds the kernels library to it. Oldest
 * registration first, as the program made them. */
static void restore_list(struct var_reg *v, uint64_t module, void **backend)
{
    if (!v)
        return;
    restore_list(v->next, module, backend);
    if (v->module == module)
        cross_var(v, backend);
}

void shim_vars_restore(uint64_t module, void **backend) { restore_list(var_regs, module, backend); }

/* ---- launch handles: a kernel handle is the host function's address ---- */

cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
    if (!kernel || !hostFun)
        return shim_fail(cudaErrorInvalidValue);
    *kernel = (cudaKernel_t)(uintptr_t)hostFun;
    return cudaSuccess;
}

char CUDARTAPI __cudaInitModule(void **fatCubinHandle)
{
    /* The sim bound managed variables when they were registered (no entry: 1). NVIDIA's runtime
     * (the cuda backend) binds nvcc's pointer to each when it loads the module, which this call
     * is for: host code reads the variable through that pointer next. */
    static struct shim_entry_cache cache;
    int found;
    uint64_t r = shim_cross(&cache, "crac_lh_init_module",
                            (uint64_t)(uintptr_t)backend_of(fatCubinHandle), 0, 0, &found);
    return found ? (char)r : 1;
}
