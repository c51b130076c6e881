/* sim_attr.c — the sim's answers to attribute, limit, flag, peer, occupancy and hint queries, stream
 * priorities, registered host memory, and the driver entry point refusal (docs/SIM.md). */
#include "sim.h"

#include <stdio.h>
#include <string.h>

/* Priorities as an H100 reports them: 0 is the least (default), -5 the greatest. */
#define PRIO_LEAST 0
#define PRIO_GREATEST (-5)

static struct {
    uint32_t gen;
    int priority;
} stream_prio[SIM_MAX_STREAMS];

static size_t limits[16] = {
    [cudaLimitStackSize] = 1024,
    [cudaLimitPrintfFifoSize] = 1 << 20,
    [cudaLimitMallocHeapSize] = 8 << 20,
    [cudaLimitDevRuntimeSyncDepth] = 2,
    [cudaLimitDevRuntimePendingLaunchCount] = 2048,
    [cudaLimitMaxL2FetchGranularity] = 64,
    [cudaLimitPersistingL2CacheSize] = 0,
};
static enum cudaFuncCache cache_config = cudaFuncCachePreferNone;
static unsigned device_flags = cudaDeviceScheduleAuto;

static cudaError_t check_device(int device)
{
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

/* ---- device ---- */

cudaError_t sim_cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    SIM_ENTER();
    if (!value)
        return sim_ret(cudaErrorInvalidValue);
    struct cudaDeviceProp p;
    cudaError_t e = sim_cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return e;
    int v;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: v = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: v = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: v = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: v = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: v = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: v = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: v = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: v = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: v = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: v = p.warpSize; break;
    case cudaDevAttrMaxPitch: v = 0x7fffffff; break;
    case cudaDevAttrMaxRegistersPerBlock: v = p.regsPerBlock; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: v = 65536; break;
    case cudaDevAttrClockRate: v = 1755000; break;
    case cudaDevAttrMemoryClockRate: v = 2619000; break;
    case cudaDevAttrGlobalMemoryBusWidth: v = 5120; break;
    case cudaDevAttrL2CacheSize: v = 50 << 20; break;
    case cudaDevAttrTextureAlignment: v = 512; break;
    case cudaDevAttrTexturePitchAlignment: v = 32; break;
    case cudaDevAttrMultiProcessorCount: v = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: v = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: v = p.minor; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: v = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: v = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: v = (int)p.sharedMemPerMultiprocessor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: v = 227 * 1024; break;
    case cudaDevAttrReservedSharedMemoryPerBlock: v = 1024; break;
    case cudaDevAttrAsyncEngineCount: v = p.asyncEngineCount; break;
    case cudaDevAttrComputeMode: v = cudaComputeModeDefault; break;
    case cudaDevAttrPciBusId:
    case cudaDevAttrPciDeviceId:
    case cudaDevAttrPciDomainId: v = 0; break;
    case cudaDevAttrStreamPrioritiesSupported:
    case cudaDevAttrGpuOverlap:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrConcurrentKernels:
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrManagedMemory:
    case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrDirectManagedMemAccessFromHost:
    case cudaDevAttrPageableMemoryAccess:
    case cudaDevAttrHostNativeAtomicSupported:
    case cudaDevAttrCooperativeLaunch:
    case cudaDevAttrHostRegisterSupported:
    case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported:
    case cudaDevAttrCanUseHostPointerForRegisteredMem:
    case cudaDevAttrComputePreemptionSupported: v = 1; break;
    case cudaDevAttrHostNumaId:
    case cudaDevAttrNumaId: v = -1; break;
    default: v = 0; break; /* textures, surfaces, IPC, MPS ...: the sim has none */
    }
    *value = v;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)
{
    SIM_ENTER();
    if (!pValue || (unsigned)limit >= sizeof(limits) / sizeof(limits[0]) ||
        limit > cudaLimitPersistingL2CacheSize)
        return sim_ret(pValue ? cudaErrorUnsupportedLimit : cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    *pValue = limits[limit];
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceSetLimit(enum cudaLimit limit, size_t value)
{
    SIM_ENTER();
    if ((unsigned)limit > cudaLimitPersistingL2CacheSize)
        return sim_ret(cudaErrorUnsupportedLimit);
    pthread_mutex_lock(&sim_lock);
    limits[limit] = value;
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig)
{
    SIM_ENTER();
    if (!pCacheConfig)
        return sim_ret(cudaErrorInvalidValue);
    *pCacheConfig = cache_config;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig)
{
    SIM_ENTER();
    if ((unsigned)cacheConfig > cudaFuncCachePreferEqual)
        return sim_ret(cudaErrorInvalidValue);
    cache_config = cacheConfig;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig *pConfig)
{
    SIM_ENTER();
    if (!pConfig)
        return sim_ret(cudaErrorInvalidValue);
    *pConfig = cudaSharedMemBankSizeFourByte;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config)
{
    SIM_ENTER();
    return sim_ret((unsigned)config > cudaSharedMemBankSizeEightByte ? cudaErrorInvalidValue
                                                                     : cudaSuccess);
}

cudaError_t sim_cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SIM_ENTER();
    if (leastPriority)
        *leastPriority = PRIO_LEAST;
    if (greatestPriority)
        *greatestPriority = PRIO_GREATEST;
    return cudaSuccess;
}

/* One device: it has no peer. */
cudaError_t sim_cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    SIM_ENTER();
    if (!canAccessPeer)
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(device) != cudaSuccess || check_device(peerDevice) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    *canAccessPeer = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    SIM_ENTER();
    if (flags)
        return sim_ret(cudaErrorInvalidValue);
    /* CUDA's answer for a device and itself (or a device with no peer path). */
    return sim_ret(peerDevice == 0 ? cudaErrorInvalidDevice : cudaErrorInvalidDevice);
}

cudaError_t sim_cudaDeviceDisablePeerAccess(int peerDevice)
{
    SIM_ENTER();
    return sim_ret(peerDevice == 0 ? cudaErrorPeerAccessNotEnabled : cudaErrorInvalidDevice);
}

cudaError_t sim_cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, int srcDevice,
                                          int dstDevice)
{
    SIM_ENTER();
    (void)attr;
    if (!value)
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(srcDevice) != cudaSuccess || check_device(dstDevice) != cudaSuccess ||
        srcDevice == dstDevice)
        return sim_ret(cudaErrorInvalidDevice);
    *value = 0;
    return cudaSuccess;
}

#define SIM_PCI_BUS_ID "0000:00:00.0"

cudaError_t sim_cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)
{
    SIM_ENTER();
    if (!device || !pciBusId)
        return sim_ret(cudaErrorInvalidValue);
    if (strcasecmp(pciBusId, SIM_PCI_BUS_ID) != 0 && strcasecmp(pciBusId, "00:00.0") != 0)
        return sim_ret(cudaErrorInvalidDevice);
    *device = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    SIM_ENTER();
    if (!pciBusId || len <= 0)
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(device) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    snprintf(pciBusId, (size_t)len, "%s", SIM_PCI_BUS_ID);
    return cudaSuccess;
}

cudaError_t sim_cudaSetDeviceFlags(unsigned int flags)
{
    SIM_ENTER();
    unsigned known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax |
                     cudaDeviceSyncMemops;
    if (flags & ~known)
        return sim_ret(cudaErrorInvalidValue);
    device_flags = flags | cudaDeviceMapHost;
    return cudaSuccess;
}

cudaError_t sim_cudaGetDeviceFlags(unsigned int *flags)
{
    SIM_ENTER();
    if (!flags)
        return sim_ret(cudaErrorInvalidValue);
    *flags = device_flags | cudaDeviceMapHost;
    return cudaSuccess;
}

cudaError_t sim_cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
    SIM_ENTER();
    if (!device || !prop)
        return sim_ret(cudaErrorInvalidValue);
    *device = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)
{
    SIM_ENTER();
    if (check_device(device) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    if (flags & ~(unsigned)cudaInitDeviceFlagsAreValid)
        return sim_ret(cudaErrorInvalidValue);
    return (flags & cudaInitDeviceFlagsAreValid) ? sim_cudaSetDeviceFlags(deviceFlags)
                                                 : cudaSuccess;
}

cudaError_t sim_cudaSetValidDevices(int *device_arr, int len)
{
    SIM_ENTER();
    if (len < 0 || (len && !device_arr))
        return sim_ret(cudaErrorInvalidValue);
    for (int i = 0; i < len; i++)
        if (device_arr[i] != 0)
            return sim_ret(cudaErrorInvalidDevice);
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceFlushGPUDirectRDMAWrites(enum cudaFlushGPUDirectRDMAWritesTarget target,
                                                   enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    SIM_ENTER();
    (void)target, (void)scope;
    return cudaSuccess; /* device memory is host memory: nothing is ever in flight */
}

cudaError_t sim_cudaCtxResetPersistingL2Cache(void)
{
    SIM_ENTER();
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements,
                                                     const struct cudaChannelFormatDesc *fmtDesc,
                                                     int device)
{
    SIM_ENTER();
    if (!maxWidthInElements || !fmtDesc)
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(device) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    *maxWidthInElements = 1UL << 27;
    return cudaSuccess;
}

/* Graph memory nodes are not supported: their pools hold nothing. */
cudaError_t sim_cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                               void *value)
{
    SIM_ENTER();
    if (!value || (unsigned)attr > cudaGraphMemAttrReservedMemHigh)
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(device) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    *(uint64_t *)value = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr,
                                               void *value)
{
    SIM_ENTER();
    if (!value || (attr != cudaGraphMemAttrUsedMemHigh && attr != cudaGraphMemAttrReservedMemHigh))
        return sim_ret(cudaErrorInvalidValue);
    if (check_device(device) != cudaSuccess)
        return sim_ret(cudaErrorInvalidDevice);
    return sim_ret(*(uint64_t *)value == 0 ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t sim_cudaDeviceGraphMemTrim(int device)
{
    SIM_ENTER();
    return sim_ret(check_device(device));
}

cudaError_t sim_cudaProfilerStart(void)
{
    SIM_ENTER();
    return cudaSuccess;
}

cudaError_t sim_cudaProfilerStop(void)
{
    SIM_ENTER();
    return cudaSuccess;
}

/* The sim has no driver API to hand out: refused, as CUDA answers for a symbol it lacks, with a
 * note (a program that needs it must run on a real device). */
static cudaError_t no_entry_point(const char *symbol, void **funcPtr,
                                  enum cudaDriverEntryPointQueryResult *driverStatus)
{
    if (!symbol || !funcPtr)
        return sim_ret(cudaErrorInvalidValue);
    *funcPtr = NULL;
    if (driverStatus)
        *driverStatus = cudaDriverEntryPointSymbolNotFound;
    fprintf(stderr,
            "crac sim: cudaGetDriverEntryPoint(\"%.64s\"): the simulated device has no "
            "driver API\n",
            symbol);
    return sim_ret(cudaErrorNotSupported);
}

cudaError_t sim_cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                        unsigned long long flags,
                                        enum cudaDriverEntryPointQueryResult *driverStatus)
{
    SIM_ENTER();
    (void)flags;
    return no_entry_point(symbol, funcPtr, driverStatus);
}

cudaError_t sim_cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                 unsigned int cudaVersion, unsigned long long flags,
                                                 enum cudaDriverEntryPointQueryResult *driverStatus)
{
    SIM_ENTER();
    (void)cudaVersion, (void)flags;
    return no_entry_point(symbol, funcPtr, driverStatus);
}

/* ---- kernels ---- */

static cudaError_t kernel_of(const void *func, const struct crac_sim_kernel_desc **d)
{
    pthread_mutex_lock(&sim_lock);
    cudaError_t e = sim_kernel_lookup(func, d);
    pthread_mutex_unlock(&sim_lock);
    return e;
}

static size_t param_bytes(const struct crac_sim_kernel_desc *d)
{
    size_t total = 0;
    for (uint32_t i = 0; d && i < d->n_params; i++) {
        size_t align = d->param_align[i] ? d->param_align[i] : 1;
        total = (total + align - 1) / align * align + d->param_size[i];
    }
    return total;
}

cudaError_t sim_cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    SIM_ENTER();
    if (!attr)
        return sim_ret(cudaErrorInvalidValue);
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e != cudaSuccess)
        return sim_ret(e);
    memset(attr, 0, sizeof(*attr));
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = 48 * 1024;
    attr->preferredShmemCarveout = -1;
    (void)param_bytes(d);
    return cudaSuccess;
}

cudaError_t sim_cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    SIM_ENTER();
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e != cudaSuccess)
        return sim_ret(e);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && (value < 0 || value > 227 * 1024))
        return sim_ret(cudaErrorInvalidValue);
    return cudaSuccess;
}

cudaError_t sim_cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
    SIM_ENTER();
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e == cudaSuccess && (unsigned)cacheConfig > cudaFuncCachePreferEqual)
        e = cudaErrorInvalidValue;
    return sim_ret(e);
}

cudaError_t sim_cudaFuncSetSharedMemConfig(const void *func, enum cudaSharedMemConfig config)
{
    SIM_ENTER();
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e == cudaSuccess && (unsigned)config > cudaSharedMemBankSizeEightByte)
        e = cudaErrorInvalidValue;
    return sim_ret(e);
}

cudaError_t sim_cudaFuncGetName(const char **name, const void *func)
{
    SIM_ENTER();
    if (!name)
        return sim_ret(cudaErrorInvalidValue);
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e == cudaSuccess && !d)
        e = cudaErrorNoKernelImageForDevice;
    if (e == cudaSuccess)
        *name = d->name; /* the program's own string (CRAC_SIM_KERNEL) */
    return sim_ret(e);
}

cudaError_t sim_cudaFuncGetParamInfo(const void *func, size_t paramIndex, size_t *paramOffset,
                                     size_t *paramSize)
{
    SIM_ENTER();
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e == cudaSuccess && !d)
        e = cudaErrorNoKernelImageForDevice;
    if (e == cudaSuccess && paramIndex >= d->n_params)
        e = cudaErrorInvalidValue;
    if (e != cudaSuccess)
        return sim_ret(e);
    size_t off = 0;
    for (uint32_t i = 0; i <= paramIndex; i++) {
        size_t align = d->param_align[i] ? d->param_align[i] : 1;
        off = (off + align - 1) / align * align;
        if (i < paramIndex)
            off += d->param_size[i];
    }
    if (paramOffset)
        *paramOffset = off;
    if (paramSize)
        *paramSize = d->param_size[paramIndex];
    return cudaSuccess;
}

/* Occupancy of the sim's device: 2048 threads, 32 blocks and 228 KiB shared memory per SM. */
static cudaError_t occupancy(int *numBlocks, const void *func, int blockSize, size_t smem)
{
    if (!numBlocks || blockSize <= 0 || blockSize > 1024)
        return cudaErrorInvalidValue;
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e != cudaSuccess)
        return e;
    int warps = (blockSize + 31) / 32;
    int by_threads = 64 / warps;
    int by_smem = smem ? (int)((228 * 1024) / (smem + 1024)) : 32;
    int n = by_threads < 32 ? by_threads : 32;
    *numBlocks = n < by_smem ? n : by_smem;
    return cudaSuccess;
}

cudaError_t sim_cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func,
                                                              int blockSize, size_t dynamicSMemSize)
{
    SIM_ENTER();
    return sim_ret(occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}

cudaError_t sim_cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize, unsigned int flags)
{
    SIM_ENTER();
    if (flags & ~(unsigned)cudaOccupancyDisableCachingOverride)
        return sim_ret(cudaErrorInvalidValue);
    return sim_ret(occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}

cudaError_t sim_cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, const void *func,
                                                          int numBlocks, int blockSize)
{
    SIM_ENTER();
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0 || blockSize > 1024)
        return sim_ret(cudaErrorInvalidValue);
    const struct crac_sim_kernel_desc *d;
    cudaError_t e = kernel_of(func, &d);
    if (e != cudaSuccess)
        return sim_ret(e);
    size_t per = (228 * 1024) / (size_t)numBlocks;
    per = per > 1024 ? per - 1024 : 0;
    *dynamicSmemSize = per < 227 * 1024 ? per : 227 * 1024;
    return cudaSuccess;
}

/* ---- streams ---- */

/* The stream behind h, with sim_lock held on success. */
static struct sim_stream *stream_locked(cudaStream_t h)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(h);
    if (!s)
        pthread_mutex_unlock(&sim_lock);
    return s;
}

static void set_priority_locked(struct sim_stream *s, int priority)
{
    uint32_t index, gen;
    sim_stream_ident(s, &index, &gen);
    if (priority > PRIO_LEAST)
        priority = PRIO_LEAST;
    if (priority < PRIO_GREATEST)
        priority = PRIO_GREATEST;
    stream_prio[index].gen = gen;
    stream_prio[index].priority = priority;
}

static int priority_locked(struct sim_stream *s)
{
    uint32_t index, gen;
    sim_stream_ident(s, &index, &gen);
    return index && stream_prio[index].gen == gen ? stream_prio[index].priority : 0;
}

/* Priorities are recorded, not scheduled: every stream has its own worker, so a high-priority
 * stream never waits behind a low-priority one's queue anyway. */
cudaError_t sim_cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                             int priority)
{
    cudaError_t e = sim_cudaStreamCreateWithFlags(pStream, flags);
    if (e != cudaSuccess)
        return e;
    struct sim_stream *s = stream_locked(*pStream);
    if (s) {
        set_priority_locked(s, priority);
        pthread_mutex_unlock(&sim_lock);
    }
    return cudaSuccess;
}

cudaError_t sim_cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    SIM_ENTER();
    if (!priority)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(hStream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    *priority = priority_locked(s);
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    SIM_ENTER();
    if (!flags)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(hStream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    *flags = sim_stream_flags(s);
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
    SIM_ENTER();
    if (!device)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(hStream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_unlock(&sim_lock);
    *device = 0;
    return cudaSuccess;
}

cudaError_t sim_cudaStreamGetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                       cudaStreamAttrValue *value_out)
{
    SIM_ENTER();
    if (!value_out)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(hStream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    cudaError_t e = cudaSuccess;
    memset(value_out, 0, sizeof(*value_out));
    if (attr == cudaLaunchAttributePriority)
        value_out->priority = priority_locked(s);
    else if (attr != cudaLaunchAttributeAccessPolicyWindow &&
             attr != cudaLaunchAttributeSynchronizationPolicy &&
             attr != cudaLaunchAttributeMemSyncDomain &&
             attr != cudaLaunchAttributeMemSyncDomainMap)
        e = cudaErrorInvalidValue;
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaStreamSetAttribute(cudaStream_t hStream, cudaStreamAttrID attr,
                                       const cudaStreamAttrValue *value)
{
    SIM_ENTER();
    if (!value)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(hStream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    cudaError_t e = cudaSuccess;
    if (attr == cudaLaunchAttributePriority) {
        uint32_t index, gen;
        sim_stream_ident(s, &index, &gen);
        if (index == 0)
            e = cudaErrorInvalidResourceHandle; /* the legacy stream keeps priority 0 */
        else
            set_priority_locked(s, value->priority);
    } else if (attr != cudaLaunchAttributeAccessPolicyWindow &&
               attr != cudaLaunchAttributeSynchronizationPolicy &&
               attr != cudaLaunchAttributeMemSyncDomain &&
               attr != cudaLaunchAttributeMemSyncDomainMap) {
        e = cudaErrorInvalidValue;
    }
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(e);
}

cudaError_t sim_cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr, size_t length,
                                         unsigned int flags)
{
    SIM_ENTER();
    if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost && flags != cudaMemAttachSingle)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(stream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    struct sim_alloc a;
    int ok = sim_mem_find((uint64_t)(uintptr_t)devPtr, length ? length : 1, &a) &&
             a.kind == SIM_MEM_MANAGED && (!length || (uint64_t)(uintptr_t)devPtr == a.start);
    pthread_mutex_unlock(&sim_lock);
    /* Managed memory is host memory here: attaching changes no visibility. */
    return sim_ret(ok ? cudaSuccess : cudaErrorInvalidValue);
}

static __thread enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

cudaError_t sim_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    SIM_ENTER();
    if (!mode || (unsigned)*mode > cudaStreamCaptureModeRelaxed)
        return sim_ret(cudaErrorInvalidValue);
    enum cudaStreamCaptureMode old = capture_mode;
    capture_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

/* ---- managed memory hints: there is one copy of managed memory, so hints change nothing ---- */

static cudaError_t managed_range(const void *devPtr, size_t count)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc a;
    int ok = devPtr && count && sim_mem_find((uint64_t)(uintptr_t)devPtr, count, &a) &&
             a.kind != SIM_MEM_PINNED;
    pthread_mutex_unlock(&sim_lock);
    return ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t sim_cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                              struct cudaMemLocation location)
{
    SIM_ENTER();
    (void)location;
    if ((unsigned)advice < cudaMemAdviseSetReadMostly ||
        (unsigned)advice > cudaMemAdviseUnsetAccessedBy)
        return sim_ret(cudaErrorInvalidValue);
    return sim_ret(managed_range(devPtr, count));
}

cudaError_t sim_cudaMemPrefetchAsync(const void *devPtr, size_t count,
                                     struct cudaMemLocation location, unsigned int flags,
                                     cudaStream_t stream)
{
    SIM_ENTER();
    (void)location;
    if (flags)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_stream *s = stream_locked(stream);
    if (!s)
        return sim_ret(cudaErrorInvalidResourceHandle);
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(managed_range(devPtr, count));
}

cudaError_t sim_cudaMemRangeGetAttribute(void *data, size_t dataSize,
                                         enum cudaMemRangeAttribute attribute, const void *devPtr,
                                         size_t count)
{
    SIM_ENTER();
    if (!data || dataSize < 4)
        return sim_ret(cudaErrorInvalidValue);
    cudaError_t e = managed_range(devPtr, count);
    if (e != cudaSuccess)
        return sim_ret(e);
    switch (attribute) {
    case cudaMemRangeAttributeReadMostly: *(int *)data = 0; break;
    case cudaMemRangeAttributePreferredLocation:
    case cudaMemRangeAttributeLastPrefetchLocation: *(int *)data = cudaInvalidDeviceId; break;
    case cudaMemRangeAttributeAccessedBy: memset(data, 0xff, dataSize); break;
    default: memset(data, 0, dataSize); break;
    }
    return cudaSuccess;
}

/* ---- registered host memory: recorded as pinned ranges (the shim registers them again after
 * a restart) ---- */

cudaError_t sim_cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    SIM_ENTER();
    unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                     cudaHostRegisterReadOnly;
    if (!ptr || !size || (flags & ~known))
        return sim_ret(cudaErrorInvalidValue);
    if (flags & cudaHostRegisterIoMemory)
        return sim_ret(cudaErrorNotSupported);
    pthread_mutex_lock(&sim_lock);
    int inside = sim_mem_find((uint64_t)(uintptr_t)ptr, 1, NULL) ||
                 sim_mem_find((uint64_t)(uintptr_t)ptr + size - 1, 1, NULL);
    pthread_mutex_unlock(&sim_lock);
    if (inside)
        return sim_ret(cudaErrorHostMemoryAlreadyRegistered);
    return sim_ret(sim_mem_register_pinned((uint64_t)(uintptr_t)ptr, size));
}

cudaError_t sim_cudaHostUnregister(void *ptr)
{
    SIM_ENTER();
    if (!ptr)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle(); /* no queued copy may still use the range */
    pthread_mutex_unlock(&sim_lock);
    cudaError_t e = sim_mem_unregister_pinned((uint64_t)(uintptr_t)ptr, NULL);
    return sim_ret(e == cudaSuccess ? e : cudaErrorHostMemoryNotRegistered);
}

cudaError_t sim_cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    SIM_ENTER();
    if (!pDevice || flags)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_alloc a;
    pthread_mutex_lock(&sim_lock);
    int ok = sim_mem_find((uint64_t)(uintptr_t)pHost, 1, &a) && a.kind == SIM_MEM_PINNED;
    pthread_mutex_unlock(&sim_lock);
    if (!ok)
        return sim_ret(cudaErrorInvalidValue);
    *pDevice = pHost; /* unified addressing: the device sees host memory at its address */
    return cudaSuccess;
}

cudaError_t sim_cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    SIM_ENTER();
    if (!pFlags)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_alloc a;
    pthread_mutex_lock(&sim_lock);
    int ok = sim_mem_find((uint64_t)(uintptr_t)pHost, 1, &a) && a.kind == SIM_MEM_PINNED;
    pthread_mutex_unlock(&sim_lock);
    if (!ok)
        return sim_ret(cudaErrorInvalidValue);
    *pFlags = cudaHostAllocMapped | cudaHostAllocPortable;
    return cudaSuccess;
}

/* ---- thread-block clusters: one SM, so a cluster is at most the blocks one SM holds ---- */

static unsigned cluster_size_of(const cudaLaunchConfig_t *c)
{
    for (unsigned i = 0; c && c->attrs && i < c->numAttrs; i++)
        if (c->attrs[i].id == cudaLaunchAttributeClusterDimension) {
            return c->attrs[i].val.clusterDim.x * c->attrs[i].val.clusterDim.y *
                   c->attrs[i].val.clusterDim.z;
        }
    return 1;
}

cudaError_t sim_cudaOccupancyMaxPotentialClusterSize(int *clusterSize, const void *func,
                                                     const cudaLaunchConfig_t *launchConfig)
{
    SIM_ENTER();
    if (!clusterSize || !launchConfig)
        return sim_ret(cudaErrorInvalidValue);
    int blocks = 0;
    cudaError_t e = occupancy(
        &blocks, func,
        (int)(launchConfig->blockDim.x * launchConfig->blockDim.y * launchConfig->blockDim.z),
        launchConfig->dynamicSmemBytes);
    if (e != cudaSuccess)
        return sim_ret(e);
    *clusterSize = blocks < 8 ? blocks : 8; /* 8: the portable cluster size limit */
    return cudaSuccess;
}

cudaError_t sim_cudaOccupancyMaxActiveClusters(int *numClusters, const void *func,
                                               const cudaLaunchConfig_t *launchConfig)
{
    SIM_ENTER();
    if (!numClusters || !launchConfig)
        return sim_ret(cudaErrorInvalidValue);
    int blocks = 0;
    cudaError_t e = occupancy(
        &blocks, func,
        (int)(launchConfig->blockDim.x * launchConfig->blockDim.y * launchConfig->blockDim.z),
        launchConfig->dynamicSmemBytes);
    if (e != cudaSuccess)
        return sim_ret(e);
    unsigned size = cluster_size_of(launchConfig);
    if (!size || size > 8)
        return sim_ret(cudaErrorInvalidClusterSize);
    *numClusters = blocks / (int)size;
    return cudaSuccess;
}
