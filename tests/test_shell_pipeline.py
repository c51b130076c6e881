"""A shell pipeline under crac, the way a batch script runs one (issue 13): `sh -c 'gen | sort -r
| sha256sum'`, with dash's own fork/exec, pipes between the processes and the pipeline's result
only at its end. Checkpointed by the signal to the shell (the tree's coordinator is started on
demand), every process SIGKILLed, restarted from the restart script, checkpointed again
(`crac command -bc`), killed, restarted and run to the end: the digest equals an uninterrupted
run's. The generator also counts its lines into a side file, so the test knows the pipeline is
mid-way without any timing."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, WAIT_TIMEOUT, CracProc, base_env, process_dirs, tree
from conftest import crac_cmd, require_native
from coord_harness import free_port, wait_until
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


def _native_then_launch(
    shell: str, script: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess, CracProc, Path, Path, Path]:
    """SHELL -c SCRIPT run natively in TMP/native (its result, checked by the caller), then
    launched under crac in TMP/cwd: the native run, the launch, and the cwd, checkpoint and log
    directories."""
    require_native()
    native_cwd = tmp_path / "native"
    native_cwd.mkdir()
    native = subprocess.run(
        [shell, "-c", script], cwd=native_cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    cwd, ckptdir, logs = tmp_path / "cwd", tmp_path / "ckpt", tmp_path / "logs"
    cwd.mkdir()
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", shell, "-c", script],
        out_dir=logs,
        label="launch",
        env=base_env(),
        cwd=cwd,
    )
    return native, root, cwd, ckptdir, logs


def test_shell_pipeline_two_cycles(tmp_path):
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    native, root, cwd, ckptdir, logs = _native_then_launch(sh, SCRIPT.format(n=LINES), tmp_path)
    runs: list[ScriptRun] = []
    try:
        assert native.returncode == 0 and native.stdout.endswith("-\n"), native
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


# The reader waits until no other process holds its stdin's pipe (the writer wrote and ended),
# says it is ready, waits for the file `go`, then prints what its stdin holds.
READER = (
    "import glob, os, sys, time\n"
    "me = f'pipe:[{os.fstat(0).st_ino}]'\n"
    "def others():\n"
    "    found = []\n"
    "    for link in glob.glob('/proc/[0-9]*/fd/*'):\n"
    "        try:\n"
    "            if os.readlink(link) == me and link.split('/')[2] != str(os.getpid()):\n"
    "                found.append(link)\n"
    "        except OSError:\n"
    "            pass\n"
    "    return found\n"
    "while others():\n"
    "    time.sleep(0.02)\n"
    "print('ready', flush=True)\n"
    "while not os.path.exists('go'):\n"
    "    time.sleep(0.02)\n"
    "print('read:', sys.stdin.read().replace('\\n', '|'), flush=True)\n"
)


def test_pipe_whose_writer_ended_keeps_its_bytes(tmp_path):
    """`printf ... | reader`: the writer (dash's subshell) has written and ended when the
    checkpoint comes, the reader has not read yet, and is the only process left holding the
    pipe, on its stdin. After the restart it reads the bytes, then the end of the file, as it
    would have: the pipe was the tree's own. It was taken for the invocation's stdin (a pipe into
    the job from outside, which the restart replaces with its own): `echo N | sha256sum` under
    `xargs -P4` hashed nothing after a restart."""
    require_native()
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    cwd, ckptdir, logs = tmp_path / "cwd", tmp_path / "ckpt", tmp_path / "logs"
    cwd.mkdir()
    pipeline = f"printf 'first line\\nsecond line\\n' | {shlex.quote(sys.executable)} -c \"$R\""
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", sh, "-c", pipeline],
        out_dir=logs,
        label="launch",
        env=base_env({"R": READER}),
        cwd=cwd,
    )
    runs: list[ScriptRun] = []
    try:
        wait_until(lambda: "ready" in root.stdout_text(), "the reader")
        root.send_signal(signal.SIGUSR2)
        script_path = ckptdir / "crac_restart_script.sh"
        wait_until(script_path.exists, "the restart script", timeout=WAIT_TIMEOUT)
        _kill_tree(ckptdir, cwd)
        root.wait(timeout=WAIT_TIMEOUT)
        run = ScriptRun(script_path, logs, "restart", "-p", str(free_port()))
        runs.append(run)
        (cwd / "go").touch()
        assert run.wait() == 0, run.report()
        assert run.out.text() == "read: first line|second line|\n", run.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        root.stop()
        _kill_tree(ckptdir, cwd)


# bash: a subshell writes items into a named FIFO (each counted in `progress`) faster than the
# loop reading the FIFO as its stdin (`done < fifo`) takes them, so the FIFO holds some at the
# checkpoint; the sum of what the loop read is the result.
FIFO_SCRIPT = """F=$PWD/fifo; rm -f "$F"; mkfifo "$F"
( for i in $(seq 1 {n}); do echo "item $i"; echo "$i" >> progress; sleep 0.01; done ) > "$F" &
sum=0; n=0
while read -r _ i; do sum=$(( (sum * 31 + i) % 1000000007 )); n=$((n + 1)); sleep 0.02; done < "$F"
wait; rm -f "$F"; echo "final n=$n sum=$sum"
"""


def test_loop_reading_a_named_fifo_as_its_stdin(tmp_path):
    """A bash loop whose stdin is a named FIFO (`done < fifo`) fed by a background subshell whose
    stdout is that FIFO: both are the program's own, not the invocation's stdio, and come back
    as the FIFO (with what it held) — they used to come back as the restart's stdin and stdout,
    so the loop saw end of file and the items went to the terminal."""
    bash = shutil.which("bash")
    assert bash is not None
    native, root, cwd, ckptdir, logs = _native_then_launch(
        bash, FIFO_SCRIPT.format(n=150), tmp_path
    )
    runs: list[ScriptRun] = []
    try:
        assert native.returncode == 0 and native.stdout.startswith("final n=150 "), native
        _wait_progress(cwd, 40, root)
        root.send_signal(signal.SIGUSR2)
        script_path = ckptdir / "crac_restart_script.sh"
        wait_until(script_path.exists, "the restart script", timeout=WAIT_TIMEOUT)
        _kill_tree(ckptdir, cwd)
        root.wait(timeout=WAIT_TIMEOUT)
        port = int(script_path.read_text().split("DMTCP_PORT:-", 1)[1].split("}", 1)[0])
        run = ScriptRun(script_path, logs, "restart", "-p", str(port))
        runs.append(run)
        assert run.wait() == 0, run.report()
        assert run.out.text() == native.stdout, run.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        root.stop()
        _kill_tree(ckptdir, cwd)
