"""`crac gdb PID` (crac_py/debug.py): gdb attached to a program under crac stops at a breakpoint in
the program's own code, with its source lines, arguments and backtrace, after a launch and after a
restart; the program goes on when gdb detaches, and is checkpointed after it (docs/DECISIONS.md
"gdb on a program under crac")."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import checkpoint, kill9, launch, restart, wait_for_step
from conftest import APPS_DIR, crac_cmd, describe


def _ptrace_refused() -> str | None:
    """Why gdb could not attach to a process it did not start here, or None."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    level = int(scope.read_text()) if scope.exists() else 0
    if level >= 3 or (level >= 1 and os.geteuid() != 0):
        return f"Yama ptrace_scope {level} keeps gdb from attaching to a process it did not start"
    return None


GDB = shutil.which("gdb")
pytestmark = [
    pytest.mark.skipif(GDB is None, reason="gdb is not installed (apt-get install gdb)"),
    pytest.mark.skipif(_ptrace_refused() is not None, reason=str(_ptrace_refused())),
]


def break_in_step_line(pid: int) -> str:
    """`crac gdb PID`: stop once in step_line, print its argument and the stack, detach."""
    cp = subprocess.run(
        [*crac_cmd(), "gdb", str(pid), "-batch", "-ex", "break step_line", "-ex", "continue",
         "-ex", "print k", "-ex", "bt"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert cp.returncode == 0, describe(cp)
    assert "hit Breakpoint 1, step_line (k=" in cp.stdout, describe(cp)
    assert "ckpt_common.h" in cp.stdout and " in main (" in cp.stdout, describe(cp)
    return cp.stdout


def test_gdb_on_a_launched_and_a_restarted_program(tmp_path):
    exe = tmp_path / "ckpt_counter"
    subprocess.run(
        ["gcc", "-g", "-O0", "-o", str(exe), str(APPS_DIR / "ckpt_counter.c")], check=True
    )
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(exe, ["400", "20"], ckptdir, out_dir=logs)
    run = None
    try:
        wait_for_step(proc, 3)
        break_in_step_line(proc.pid)
        at = proc.last_step()
        wait_for_step(proc, at + 3)  # detached: it runs on
        gen = checkpoint(proc, ckptdir)
        kill9(proc)
        run = restart(gen, out_dir=logs, label="restart")
        wait_for_step(run, run.last_step() + 1)
        break_in_step_line(run.pid)
        assert run.wait(timeout=120) == 0, run.report()
        assert run.lines()[-1].startswith("DONE"), run.report()
    finally:
        if run:
            run.stop()
        proc.stop()


def test_gdb_refuses_what_is_not_under_crac(tmp_path):
    cp = subprocess.run(
        [*crac_cmd(), "gdb", "999999999"], capture_output=True, text=True, timeout=60
    )
    assert cp.returncode == 2 and cp.stderr.strip() == "crac: error: no process 999999999"
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        cp = subprocess.run(
            [*crac_cmd(), "gdb", str(sleeper.pid)], capture_output=True, text=True, timeout=60
        )
        assert cp.returncode == 2 and "is not a program under crac" in cp.stderr, describe(cp)
    finally:
        sleeper.kill()
        sleeper.wait()
