"""Building programs for the simulated CUDA device: tests/apps/sim_*.c and examples/.

They include the real cuda_runtime_api.h and crac_sim.h and link against crac's native sim
libcudart.so.13 (crac_py.codegen.sim_toolchain); sim_unsupported* link against NVIDIA's
libcudart.so.13 instead, so that they import functions crac does not support. A missing piece
FAILS the tests that need it (never a skip): it is a build or install bug.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

APPS_DIR = Path(__file__).resolve().parent / "apps"
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = ("vector_add", "multistream", "jacobi", "threads")
CFLAGS = ("-O2", "-std=c11", "-Wall", "-Wextra", "-Werror")
# Linked against NVIDIA's libcudart: (name, shared library?)
REAL_CUDART = {"sim_unsupported": False, "sim_unsupported_lib": True}


def _toolchain():
    try:
        from crac_py.codegen import sim_toolchain
    except ImportError as exc:
        pytest.fail(f"crac_py is not importable ({exc}); install it with `pip install .`")
    return sim_toolchain


def _build_real(src: Path, out: Path, shared: bool) -> Path:
    from crac_py.codegen.cudart_locate import find_cuda

    cuda = find_cuda()
    libdir = cuda.libcudart.parent
    cmd = ["gcc", *CFLAGS, f"-I{cuda.include_dir}"]
    if shared:
        cmd += ["-shared", "-fPIC"]
    cmd += [str(src), "-o", str(out), f"-L{libdir}", "-l:libcudart.so.13"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"cannot build {src.name}:\n{shlex.join(cmd)}\n{res.stderr}")
    return out


def build_sim_apps(out_dir: Path) -> dict[str, Path]:
    tc = _toolchain()
    built: dict[str, Path] = {}
    for src in sorted(APPS_DIR.glob("sim_*.c")):
        name = src.stem
        try:
            if name in REAL_CUDART:
                shared = REAL_CUDART[name]
                out = out_dir / (f"lib{name}.so" if shared else name)
                built[name] = _build_real(src, out, shared)
            else:
                built[name] = tc.build(src, out_dir / name, ("-lm",))
        except (tc.ToolchainError, RuntimeError) as exc:
            pytest.fail(f"cannot build {src.name}: {exc}")
    return built


@pytest.fixture(scope="session")
def sim_apps(tmp_path_factory) -> dict[str, Path]:
    """tests/apps/sim_*.c compiled against the native sim libcudart, by source stem."""
    return build_sim_apps(tmp_path_factory.mktemp("sim_apps"))


@pytest.fixture(scope="session")
def examples(tmp_path_factory) -> dict[str, Path]:
    """examples/*.c compiled as examples/Makefile does (same flags, same library)."""
    tc = _toolchain()
    out_dir = tmp_path_factory.mktemp("examples")
    built: dict[str, Path] = {}
    for name in EXAMPLES:
        try:
            built[name] = tc.build(EXAMPLES_DIR / f"{name}.c", out_dir / name, ("-lm",))
        except tc.ToolchainError as exc:
            pytest.fail(f"cannot build example {name}: {exc}")
    return built
