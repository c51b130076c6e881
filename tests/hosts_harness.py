"""Hosts for the multi-host tests (docs/HOSTS.md): network namespaces on this machine
(bench/_netns.py), and what a batch script does with node-local images. Tests skip, saying why,
where namespaces cannot be made (not root)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from _netns import Hosts, NetnsUnavailable  # noqa: E402

__all__ = ["Hosts", "make_hosts", "copy_process_dir", "script_copy", "tree_of"]


def make_hosts(n: int) -> Hosts:
    """N hosts, or the test skipped with the reason they cannot be made here."""
    try:
        return Hosts(n)
    except NetnsUnavailable as exc:
        pytest.skip(str(exc))


def copy_process_dir(gen: Path, dest_dir: Path) -> None:
    """What a batch script does with node-local images: the process directory of GEN copied
    into DEST_DIR (links kept as links: `latest` stays relative)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(gen.parent, dest_dir / gen.parent.name, symlinks=True, dirs_exist_ok=True)


def script_copy(script: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / script.name
    shutil.copy2(script, out)
    return out


def tree_of(path: Path) -> str:
    return "\n".join(str(p) for p in sorted(Path(path).rglob("*"))) if Path(path).exists() else ""
