/* sim_core.c — the simulated device itself: initialisation, the error state (per-thread last
 * error, sticky device error) and the device-level calls (count, properties, versions, sync). */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sim_host sim_host;
pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_cv;

static int initialised;
static volatile cudaError_t sticky_error;
/* CUDA keeps the last error per host thread. Under crac each upper thread crosses with a lower
 * TCB of its own, so this is per upper thread there too. */
static __thread cudaError_t last_error;

int sim_init(const struct sim_host *host)
{
    if (initialised)
        return 0;
    sim_host = *host;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&sim_cv, &ca);
    pthread_condattr_destroy(&ca);
    int e = sim_mem_init();
    if (!e)
        e = sim_streams_init();
    if (!e)
        e = sim_events_init();
    if (!e)
        e = sim_modules_init();
    if (!e)
        initialised = 1;
    return e;
}

int64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

cudaError_t sim_sticky(void) { return __atomic_load_n(&sticky_error, __ATOMIC_ACQUIRE); }

void sim_set_sticky(cudaError_t e)
{
    cudaError_t none = cudaSuccess;
    __atomic_compare_exchange_n(&sticky_error, &none, e, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    pthread_cond_broadcast(&sim_cv);
}

cudaError_t sim_ret(cudaError_t e)
{
    if (e != cudaSuccess && e != cudaErrorNotReady)
        last_error = e;
    return e;
}

void *sim_last_error_slot(void) { return (void *)&last_error; }

cudaError_t sim_cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e != cudaSuccess ? e : sim_sticky();
}

cudaError_t sim_cudaPeekAtLastError(void)
{
    cudaError_t e = last_error;
    return e != cudaSuccess ? e : sim_sticky();
}

cudaError_t sim_cudaGetDeviceCount(int *count)
{
    SIM_ENTER();
    if (!count)
        return sim_ret(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}

cudaError_t sim_cudaSetDevice(int device)
{
    SIM_ENTER();
    return sim_ret(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t sim_cudaGetDevice(int *device)
{
    SIM_ENTER();
    if (!device)
        return sim_ret(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    SIM_ENTER();
    if (!prop)
        return sim_ret(cudaErrorInvalidValue);
    if (device != 0)
        return sim_ret(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof(*prop));
    snprintf(prop->name, sizeof(prop->name), "%s", SIM_DEVICE_NAME);
    memcpy(prop->uuid.bytes, "crac-sim-device", 16);
    prop->totalGlobalMem = sim_mem_total();
    prop->sharedMemPerBlock = 48 * 1024;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->memPitch = 1UL << 31;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 64 * 1024;
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->canMapHostMemory = 1;
    prop->concurrentKernels = 1;
    prop->asyncEngineCount = 1;
    prop->unifiedAddressing = 1;
    prop->managedMemory = 1;
    prop->concurrentManagedAccess = 1;
    prop->directManagedMemAccessFromHost = 1;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->maxBlocksPerMultiProcessor = 32;
    prop->sharedMemPerMultiprocessor = 228 * 1024;
    prop->hostNumaId = -1;
    return cudaSuccess;
}

cudaError_t sim_cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return sim_ret(cudaErrorInvalidValue);
    *driverVersion = SIM_DRIVER_VERSION;
    return cudaSuccess;
}

cudaError_t sim_cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return sim_ret(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceSynchronize(void)
{
    SIM_ENTER();
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle();
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(sim_sticky());
}

/* Destroys every stream, event and allocation and clears the sticky error. Registered kernels
 * stay registered (the runtime re-registers modules with a new context, as CUDA does). */
cudaError_t sim_cudaDeviceReset(void)
{
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle();
    sim_streams_reset();
    sim_events_reset();
    sim_graphs_reset();
    sim_mem_reset();
    __atomic_store_n(&sticky_error, cudaSuccess, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sim_lock);
    last_error = cudaSuccess;
    return cudaSuccess;
}
