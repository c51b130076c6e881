"""The generated libcudart shim matches NVIDIA's libcudart.so.13: same soname, every supported
function exported under the same version node; the coverage number is reported."""

from __future__ import annotations

import subprocess
import sys

from conftest import native_dir, require_native

from crac_py.codegen import cuda_spec
from crac_py.codegen import generate as codegen
from crac_py.codegen.cudart_locate import find_cuda

REQUIRED = {
    "cudaGetDeviceCount",
    "cudaSetDevice",
    "cudaGetDevice",
    "cudaGetDeviceProperties",
    "cudaDeviceSynchronize",
    "cudaDeviceReset",
    "cudaDriverGetVersion",
    "cudaRuntimeGetVersion",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaGetErrorString",
    "cudaGetErrorName",
    "cudaMalloc",
    "cudaFree",
    "cudaMemcpy",
    "cudaMemcpyAsync",
    "cudaMemset",
    "cudaMemsetAsync",
    "cudaMallocHost",
    "cudaFreeHost",
    "cudaHostAlloc",
    "cudaMallocManaged",
    "cudaMemGetInfo",
    "cudaPointerGetAttributes",
    "cudaStreamCreate",
    "cudaStreamCreateWithFlags",
    "cudaStreamDestroy",
    "cudaStreamSynchronize",
    "cudaStreamQuery",
    "cudaStreamWaitEvent",
    "cudaEventCreate",
    "cudaEventCreateWithFlags",
    "cudaEventRecord",
    "cudaEventSynchronize",
    "cudaEventQuery",
    "cudaEventElapsedTime",
    "cudaEventDestroy",
    "cudaLaunchKernel",
    "cudaLaunchHostFunc",
    "__cudaRegisterFatBinary",
    "__cudaRegisterFatBinaryEnd",
    "__cudaRegisterFunction",
    "__cudaUnregisterFatBinary",
    "__cudaPushCallConfiguration",
    "__cudaPopCallConfiguration",
}


def test_spec_covers_required_functions():
    assert REQUIRED <= cuda_spec.SUPPORTED
    assert cuda_spec.SUPPORTED == {f.name for f in cuda_spec.SPEC}


def test_shim_and_native_match_real_libcudart():
    require_native()
    real = codegen.read_lib(find_cuda().libcudart)
    for rel in ("shim/libcudart.so.13", "native/libcudart.so.13"):
        ours = codegen.read_lib(native_dir() / rel)
        assert ours.soname == real.soname == "libcudart.so.13", rel
        for name in sorted(cuda_spec.SUPPORTED):
            assert name in ours.exports, f"{rel} does not export {name}"
            assert ours.exports[name] == real.exports[name], (
                f"{rel}: {name}@{ours.exports[name]}, NVIDIA's is @{real.exports[name]}"
            )
        cuda_exports = {n for n in ours.exports if n.startswith(("cuda", "__cuda"))}
        assert cuda_exports == cuda_spec.SUPPORTED, rel


def test_coverage_reported():
    res = subprocess.run(
        [sys.executable, "-m", "crac_py.codegen.generate", "--coverage"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    real = codegen.read_lib(find_cuda().libcudart)
    expected = f"coverage: {len(cuda_spec.SUPPORTED)}/{len(real.exports)} functions"
    assert res.stdout.startswith(expected), res.stdout
