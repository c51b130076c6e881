"""Find the CUDA runtime headers and the real libcudart.so.13 (for its soname and symbol versions).

Searched in this order; the first place that has both `cuda_runtime_api.h` (with its `crt/`
headers) and `libcudart.so.13` wins:

1. `$CUDA_HOME` (or `$CUDA_PATH`): `include/` and `lib64/` (or `lib/`)
2. `/usr/local/cuda`
3. the PyPI wheels `nvidia-cuda-runtime` + `nvidia-cuda-crt` on sys.path: `nvidia/cu13/include`,
   `nvidia/cu13/lib` (CUDA 13 layout), or the older `nvidia/cuda_runtime/{include,lib}` layout.

`CRAC_CUDA_SEARCH` restricts the search to a comma-separated subset of `cuda_home,system,wheel`
(e.g. `CRAC_CUDA_SEARCH=wheel` to prove a build works on a machine without a CUDA toolkit).
"""

from __future__ import annotations

import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

CUDART_SONAME = "libcudart.so.13"
SEARCH_ENV = "CRAC_CUDA_SEARCH"
SOURCES = ("cuda_home", "system", "wheel")
_WHEEL_LAYOUTS = (
    ("nvidia/cu13/include", "nvidia/cu13/lib"),
    ("nvidia/cuda_runtime/include", "nvidia/cuda_runtime/lib"),
)


class CudaNotFoundError(RuntimeError):
    """No CUDA headers + libcudart.so.13 were found; the message says where we looked."""


@dataclass(frozen=True)
class CudaRuntime:
    include_dir: Path
    libcudart: Path
    source: str  # "cuda_home", "system" or "wheel"

    @property
    def header(self) -> Path:
        return self.include_dir / "cuda_runtime_api.h"


def _candidate(include: Path, libdirs: list[Path], source: str) -> CudaRuntime | None:
    if not (include / "cuda_runtime_api.h").is_file():
        return None
    if not (include / "crt" / "host_defines.h").is_file():
        return None  # the runtime wheel alone lacks crt/: nvidia-cuda-crt provides it
    for d in libdirs:
        lib = d / CUDART_SONAME
        if lib.is_file():
            return CudaRuntime(include.resolve(), lib.resolve(), source)
    return None


def _site_dirs() -> list[Path]:
    dirs: list[Path] = []
    entries = list(sys.path)
    try:
        entries += site.getsitepackages()
    except AttributeError:  # some embedded/virtualenv pythons lack it
        pass
    try:
        entries.append(site.getusersitepackages())
    except AttributeError:
        pass
    for e in entries:
        p = Path(e or ".")
        if p not in dirs:
            dirs.append(p)
    return dirs


def candidates(source: str) -> list[tuple[Path, list[Path]]]:
    """(include dir, lib dirs) pairs to try for one source."""
    if source == "cuda_home":
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        if not home:
            return []
        h = Path(home)
        return [(h / "include", [h / "lib64", h / "lib"])]
    if source == "system":
        h = Path("/usr/local/cuda")
        return [(h / "include", [h / "lib64", h / "lib"])]
    found: list[tuple[Path, list[Path]]] = []
    for sp in _site_dirs():
        for inc, lib in _WHEEL_LAYOUTS:
            found.append((sp / inc, [sp / lib]))
    return found


def search_order() -> tuple[str, ...]:
    wanted = os.environ.get(SEARCH_ENV, "").strip()
    if not wanted:
        return SOURCES
    order = tuple(s.strip() for s in wanted.split(",") if s.strip())
    bad = [s for s in order if s not in SOURCES]
    if bad:
        raise CudaNotFoundError(
            f"{SEARCH_ENV}={wanted!r} names unknown sources {bad}; use: {', '.join(SOURCES)}"
        )
    return order


def find_cuda() -> CudaRuntime:
    """The CUDA runtime headers and libcudart.so.13 to build and check against."""
    tried: list[str] = []
    for source in search_order():
        for include, libdirs in candidates(source):
            got = _candidate(include, libdirs, source)
            if got is not None:
                return got
            if source != "wheel" or include.parent.is_dir():
                tried.append(str(include))
    raise CudaNotFoundError(
        "CUDA 13 runtime headers and libcudart.so.13 not found (looked in "
        + (", ".join(tried) or "nothing")
        + "); install the wheels: pip install 'nvidia-cuda-runtime>=13,<14' "
        "'nvidia-cuda-crt>=13,<14', or set CUDA_HOME to a CUDA 13 toolkit"
    )
