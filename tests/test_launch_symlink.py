"""A program started through a symlink (as /usr/bin/java leads to the JDK): its RUNPATH $ORIGIN
finds the library next to the real file, and /proc/self/exe, read or executed, leads to the real
program rather than crac's loader (docs/DECISIONS.md), through two checkpoint/restart cycles."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ckpt_harness import run_cycles
from conftest import APPS_DIR, CFLAGS


def build(tmp_path: Path) -> Path:
    """real/self_exe + real/libselfexe.so (RUNPATH $ORIGIN); returns links/app -> real/self_exe."""
    real = tmp_path / "real"
    links = tmp_path / "links"
    real.mkdir(parents=True)
    links.mkdir(parents=True)
    src = APPS_DIR / "self_exe"
    lib = real / "libselfexe.so"
    subprocess.run(
        ["gcc", *CFLAGS, "-shared", "-fPIC", "-o", str(lib), str(src / "self_exe_lib.c")],
        check=True,
        timeout=120,
    )
    prog = real / "self_exe"
    subprocess.run(
        [
            "gcc",
            *CFLAGS,
            "-o",
            str(prog),
            str(src / "self_exe.c"),
            f"-L{real}",
            "-lselfexe",
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN",
        ],
        check=True,
        timeout=120,
    )
    link = links / "app"
    link.symlink_to(prog)
    return link


def test_symlinked_program_through_two_cycles(tmp_path: Path) -> None:
    link = build(tmp_path / "build")
    run_cycles(link, ["40"], tmp_path, cycles=2)
