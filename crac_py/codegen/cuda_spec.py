"""The one spec of the CUDA runtime API functions crac supports (crossing the split process).

Each function has its C signature (as in CUDA 13's cuda_runtime_api.h / crt/host_runtime.h) and
the role of every argument. crac_py/codegen/generate.py generates from it, at build time:

* the upper shim `libcudart.so.13` (each entry packs its arguments into a struct and crosses into
  the lower half; handles are translated between the program's virtual handles and the backend's),
* the lower-half entries `{"cudaXxx", lh_cudaXxx}` that unpack the struct and call the sim,
* the native sim `libcudart.so.13` (no split process: entry points call the sim directly).

Preflight refuses a program that imports a `cuda*`/`__cuda*` function not in SUPPORTED.

Roles of arguments (what crac must know about each one):

| role | meaning |
|---|---|
| val, size, flags, kind, device, dim3 | by value, passed through unchanged |
| dev_ptr | a device address: identical in both halves (the device window D is shared) |
| host_ptr | host memory the callee reads or writes during the call |
| out | host memory the callee fills (an out parameter) |
| out_dev_ptr | `void **` receiving a new device/managed/pinned address |
| func | a kernel's host function (upper-half code the sim calls on its workers) |
| args | a kernel's argument array (copied by the sim at launch) |
| stream, event | an input handle: the program's virtual handle, translated to the backend's |
| out_stream, out_event | a created handle: the backend's handle is wrapped in a new virtual one |
| destroy_stream, destroy_event | an input handle whose virtual handle is released on success |
| hostfn, userdata | a host callback and its argument (run on an upper-half executor thread) |
| module | a fat-binary handle (a virtual handle of its own kind) |
| graph, gexec | a CUDA graph / executable graph handle (virtual, like streams) |
| out_graph, out_gexec, destroy_graph, destroy_gexec | created / destroyed graph handles |
| extra | a field crac adds after the CUDA arguments (e.g. the device address crac assigned) |

`upper`: how the shim implements the entry — `gen` (generated crossing), `custom` (hand-written in
upperhalf/cudart/, crossing through the generated `crac_cross_<name>`), `local` (hand-written, no
crossing: pure or per-thread bookkeeping kept in the upper half). `native`: `gen` (generated direct
call of `sim_<name>`) or `custom` (hand-written in backends/sim/sim_native.c).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ROLES = frozenset(
    {
        "val",
        "size",
        "flags",
        "kind",
        "device",
        "dim3",
        "dev_ptr",
        "host_ptr",
        "out",
        "out_dev_ptr",
        "func",
        "args",
        "stream",
        "event",
        "out_stream",
        "out_event",
        "destroy_stream",
        "destroy_event",
        "hostfn",
        "userdata",
        "module",
        "extra",
        "graph",
        "out_graph",
        "destroy_graph",
        "gexec",
        "out_gexec",
        "destroy_gexec",
    }
)
HANDLE_KINDS = {
    "stream": "stream",
    "out_stream": "stream",
    "destroy_stream": "stream",
    "event": "event",
    "out_event": "event",
    "destroy_event": "event",
    "graph": "graph",
    "out_graph": "graph",
    "destroy_graph": "graph",
    "gexec": "gexec",
    "out_gexec": "gexec",
    "destroy_gexec": "gexec",
}


@dataclass(frozen=True)
class Param:
    ctype: str  # e.g. "void **", "cudaStream_t", "enum cudaMemcpyKind"
    name: str
    role: str

    def decl(self) -> str:
        sep = "" if self.ctype.endswith("*") else " "
        return f"{self.ctype}{sep}{self.name}"


@dataclass(frozen=True)
class Func:
    name: str
    ret: str
    params: tuple[Param, ...]
    upper: str = "gen"  # gen | custom | local
    native: str = "gen"  # gen | custom
    extras: tuple[Param, ...] = ()
    declared: bool = True  # declared in cuda_runtime_api.h (else codegen emits the prototype)
    sticky_exempt: bool = False  # documented: does not report the sticky error
    doc: str = ""
    all_params: tuple[Param, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all_params", self.params + self.extras)
        for p in self.all_params:
            if p.role not in ROLES:
                raise ValueError(f"{self.name}: unknown role {p.role!r} for {p.name}")
        if self.upper not in ("gen", "custom", "local"):
            raise ValueError(f"{self.name}: upper must be gen, custom or local")
        if self.native not in ("gen", "custom"):
            raise ValueError(f"{self.name}: native must be gen or custom")

    @property
    def crosses(self) -> bool:
        """Has a lower-half entry (everything but upper-local functions)."""
        return self.upper != "local"

    def prototype(self, name: str | None = None) -> str:
        params = ", ".join(p.decl() for p in self.params) or "void"
        sep = "" if self.ret.endswith("*") else " "
        return f"{self.ret}{sep}CUDARTAPI {name or self.name}({params})"


_DEFAULT_ROLES = (
    (re.compile(r"^cudaStream_t$"), "stream"),
    (re.compile(r"^cudaEvent_t$"), "event"),
    (re.compile(r"^cudaStream_t \*$"), "out_stream"),
    (re.compile(r"^cudaEvent_t \*$"), "out_event"),
    (re.compile(r"^cudaGraph_t$"), "graph"),
    (re.compile(r"^cudaGraph_t \*$"), "out_graph"),
    (re.compile(r"^cudaGraphExec_t$"), "gexec"),
    (re.compile(r"^cudaGraphExec_t \*$"), "out_gexec"),
    (re.compile(r"^size_t$"), "size"),
    (re.compile(r"^unsigned int$"), "flags"),
    (re.compile(r"^enum cudaMemcpyKind$"), "kind"),
    (re.compile(r"^dim3$"), "dim3"),
    (re.compile(r"^cudaHostFn_t$"), "hostfn"),
    (re.compile(r"\*$"), "out"),
)


def _default_role(ctype: str) -> str:
    for pattern, role in _DEFAULT_ROLES:
        if pattern.search(ctype):
            return role
    return "val"


def _norm_type(ctype: str) -> str:
    """'void**' / 'void * *' -> 'void **'; 'char*' -> 'char *'."""
    t = re.sub(r"\s*\*", " *", ctype.strip())
    while "* *" in t:
        t = t.replace("* *", "**")
    return t


def _parse(signature: str, roles: dict[str, str]) -> tuple[str, str, tuple[Param, ...]]:
    m = re.fullmatch(r"\s*(.+?)\s*\b(\w+)\s*\((.*)\)\s*", signature)
    if not m:
        raise ValueError(f"cannot parse signature {signature!r}")
    ret, name, plist = m.group(1), m.group(2), m.group(3).strip()
    params: list[Param] = []
    if plist and plist != "void":
        for raw in plist.split(","):
            pm = re.fullmatch(r"\s*(.+?)\s*(\w+)\s*", raw)
            if not pm:
                raise ValueError(f"{name}: cannot parse parameter {raw!r}")
            ctype = _norm_type(pm.group(1))
            pname = pm.group(2)
            params.append(Param(ctype, pname, roles.pop(pname, None) or _default_role(ctype)))
    if roles:
        raise ValueError(f"{name}: roles for unknown parameters {sorted(roles)}")
    return _norm_type(ret), name, tuple(params)


def F(
    signature: str,
    *,
    upper: str = "gen",
    native: str = "gen",
    declared: bool = True,
    extras: tuple[tuple[str, str], ...] = (),
    sticky_exempt: bool = False,
    doc: str = "",
    **roles: str,
) -> Func:
    ret, name, params = _parse(signature, dict(roles))
    extra_params = tuple(Param(t, n, "extra") for t, n in extras)
    return Func(name, ret, params, upper, native, extra_params, declared, sticky_exempt, doc)


CRAC_ADDR = (("unsigned long long", "crac_addr"),)

SPEC: tuple[Func, ...] = (
    # --- device management ---
    F("cudaError_t cudaGetDeviceCount(int *count)"),
    F("cudaError_t cudaSetDevice(int device)", device="device"),
    F("cudaError_t cudaGetDevice(int *device)"),
    F(
        "cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)",
        device="device",
        doc="CUDA 13 exports it unversioned (no _v2 alias since 13.0)",
    ),
    F("cudaError_t cudaDeviceSynchronize(void)"),
    F(
        "cudaError_t cudaDeviceReset(void)",
        upper="custom",
        native="custom",
        doc="also drops the shim's virtual handles, device addresses and pinned memory",
    ),
    F("cudaError_t cudaDriverGetVersion(int *driverVersion)", sticky_exempt=True),
    F(
        "cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)",
        upper="local",
        sticky_exempt=True,
        doc="the runtime is the shim: CUDART_VERSION of its headers",
    ),
    # --- errors ---
    F("cudaError_t cudaGetLastError(void)"),
    F("cudaError_t cudaPeekAtLastError(void)"),
    F(
        "const char *cudaGetErrorString(cudaError_t error)",
        upper="local",
        error="val",
        sticky_exempt=True,
        doc="pure: strings live in the upper half, so they survive a restart",
    ),
    F(
        "const char *cudaGetErrorName(cudaError_t error)",
        upper="local",
        error="val",
        sticky_exempt=True,
    ),
    # --- memory ---
    F(
        "cudaError_t cudaMalloc(void **devPtr, size_t size)",
        upper="custom",
        native="custom",
        devPtr="out_dev_ptr",
        extras=CRAC_ADDR,
        doc="crac assigns the address inside D",
    ),
    F(
        "cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)",
        upper="custom",
        native="custom",
        devPtr="out_dev_ptr",
        extras=CRAC_ADDR,
    ),
    F("cudaError_t cudaFree(void *devPtr)", upper="custom", native="custom", devPtr="dev_ptr"),
    F(
        "cudaError_t cudaMallocHost(void **ptr, size_t size)",
        upper="custom",
        native="custom",
        ptr="out_dev_ptr",
        extras=CRAC_ADDR,
        doc="pinned memory is mapped by the shim (in W)",
    ),
    F(
        "cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)",
        upper="custom",
        native="custom",
        pHost="out_dev_ptr",
        extras=CRAC_ADDR,
    ),
    F("cudaError_t cudaFreeHost(void *ptr)", upper="custom", native="custom", ptr="host_ptr"),
    F(
        "cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, "
        "enum cudaMemcpyKind kind)",
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, "
        "enum cudaMemcpyKind kind, cudaStream_t stream)",
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F("cudaError_t cudaMemset(void *devPtr, int value, size_t count)", devPtr="dev_ptr"),
    F(
        "cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)",
        devPtr="dev_ptr",
    ),
    F("cudaError_t cudaMemGetInfo(size_t *free, size_t *total)"),
    F(
        "cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, "
        "const void *ptr)",
        ptr="dev_ptr",
    ),
    # --- streams ---
    F("cudaError_t cudaStreamCreate(cudaStream_t *pStream)"),
    F("cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)"),
    F("cudaError_t cudaStreamDestroy(cudaStream_t stream)", stream="destroy_stream"),
    F("cudaError_t cudaStreamSynchronize(cudaStream_t stream)"),
    F("cudaError_t cudaStreamQuery(cudaStream_t stream)"),
    F(
        "cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, "
        "unsigned int flags)"
    ),
    # --- events ---
    F("cudaError_t cudaEventCreate(cudaEvent_t *event)"),
    F("cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)"),
    F("cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)"),
    F("cudaError_t cudaEventSynchronize(cudaEvent_t event)"),
    F("cudaError_t cudaEventQuery(cudaEvent_t event)"),
    F("cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)"),
    F("cudaError_t cudaEventDestroy(cudaEvent_t event)", event="destroy_event"),
    # --- execution ---
    F(
        "cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, "
        "void **args, size_t sharedMem, cudaStream_t stream)",
        func="func",
        args="args",
    ),
    F(
        "cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)",
        upper="custom",
        userData="userdata",
        doc="the callback runs on the shim's upper-half executor thread, in stream order",
    ),
    # ===== cudaapi: runtime coverage for real programs (docs/SIM.md "More of the runtime") =====
    # --- cudaapi: device attributes, limits, flags, peers (backends/sim/sim_attr.c) ---
    F(
        "cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)",
        device="device",
    ),
    F("cudaError_t cudaDeviceGetLimit(size_t *pValue, enum cudaLimit limit)"),
    F("cudaError_t cudaDeviceSetLimit(enum cudaLimit limit, size_t value)"),
    F("cudaError_t cudaDeviceGetCacheConfig(enum cudaFuncCache *pCacheConfig)"),
    F("cudaError_t cudaDeviceSetCacheConfig(enum cudaFuncCache cacheConfig)"),
    F("cudaError_t cudaDeviceGetSharedMemConfig(enum cudaSharedMemConfig *pConfig)"),
    F("cudaError_t cudaDeviceSetSharedMemConfig(enum cudaSharedMemConfig config)"),
    F("cudaError_t cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)"),
    F(
        "cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)",
        device="device",
        peerDevice="device",
    ),
    F(
        "cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)",
        peerDevice="device",
    ),
    F("cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)", peerDevice="device"),
    F(
        "cudaError_t cudaDeviceGetP2PAttribute(int *value, enum cudaDeviceP2PAttr attr, "
        "int srcDevice, int dstDevice)",
        srcDevice="device",
        dstDevice="device",
    ),
    F(
        "cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId)",
        pciBusId="host_ptr",
    ),
    F("cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)", device="device"),
    F("cudaError_t cudaSetDeviceFlags(unsigned int flags)"),
    F("cudaError_t cudaGetDeviceFlags(unsigned int *flags)"),
    F(
        "cudaError_t cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)",
        prop="host_ptr",
    ),
    F(
        "cudaError_t cudaInitDevice(int device, unsigned int deviceFlags, unsigned int flags)",
        device="device",
    ),
    F("cudaError_t cudaSetValidDevices(int *device_arr, int len)", device_arr="host_ptr"),
    F(
        "cudaError_t cudaDeviceFlushGPUDirectRDMAWrites("
        "enum cudaFlushGPUDirectRDMAWritesTarget target, "
        "enum cudaFlushGPUDirectRDMAWritesScope scope)"
    ),
    F("cudaError_t cudaCtxResetPersistingL2Cache(void)"),
    F(
        "cudaError_t cudaDeviceGetTexture1DLinearMaxWidth(size_t *maxWidthInElements, "
        "const struct cudaChannelFormatDesc *fmtDesc, int device)",
        fmtDesc="host_ptr",
        device="device",
    ),
    F(
        "cudaError_t cudaDeviceGetGraphMemAttribute(int device, "
        "enum cudaGraphMemAttributeType attr, "
        "void *value)",
        device="device",
    ),
    F(
        "cudaError_t cudaDeviceSetGraphMemAttribute(int device, "
        "enum cudaGraphMemAttributeType attr, "
        "void *value)",
        device="device",
        value="host_ptr",
    ),
    F("cudaError_t cudaDeviceGraphMemTrim(int device)", device="device"),
    F("cudaError_t cudaProfilerStart(void)", declared=False),
    F("cudaError_t cudaProfilerStop(void)", declared=False),
    F(
        "cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, "
        "unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus)",
        symbol="host_ptr",
        doc="refused: the sim has no driver API (cudaErrorNotSupported, a one-line note)",
    ),
    F(
        "cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, "
        "unsigned int cudaVersion, unsigned long long flags, "
        "enum cudaDriverEntryPointQueryResult *driverStatus)",
        symbol="host_ptr",
        cudaVersion="val",
    ),
    # --- cudaapi: kernel attributes and occupancy (backends/sim/sim_attr.c) ---
    F(
        "cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)",
        func="func",
    ),
    F(
        "cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, "
        "int value)",
        func="func",
    ),
    F(
        "cudaError_t cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)",
        func="func",
    ),
    F(
        "cudaError_t cudaFuncSetSharedMemConfig(const void *func, enum cudaSharedMemConfig config)",
        func="func",
    ),
    F("cudaError_t cudaFuncGetName(const char **name, const void *func)", func="func"),
    F(
        "cudaError_t cudaFuncGetParamInfo(const void *func, size_t paramIndex, "
        "size_t *paramOffset, size_t *paramSize)",
        func="func",
    ),
    F(
        "cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, "
        "const void *func, int blockSize, size_t dynamicSMemSize)",
        func="func",
    ),
    F(
        "cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, "
        "const void *func, int blockSize, size_t dynamicSMemSize, unsigned int flags)",
        func="func",
    ),
    F(
        "cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, "
        "const void *func, int numBlocks, int blockSize)",
        func="func",
    ),
    # --- cudaapi: stream priorities, flags, attributes (backends/sim/sim_attr.c) ---
    F(
        "cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, "
        "int priority)",
        doc="the priority is saved at a checkpoint and set again at a restart (shim_more.c)",
    ),
    F("cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int *priority)"),
    F("cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)"),
    F("cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)"),
    F(
        "cudaError_t cudaStreamGetAttribute(cudaStream_t hStream, cudaStreamAttrID attr, "
        "cudaStreamAttrValue *value_out)"
    ),
    F(
        "cudaError_t cudaStreamSetAttribute(cudaStream_t hStream, cudaStreamAttrID attr, "
        "const cudaStreamAttrValue *value)",
        value="host_ptr",
    ),
    F(
        "cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void *devPtr, size_t length, "
        "unsigned int flags)",
        devPtr="dev_ptr",
    ),
    F("cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)"),
    # --- cudaapi: managed-memory hints (backends/sim/sim_attr.c) ---
    F(
        "cudaError_t cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice, "
        "struct cudaMemLocation location)",
        devPtr="dev_ptr",
        location="val",
    ),
    F(
        "cudaError_t cudaMemPrefetchAsync(const void *devPtr, size_t count, "
        "struct cudaMemLocation location, unsigned int flags, cudaStream_t stream)",
        devPtr="dev_ptr",
        location="val",
    ),
    F(
        "cudaError_t cudaMemRangeGetAttribute(void *data, size_t dataSize, "
        "enum cudaMemRangeAttribute attribute, const void *devPtr, size_t count)",
        devPtr="dev_ptr",
    ),
    # --- cudaapi: registered host memory (sim_attr.c; the shim: upperhalf/cudart/shim_more.c) ---
    F(
        "cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)",
        upper="custom",
        ptr="host_ptr",
        doc="the shim remembers the range and registers it again at a restart",
    ),
    F("cudaError_t cudaHostUnregister(void *ptr)", upper="custom", ptr="host_ptr"),
    F(
        "cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)",
        pHost="host_ptr",
    ),
    F("cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)", pHost="host_ptr"),
    # --- cudaapi: calls made of other runtime calls (upperhalf/cudart/rt_compose.c) ---
    F(
        "cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)",
        upper="local",
        native="custom",
    ),
    F(
        "cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)",
        upper="local",
        native="custom",
        extent="val",
    ),
    F(
        "cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, "
        "size_t width, size_t height, enum cudaMemcpyKind kind)",
        upper="local",
        native="custom",
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, "
        "size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)",
        upper="local",
        native="custom",
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)",
        upper="local",
        native="custom",
        p="host_ptr",
    ),
    F(
        "cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)",
        upper="local",
        native="custom",
        p="host_ptr",
    ),
    F(
        "cudaError_t cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width, "
        "size_t height)",
        upper="local",
        native="custom",
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width, "
        "size_t height, cudaStream_t stream)",
        upper="local",
        native="custom",
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value, "
        "struct cudaExtent extent)",
        upper="local",
        native="custom",
        pitchedDevPtr="val",
        extent="val",
    ),
    F(
        "cudaError_t cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value, "
        "struct cudaExtent extent, cudaStream_t stream)",
        upper="local",
        native="custom",
        pitchedDevPtr="val",
        extent="val",
    ),
    F(
        "cudaError_t cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, "
        "size_t count)",
        upper="local",
        native="custom",
        dst="dev_ptr",
        src="dev_ptr",
        dstDevice="device",
        srcDevice="device",
    ),
    F(
        "cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, "
        "int srcDevice, size_t count, cudaStream_t stream)",
        upper="local",
        native="custom",
        dst="dev_ptr",
        src="dev_ptr",
        dstDevice="device",
        srcDevice="device",
    ),
    F(
        "cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, "
        "void *userData, unsigned int flags)",
        upper="local",
        native="custom",
        callback="hostfn",
        userData="userdata",
        doc="a cudaLaunchHostFunc whose closure passes the program's own stream handle",
    ),
    F(
        "cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, "
        "unsigned int flags)",
        upper="local",
        native="custom",
    ),
    F(
        "cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, "
        "void **args, size_t sharedMem, cudaStream_t stream)",
        upper="local",
        native="custom",
        func="func",
        args="args",
    ),
    # --- cudaapi: stream-ordered allocation and memory pools (upperhalf/cudart/rt_pool.c) ---
    F(
        "cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)",
        upper="local",
        native="custom",
        devPtr="out_dev_ptr",
        doc="pools are upper-half bookkeeping over cudaMalloc/cudaFree (saved with W)",
    ),
    F(
        "cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)",
        upper="local",
        native="custom",
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, "
        "cudaStream_t stream)",
        upper="local",
        native="custom",
        ptr="out_dev_ptr",
        memPool="val",
    ),
    F(
        "cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)",
        upper="local",
        native="custom",
        device="device",
    ),
    F(
        "cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)",
        upper="local",
        native="custom",
        device="device",
    ),
    F(
        "cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)",
        upper="local",
        native="custom",
        device="device",
        memPool="val",
    ),
    F(
        "cudaError_t cudaMemGetDefaultMemPool(cudaMemPool_t *memPool, "
        "struct cudaMemLocation *location, enum cudaMemAllocationType type)",
        upper="local",
        native="custom",
        location="host_ptr",
    ),
    F(
        "cudaError_t cudaMemGetMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location, "
        "enum cudaMemAllocationType type)",
        upper="local",
        native="custom",
        location="host_ptr",
    ),
    F(
        "cudaError_t cudaMemSetMemPool(struct cudaMemLocation *location, "
        "enum cudaMemAllocationType type, cudaMemPool_t memPool)",
        upper="local",
        native="custom",
        location="host_ptr",
        memPool="val",
    ),
    F(
        "cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, "
        "const struct cudaMemPoolProps *poolProps)",
        upper="local",
        native="custom",
        poolProps="host_ptr",
    ),
    F(
        "cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool)",
        upper="local",
        native="custom",
        memPool="val",
    ),
    F(
        "cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, "
        "void *value)",
        upper="local",
        native="custom",
        memPool="val",
        value="host_ptr",
    ),
    F(
        "cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, "
        "void *value)",
        upper="local",
        native="custom",
        memPool="val",
    ),
    F(
        "cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)",
        upper="local",
        native="custom",
        memPool="val",
    ),
    F(
        "cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, "
        "const struct cudaMemAccessDesc *descList, size_t count)",
        upper="local",
        native="custom",
        memPool="val",
        descList="host_ptr",
    ),
    F(
        "cudaError_t cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool, "
        "struct cudaMemLocation *location)",
        upper="local",
        native="custom",
        memPool="val",
        location="host_ptr",
    ),
    # --- cudaapi: CUDA graphs, captured and explicit (backends/sim/sim_graph.c) ---
    F(
        "cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)",
        upper="custom",
        doc="the shim counts captures (host functions captured stay valid)",
    ),
    F("cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)", upper="custom"),
    F(
        "cudaError_t cudaStreamIsCapturing(cudaStream_t stream, "
        "enum cudaStreamCaptureStatus *pCaptureStatus)"
    ),
    F("cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)"),
    F("cudaError_t cudaGraphDestroy(cudaGraph_t graph)", graph="destroy_graph"),
    F("cudaError_t cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph)"),
    F(
        "cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, "
        "unsigned long long flags)"
    ),
    F(
        "cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, "
        "unsigned long long flags)"
    ),
    F("cudaError_t cudaGraphExecGetFlags(cudaGraphExec_t graphExec, unsigned long long *flags)"),
    F("cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)"),
    F("cudaError_t cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)"),
    F("cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)", graphExec="destroy_gexec"),
    F(
        "cudaError_t cudaGraphAddEmptyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies)",
        pDependencies="host_ptr",
    ),
    F(
        "cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, "
        "const struct cudaKernelNodeParams *pNodeParams)",
        pDependencies="host_ptr",
        pNodeParams="host_ptr",
    ),
    F(
        "cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, void *dst, "
        "const void *src, size_t count, enum cudaMemcpyKind kind)",
        pDependencies="host_ptr",
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, "
        "const struct cudaMemsetParams *pMemsetParams)",
        pDependencies="host_ptr",
        pMemsetParams="host_ptr",
    ),
    F(
        "cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, "
        "const struct cudaHostNodeParams *pNodeParams)",
        upper="custom",
        pDependencies="host_ptr",
        pNodeParams="host_ptr",
        doc="the callback runs on the shim's executor thread, as cudaLaunchHostFunc's",
    ),
    F(
        "cudaError_t cudaGraphAddChildGraphNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, cudaGraph_t childGraph)",
        pDependencies="host_ptr",
    ),
    F("cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)"),
    F(
        "cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes, "
        "size_t *pNumRootNodes)"
    ),
    F(
        "cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)",
        node="val",
    ),
    F(
        "cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node, "
        "struct cudaKernelNodeParams *pNodeParams)",
        node="val",
    ),
    F(
        "cudaError_t cudaGraphMemsetNodeGetParams(cudaGraphNode_t node, "
        "struct cudaMemsetParams *pNodeParams)",
        node="val",
    ),
    # --- cudaapi: more graph calls (backends/sim/sim_graph.c) ---
    F(
        "cudaError_t cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from, "
        "const cudaGraphNode_t *to, const cudaGraphEdgeData *edgeData, size_t numDependencies)",
    ),
    F("cudaError_t cudaGraphDestroyNode(cudaGraphNode_t node)", node="val"),
    F(
        "cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node, "
        "const struct cudaKernelNodeParams *pNodeParams)",
        node="val",
        pNodeParams="host_ptr",
    ),
    F(
        "cudaError_t cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, "
        "cudaGraphNode_t node, const struct cudaKernelNodeParams *pNodeParams)",
        node="val",
        pNodeParams="host_ptr",
    ),
    F(
        "cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph, "
        "cudaGraphExecUpdateResultInfo *resultInfo)"
    ),
    F(
        "cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, "
        "cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams)",
        doc="the upload stream is not used (nothing to upload)",
    ),
    F(
        "cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, "
        "const cudaGraphNode_t *pDependencies, size_t numDependencies, "
        "const struct cudaMemcpy3DParms *pCopyParams)",
        pDependencies="host_ptr",
        pCopyParams="host_ptr",
    ),
    # --- cudaapi: clusters, launches with attributes, more composed calls ---
    F(
        "cudaError_t cudaOccupancyMaxPotentialClusterSize(int *clusterSize, const void *func, "
        "const cudaLaunchConfig_t *launchConfig)",
        func="func",
        launchConfig="host_ptr",
    ),
    F(
        "cudaError_t cudaOccupancyMaxActiveClusters(int *numClusters, const void *func, "
        "const cudaLaunchConfig_t *launchConfig)",
        func="func",
        launchConfig="host_ptr",
    ),
    F(
        "cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, "
        "void **args)",
        upper="local",
        native="custom",
        config="host_ptr",
        func="func",
        args="args",
    ),
    F(
        "cudaError_t cudaMemRangeGetAttributes(void **data, size_t *dataSizes, "
        "enum cudaMemRangeAttribute *attributes, size_t numAttributes, const void *devPtr, "
        "size_t count)",
        upper="local",
        native="custom",
        dataSizes="host_ptr",
        attributes="host_ptr",
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)",
        upper="local",
        native="custom",
        p="host_ptr",
    ),
    F(
        "cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, "
        "cudaStream_t stream)",
        upper="local",
        native="custom",
        p="host_ptr",
    ),
    # --- nvcc's registration and launch-configuration entry points (crt/host_runtime.h) ---
    F(
        "void **__cudaRegisterFatBinary(void *fatCubin)",
        upper="custom",
        declared=False,
        fatCubin="host_ptr",
    ),
    F(
        "void __cudaRegisterFatBinaryEnd(void **fatCubinHandle)",
        upper="custom",
        declared=False,
        fatCubinHandle="module",
    ),
    F(
        "void __cudaUnregisterFatBinary(void **fatCubinHandle)",
        upper="custom",
        declared=False,
        fatCubinHandle="module",
    ),
    F(
        "void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, "
        "char *deviceFun, const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, "
        "dim3 *bDim, dim3 *gDim, int *wSize)",
        upper="custom",
        declared=False,
        fatCubinHandle="module",
        hostFun="func",
        deviceFun="host_ptr",
        deviceName="host_ptr",
        tid="host_ptr",
        bid="host_ptr",
        bDim="host_ptr",
        gDim="host_ptr",
        wSize="host_ptr",
    ),
    F(
        "unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, "
        "struct CUstream_st *stream)",
        upper="local",
        declared=False,
        stream="val",
        sticky_exempt=True,
        doc="per-thread launch configuration: kept in the calling half",
    ),
    F(
        "cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, "
        "size_t *sharedMem, void *stream)",
        upper="local",
        declared=False,
        sticky_exempt=True,
    ),
    # --- nvcc-built programs (CUDA 13): launches, __device__/__constant__/__managed__ variables,
    # symbols, and the --default-stream per-thread variants. Kernels come from a kernels library
    # built by `crac kernels` (docs/SIM.md "Programs built by nvcc"). ---
    F(
        "cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)",
        upper="local",
        declared=False,
        hostFun="func",
        sticky_exempt=True,
        doc="the kernel handle is the host function's address (stable across a restart)",
    ),
    F(
        "cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, "
        "void **args, size_t sharedMem, cudaStream_t stream)",
        declared=False,
        kernel="func",
        args="args",
    ),
    F(
        "cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, "
        "void **args, size_t sharedMem, cudaStream_t stream)",
        declared=False,
        kernel="func",
        args="args",
    ),
    F(
        "char __cudaInitModule(void **fatCubinHandle)",
        upper="local",
        declared=False,
        fatCubinHandle="module",
        sticky_exempt=True,
        doc="managed variables are bound at registration: nothing left to do",
    ),
    F(
        "void __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, "
        "const char *deviceName, int ext, size_t size, int constant, int global)",
        upper="custom",
        native="custom",
        declared=False,
        fatCubinHandle="module",
        hostVar="host_ptr",
        deviceAddress="host_ptr",
        deviceName="host_ptr",
        extras=CRAC_ADDR,
        doc="the variable lives in device memory crac assigns (saved at a checkpoint)",
    ),
    F(
        "void __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, "
        "char *deviceAddress, const char *deviceName, int ext, size_t size, int constant, "
        "int global)",
        upper="custom",
        native="custom",
        declared=False,
        fatCubinHandle="module",
        hostVarPtrAddress="out",
        deviceAddress="host_ptr",
        deviceName="host_ptr",
        extras=CRAC_ADDR,
    ),
    F(
        "cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind)",
        symbol="host_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind)",
        dst="dev_ptr",
        symbol="host_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)",
        symbol="host_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind, cudaStream_t stream)",
        dst="dev_ptr",
        symbol="host_ptr",
    ),
    F("cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)", symbol="host_ptr"),
    F("cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)", symbol="host_ptr"),
    F(
        "cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, "
        "void **args, size_t sharedMem, cudaStream_t stream)",
        declared=False,
        func="func",
        args="args",
    ),
    F(
        "cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, "
        "enum cudaMemcpyKind kind)",
        declared=False,
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, "
        "enum cudaMemcpyKind kind, cudaStream_t stream)",
        declared=False,
        dst="dev_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)",
        declared=False,
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, "
        "cudaStream_t stream)",
        declared=False,
        devPtr="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind)",
        declared=False,
        symbol="host_ptr",
        src="dev_ptr",
    ),
    F(
        "cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, "
        "size_t offset, enum cudaMemcpyKind kind)",
        declared=False,
        dst="dev_ptr",
        symbol="host_ptr",
    ),
    F("cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)", declared=False),
)

BY_NAME: dict[str, Func] = {f.name: f for f in SPEC}

SUPPORTED: frozenset[str] = frozenset(BY_NAME)
