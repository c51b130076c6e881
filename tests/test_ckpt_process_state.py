"""Process state beside memory that a restart must bring back right (docs/DECISIONS.md, "Ids,
clocks, limits and cancellation after a restart"): calls that take the pid or a tid the program
knows, CPU-time clocks, glibc's cancellation and setxid signals, resource limits. Each program
goes through two checkpoint -> SIGKILL -> restart cycles and checks itself at every step."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR, CFLAGS

# name -> its arguments. Each runs ~2-4 s natively.
PROGRAMS: dict[str, list[str]] = {
    "ckpt_cpuclock": [],
    "ckpt_tid_calls": [],
    "ckpt_cancel": [],
}


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out_dir = tmp_path_factory.mktemp("process_state_apps")
    built = {}
    for name in PROGRAMS:
        exe = out_dir / name
        cmd = ["gcc", *CFLAGS, "-o", str(exe), str(APPS_DIR / f"{name}.c")]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"cannot build {name}.c:\n{' '.join(cmd)}\n{res.stderr}")
        built[name] = exe
    return built


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_two_cycles(name: str, apps: dict[str, Path], tmp_path: Path) -> None:
    run_cycles(apps[name], PROGRAMS[name], tmp_path, cycles=2)

