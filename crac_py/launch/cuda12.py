"""Programs linked to CUDA 12's libcudart.so.12 (docs/CUDA.md "CUDA 12"): the loader preloads
crac's CUDA 12 layer (shim/libcudart.so.12) after the 13 shim, and preflight checks the program's
CUDA imports against what that layer exports."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from crac_py import paths

SONAME = "libcudart.so.12"


class Cuda12Missing(Exception):
    """crac was built without CUDA 12's headers: there is no libcudart.so.12 layer."""


def shim_args(needed: Sequence[str]) -> list[str]:
    """The loader's `--cudart-shim libcudart.so.12` for a program that links it."""
    return ["--cudart-shim", SONAME] if SONAME in needed else []


@cache
def supported() -> frozenset[str]:
    """The functions crac's libcudart.so.12 exports (read from the built layer)."""
    from crac_py.codegen.generate import CodegenError, read_lib

    path = paths.native_dir() / "shim" / SONAME
    if not path.is_file():
        raise Cuda12Missing(
            f"crac was built without CUDA 12 ({path} is missing); pip install "
            "'nvidia-cuda-runtime-cu12>=12,<13' and reinstall crac-py"
        )
    try:
        return frozenset(read_lib(path).exports)
    except CodegenError as exc:
        raise Cuda12Missing(f"cannot read {path}: {exc}; reinstall crac-py") from None


def image_runtime_major(manifest: dict) -> str | None:
    """The CUDA major version an image taken on the cuda backend ran on (its manifest's
    `backend.version`, "runtime 12.9 driver ..."), so that a restart loads the same runtime
    unless --cuda-runtime says otherwise; None when the image does not say."""
    backend = manifest.get("backend")
    version = backend.get("version") if isinstance(backend, dict) else None
    if not isinstance(version, str) or not version.startswith("runtime "):
        return None
    major = version.split()[1].split(".")[0]
    return major if major.isdigit() and major != "0" else None
