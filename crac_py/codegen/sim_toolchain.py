"""Compiler and linker flags for programs that use the CUDA runtime API with sim kernels.

Such programs include the real `cuda_runtime_api.h` (crac_py.codegen.cudart_locate) and crac's
`crac_sim.h`, and link against the native sim `libcudart.so.13` (built by build_native.py into
crac_py/_native/native/). Under `crac launch` the shim libcudart takes that library's place.

    python -m crac_py.codegen.sim_toolchain --cflags | --libs | --cuda-include | --crac-include |
                                    --cudart-dir
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from crac_py import paths
from crac_py.codegen.cudart_locate import CudaNotFoundError, find_cuda

CUDART = "libcudart.so.13"


class ToolchainError(RuntimeError):
    """Something needed to build a sim program is missing; the message names the fix."""


def cudart_dir() -> Path:
    """Directory of the native sim libcudart.so.13."""
    d = paths.native_dir() / "native"
    if not (d / CUDART).is_file():
        raise ToolchainError(f"the native sim {d / CUDART} is not built; run pip install .")
    return d


def crac_include_dir() -> Path:
    """Directory holding crac_sim.h (installed next to the native parts)."""
    d = paths.native_dir() / "include"
    if not (d / "crac_sim.h").is_file():
        src = Path(__file__).resolve().parent.parent / "include"
        if (src / "crac_sim.h").is_file():
            return src
        raise ToolchainError(f"{d / 'crac_sim.h'} is missing; run pip install .")
    return d


def cuda_include_dir() -> Path:
    try:
        return find_cuda().include_dir
    except CudaNotFoundError as exc:
        raise ToolchainError(str(exc)) from None


def cflags() -> list[str]:
    return [f"-I{cuda_include_dir()}", f"-I{crac_include_dir()}"]


def libs() -> list[str]:
    d = cudart_dir()
    return [f"-L{d}", f"-l:{CUDART}", f"-Wl,-rpath,{d}", "-pthread"]


def build(src: Path, out: Path, extra_libs: tuple[str, ...] = ()) -> Path:
    """gcc -O2 -std=c11 -Wall -Wextra -Werror SRC -o OUT with the sim flags, then extra_libs."""
    cmd = [
        "gcc",
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        *cflags(),
        str(src),
        "-o",
        str(out),
        *libs(),
        "-ldl",
        *extra_libs,
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise ToolchainError(f"cannot build {src}:\n{shlex.join(cmd)}\n{res.stderr}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m crac_py.codegen.sim_toolchain")
    for opt in ("--cflags", "--libs", "--cuda-include", "--crac-include", "--cudart-dir"):
        ap.add_argument(opt, action="store_true")
    ns = ap.parse_args(argv)
    try:
        out: list[str] = []
        if ns.cflags:
            out += cflags()
        if ns.libs:
            out += libs()
        if ns.cuda_include:
            out.append(str(cuda_include_dir()))
        if ns.crac_include:
            out.append(str(crac_include_dir()))
        if ns.cudart_dir:
            out.append(str(cudart_dir()))
    except ToolchainError as exc:
        print(f"crac sim toolchain: error: {exc}", file=sys.stderr)
        return 2
    print(shlex.join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
