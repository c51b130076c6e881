"""tmux (Debian's, a program nobody on the team wrote) under crac through two checkpoint ->
kill -> restart cycles of its job: `crac launch` runs the tmux client, which starts the server
as a daemon (a double fork and setsid, out of the launch's session) and ends; the server runs a
pane's program on a pseudo-terminal it made. The job is checkpointed and killed through the
coordinator (`crac command -bc`, `k`), as a user does with a detached session, and restarted
with the restart script. After each restart a tmux client outside crac still reaches the server
on its socket, the server still names the pane's program (it reads /proc by the pid it knows),
a window made after a restart is part of the next checkpoint, and the pane's program
(ckpt_counter, writing to a file) ends with the uninterrupted run's output."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, WAIT_TIMEOUT, base_env, counter_lines, kill_tree, tree
from conftest import crac_cmd, require_native
from coord_harness import command, free_port
from job_harness import ScriptRun, bcheckpoint

STEPS, MS = 400, 30


def _tmux(tmux: str, sock: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tmux, "-S", str(sock), *args],
        capture_output=True,
        text=True,
        timeout=WAIT_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def _steps(out: Path) -> int:
    """The last complete `step N` line of the counter's file (0: none yet)."""
    lines = out.read_text().splitlines() if out.exists() else []
    steps = [int(x.split()[1]) for x in lines if x.startswith("step ")]
    return steps[-1] if steps else 0


def _wait(what: str, ready, timeout: float = WAIT_TIMEOUT) -> None:  # noqa: ANN001 - a callable
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.1)


def _panes(tmux: str, sock: Path) -> list[str]:
    cp = _tmux(tmux, sock, "list-panes", "-a", "-F", "#{window_index} #{pane_current_command}")
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.split("\n")[:-1]


def _kill_job(port: int, ckptdir: Path) -> None:
    """Every process of the job killed by its coordinator (`k`), which then ends (its last
    process gone)."""
    assert command(port, "k").returncode == 0
    _wait("the coordinator to end with its job", lambda: command(port, "s").returncode == 2)
    kill_tree(ckptdir, b"tmux", b"ckpt_counter", b"sleep")


def test_tmux_session_through_two_restarts(apps, tmp_path: Path):
    require_native()
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed (Debian: tmux)")
    port, ckptdir, logs = free_port(), tmp_path / "ckpt", tmp_path / "logs"
    sock, out = tmp_path / "sock", tmp_path / "counter.out"
    pane = f"exec {apps['ckpt_counter']} {STEPS} {MS} > {out}"
    launch = subprocess.run(
        [*crac_cmd(), "launch", "--new-coordinator", "-p", str(port), "-c", str(ckptdir), "--"]
        + [tmux, "-S", str(sock), "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y"]
        + ["24", pane],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=base_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    runs: list[ScriptRun] = []
    try:
        assert launch.returncode == 0, launch.stderr
        for cycle in (1, 2):
            before = _steps(out)
            _wait("the pane's program to go on", lambda: _steps(out) >= before + 20)
            script = bcheckpoint(port)
            at = _steps(out)
            _wait("the killed run to go past the checkpoint", lambda: _steps(out) >= at + 2)
            _kill_job(port, ckptdir)
            assert _tmux(tmux, sock, "has-session").returncode != 0, "tmux outlived the kill"
            run = ScriptRun(script, logs, f"restart{cycle}", "-p", str(port))
            runs.append(run)
            _wait("the restarted server", lambda: _tmux(tmux, sock, "has-session").returncode == 0)
            assert "0 ckpt_counter" in _panes(tmux, sock), _panes(tmux, sock)
            if cycle == 1:  # in the next checkpoint, as a window made after a restart
                cp = _tmux(tmux, sock, "new-window", "-d", "exec sleep 3600")
                assert cp.returncode == 0, cp.stderr
            else:
                assert "1 sleep" in _panes(tmux, sock), _panes(tmux, sock)
        _wait("the counter's end", lambda: "DONE" in out.read_text(), timeout=RUN_TIMEOUT)
        assert out.read_text().splitlines() == counter_lines(STEPS)
        assert _tmux(tmux, sock, "kill-server").returncode == 0
        _wait("the job to end", lambda: command(port, "s").returncode == 2)
    except BaseException:
        print(launch.stderr, *(r.report() for r in runs), tree(ckptdir), sep="\n")
        raise
    finally:
        if command(port, "s").returncode == 0:
            command(port, "k")
        for r in runs:
            r.kill()
        kill_tree(ckptdir, b"tmux", b"ckpt_counter", b"sleep")
