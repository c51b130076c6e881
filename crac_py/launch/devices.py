"""What device backends this machine can use: the CUDA driver, GPUs and CUDA runtimes."""

from __future__ import annotations

import ctypes.util
import glob
import os
import site
import sys
from pathlib import Path

from crac_py import paths

BACKENDS = ("sim", "cuda")
NVIDIACTL = "/dev/nvidiactl"
_LIBCUDA = "libcuda.so.1"
_LIBCUDA_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/cuda/compat",
    "/usr/lib/wsl/lib",
)


class DeviceError(RuntimeError):
    """The requested backend cannot run here; the message names the fix."""


def find_libcuda() -> str | None:
    """Path (or ldconfig name) of the CUDA driver library, or None."""
    for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":") + list(_LIBCUDA_DIRS):
        if directory and os.path.exists(os.path.join(directory, _LIBCUDA)):
            return os.path.join(directory, _LIBCUDA)
    return ctypes.util.find_library("cuda")


def gpu_nodes() -> list[str]:
    """The /dev/nvidiaN device nodes, one per GPU."""
    return sorted(p for p in glob.glob("/dev/nvidia[0-9]*") if p[len("/dev/nvidia") :].isdigit())


def cuda_available() -> bool:
    """A CUDA driver and at least one GPU are present."""
    return os.path.exists(NVIDIACTL) and find_libcuda() is not None


def cuda_runtime_dirs() -> list[Path]:
    """Directories that may hold a libcudart.so.N: CUDA toolkits and the nvidia-* pip wheels."""
    dirs: list[Path] = []
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        dirs.append(Path(cuda_home) / "lib64")
    dirs.append(Path("/usr/local/cuda/lib64"))
    site_dirs = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for sp in site_dirs:
        if sp:
            # CUDA 12 wheels: nvidia/cuda_runtime/lib; CUDA 13 wheels: nvidia/cu13/lib
            dirs.append(Path(sp) / "nvidia" / "cuda_runtime" / "lib")
            dirs.append(Path(sp) / "nvidia" / "cu13" / "lib")
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def cuda_runtimes() -> list[Path]:
    """Every libcudart.so.* found in cuda_runtime_dirs() (real files and symlinks alike)."""
    found: list[Path] = []
    for d in cuda_runtime_dirs():
        found.extend(sorted(d.glob("libcudart.so.*")))
    return found


def usable_backends() -> list[str]:
    backends: list[str] = []
    try:
        paths.loader()
    except paths.NativeMissingError:
        return backends
    backends.append("sim")
    if cuda_available() and gpu_nodes():
        backends.append("cuda")
    return backends


def resolve_device(requested: str, uses_cuda: bool = True) -> str:
    """Turn sim|cuda|auto into the backend to load.

    auto: none for a program that imports no CUDA function (no backend is loaded, which keeps
    start-up cheap), else cuda when a GPU is usable, else sim.
    """
    if requested == "sim":
        return "sim"
    has_cuda = cuda_available()
    if requested == "auto":
        if not uses_cuda:
            return "none"
        return "cuda" if has_cuda else "sim"
    if requested == "cuda":
        # Without a driver the real runtime still loads and answers every call the way it does
        # natively (cudaErrorInsufficientDriver): the program sees what it would see without crac.
        return "cuda"
    raise DeviceError(f"unknown device {requested!r}; use one of: sim, cuda, auto")


DEFAULT_CUDA_MAJOR = "13"


def find_cuda_runtime(spec: str | None) -> Path:
    """NVIDIA's libcudart for --device cuda: SPEC is a path or a major version (12, 13)."""
    spec = spec or DEFAULT_CUDA_MAJOR
    if not spec.isdigit():
        path = Path(spec)
        if not path.is_file():
            raise DeviceError(
                f"--cuda-runtime {spec}: no such file (a libcudart.so.N, or 12 or 13)"
            )
        if ".so." not in path.name:
            raise DeviceError(
                f"--cuda-runtime {spec}: not a libcudart.so.N "
                "(the soname's version picks the backend)"
            )
        return path
    for d in cuda_runtime_dirs():
        candidate = d / f"libcudart.so.{spec}"
        if candidate.is_file():
            return candidate
    wheel = "nvidia-cuda-runtime" if spec == "13" else f"nvidia-cuda-runtime-cu{spec}"
    raise DeviceError(
        f"no libcudart.so.{spec} found (looked in CUDA_HOME, /usr/local/cuda and the nvidia-* "
        f"wheels); install it (pip install {wheel}) or name it with --cuda-runtime PATH"
    )


def cuda_backend_note() -> str | None:
    """None when the cuda backend can drive a GPU here, else why not (for crac doctor)."""
    if not os.path.exists(NVIDIACTL):
        return f"no NVIDIA driver ({NVIDIACTL} missing)"
    if find_libcuda() is None:
        return "libcuda.so.1 (the driver library) not found"
    if not gpu_nodes():
        return "no GPU (/dev/nvidiaN)"
    return None
