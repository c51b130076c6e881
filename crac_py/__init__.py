"""crac: transparent checkpoint/restart for GPU programs (CRAC split-process design)."""

from __future__ import annotations

from pathlib import Path


def version() -> str:
    """crac's version. Its one source is pyproject.toml: the installed package's metadata, or in a
    source tree not installed, the file itself; build_native.py gives the loader the same string
    (crac_version.h, recorded in every image's MANIFEST.json)."""
    # Imported here, not at module level: importlib.metadata costs tens of milliseconds, which
    # `crac launch` would add to every program's start (docs/DECISIONS.md).
    from importlib import metadata

    try:
        return metadata.version("crac-py")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        with pyproject.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])


def __getattr__(name: str) -> str:
    # `crac_py.__version__` stays available, computed only when asked for (PEP 562).
    if name == "__version__":
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
