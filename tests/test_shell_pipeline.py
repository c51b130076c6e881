"""A shell pipeline under crac, the way a batch script runs one (issue 13): `sh -c 'gen | sort -r
| sha256sum'`, with dash's own fork/exec, pipes between the processes and the pipeline's result
only at its end. Checkpointed by the signal to the shell (the tree's coordinator is started on
demand), every process SIGKILLed, restarted from the restart script, checkpointed again
(`crac command -bc`), killed, restarted and run to the end: the digest equals an uninterrupted
run's. The generator also counts its lines into a side file, so the test knows the pipeline is
mid-way without any timing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, WAIT_TIMEOUT, CracProc, base_env, process_dirs, tree
from conftest import crac_cmd, require_native
from coord_harness import wait_until
from job_harness import ScriptRun, bcheckpoint, kill_job

from crac_py.coord.restart_script import listed_generations

LINES = 600
# gen: LINES lines, one every 20 ms, each also counted in `progress`; sort waits for the end.
SCRIPT = (
    'i=0; while [ "$i" -lt {n} ]; do echo "line $i $((i * 7919 % 1009))"; echo "$i" >> progress;'
    " i=$((i + 1)); sleep 0.02; done | sort -r | sha256sum"
)


def _progress(cwd: Path) -> int:
    try:
        return len((cwd / "progress").read_text().split())
    except OSError:
        return 0


def _wait_progress(cwd: Path, n: int, *alive: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while _progress(cwd) < n:
        dead = [p for p in alive if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            pytest.fail(f"the pipeline did not reach line {n} ({_progress(cwd)}): {dead}")
        time.sleep(0.02)


def _kill_tree(ckptdir: Path, cwd: Path) -> None:
    """SIGKILL every process of the first run's tree (its image directories name their pids)
    still running in CWD: a pid of a process gone may be another test's process by now."""
    for d in process_dirs(ckptdir):
        try:
            pid = int(d.name.rsplit("-", 1)[1])
            if os.readlink(f"/proc/{pid}/cwd") == str(cwd):
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test_shell_pipeline_two_cycles(tmp_path):
    require_native()
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    script = SCRIPT.format(n=LINES)
    native_cwd = tmp_path / "native"
    native_cwd.mkdir()
    native = subprocess.run(
        [sh, "-c", script], cwd=native_cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert native.returncode == 0 and native.stdout.endswith("-\n"), native
    cwd, ckptdir, logs = tmp_path / "cwd", tmp_path / "ckpt", tmp_path / "logs"
    cwd.mkdir()
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", sh, "-c", script],
        out_dir=logs,
        label="launch",
        env=base_env(),
        cwd=cwd,
    )
    runs: list[ScriptRun] = []
    try:
        _wait_progress(cwd, 60, root)
        root.send_signal(signal.SIGUSR2)  # the checkpoint signal, to the shell
        script_path = ckptdir / "crac_restart_script.sh"
        wait_until(script_path.exists, "the restart script", timeout=WAIT_TIMEOUT)
        gens = listed_generations(script_path)
        assert len(gens) >= 3, tree(ckptdir)  # the shell, the generator's subshell, sort, ...
        saved = _progress(cwd)
        _wait_progress(cwd, saved + 5, root)
        # (killed one by one: a process downstream of one already gone may still print)
        _kill_tree(ckptdir, cwd)
        root.wait(timeout=WAIT_TIMEOUT)

        port = int(script_path.read_text().split("DMTCP_PORT:-", 1)[1].split("}", 1)[0])
        run1 = ScriptRun(script_path, logs, "restart1", "-p", str(port))
        runs.append(run1)
        _wait_progress(cwd, saved + 30, run1.proc)
        assert bcheckpoint(port) == script_path
        _wait_progress(cwd, _progress(cwd) + 5, run1.proc)
        kill_job(port, run1)

        run2 = ScriptRun(script_path, logs, "restart2", "-p", str(port))
        runs.append(run2)
        assert run2.wait() == 0, run2.report()
        assert run2.out.text() == native.stdout, run2.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        root.stop()
        _kill_tree(ckptdir, cwd)
