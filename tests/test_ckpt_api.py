"""The C API of include/crac.h: a program checkpoints itself, and after a restart the call it
was in returns CRAC_AFTER_RESTART with the generation counter where the image left it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import CFLAGS, DEFAULT_TIMEOUT, crac_cmd, require_native

REPO = Path(__file__).resolve().parent.parent
ROUND_RE = re.compile(r"^round (\d+): result (\d+) generation (\d+) -> (\d+)$")


def build(tmp_path: Path) -> Path:
    out = tmp_path / "ckpt_api"
    subprocess.run(
        ["gcc", *CFLAGS, "-o", str(out), str(REPO / "tests" / "apps" / "ckpt_api.c")],
        check=True,
        timeout=120,
    )
    return out


def rounds(stdout: str) -> list[tuple[int, int, int, int]]:
    found = [ROUND_RE.match(line) for line in stdout.splitlines()]
    return [tuple(int(g) for g in m.groups()) for m in found if m]  # type: ignore[misc]


def test_program_checkpoints_itself_and_learns_it_was_restarted(tmp_path: Path) -> None:
    require_native()
    app = build(tmp_path)
    native = subprocess.run([str(app)], capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
    assert native.stdout == "not under crac\n"

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    cmd = [*crac_cmd(), "launch", "-c", str(ckpt), "--keep", "5", "--", str(app), "3"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
    assert first.returncode == 0, first.stderr
    assert rounds(first.stdout) == [(1, 1, 0, 1), (2, 1, 1, 2), (3, 1, 2, 3)]
    assert first.stdout.endswith("DONE\n")

    (proc,) = ckpt.glob("ckpt_*")
    # Restart from generation 2: the program was inside round 2's dmtcp_checkpoint().
    again = subprocess.run(
        [*crac_cmd(), "restart", str(proc / "gen-000002")],
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
    )
    assert again.returncode == 0, again.stderr
    assert rounds(again.stdout) == [(2, 2, 1, 2), (3, 1, 2, 3)]
    assert again.stdout.endswith("DONE\n")
