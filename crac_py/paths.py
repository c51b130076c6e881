"""Where the native parts built by build_native.py live.

Normally crac_py/_native next to this file. When the source tree shadows an installed copy
(`python -m crac_py` or pytest run from a clone after `pip install .`), the source tree has no
_native/, so the installed distribution's crac_py/_native is used. CRAC_NATIVE_DIR overrides both.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

NATIVE_DIR_ENV = "CRAC_NATIVE_DIR"
LOADER_NAME = "crac-loader"
UPPER_RUNTIME_NAME = "libcrac-upper.so"


class NativeMissingError(RuntimeError):
    """A native part is not built."""


def _other_native_dirs(primary: Path) -> list[Path]:
    """crac_py/_native of other copies of the package on sys.path (an installed one)."""
    found: list[Path] = []
    for entry in [*sys.path, *site.getsitepackages()]:
        candidate = Path(entry or ".").resolve() / "crac_py" / "_native"
        if candidate != primary and candidate not in found and candidate.is_dir():
            found.append(candidate)
    return found


def native_dirs() -> list[Path]:
    """Directories searched for native parts, in order."""
    override = os.environ.get(NATIVE_DIR_ENV)
    if override:
        return [Path(override)]
    primary = Path(__file__).resolve().parent / "_native"
    return [primary, *_other_native_dirs(primary)]


def native_dir() -> Path:
    """The first directory that holds the loader (else the first searched)."""
    dirs = native_dirs()
    return next((d for d in dirs if (d / LOADER_NAME).is_file()), dirs[0])


def _require(name: str) -> Path:
    dirs = native_dirs()
    for d in dirs:
        if (d / name).is_file():
            return d / name
    raise NativeMissingError(
        f"native parts not built ({dirs[0] / name} is missing); run pip install ."
    )


def loader() -> Path:
    """The lower-half loader executable."""
    return _require(LOADER_NAME)


def upper_runtime() -> Path:
    """The upper runtime preloaded into the application."""
    return _require(UPPER_RUNTIME_NAME)
