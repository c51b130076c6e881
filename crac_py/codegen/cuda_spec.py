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
    }
)
HANDLE_KINDS = {
    "stream": "stream",
    "out_stream": "stream",
    "destroy_stream": "stream",
    "event": "event",
    "out_event": "event",
    "destroy_event": "event",
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
