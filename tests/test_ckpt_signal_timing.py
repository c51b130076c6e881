"""The checkpoint signal during start-up and the program's own use of its number
(docs/DECISIONS.md, "Checkpoint signal"): sent 0..200 ms after `crac launch` or `crac restart`
starts, it never kills the program, and every request ends in a complete generation; a program
that installs its own handler for it is warned once.

Where the clock starts: a signal that arrives while the kernel is still finishing the execve of
crac itself is acted on before any instruction of crac runs, with the default action (nothing in
crac can block it yet; only the caller could). So 0 ms is the moment crac runs: the native `crac`
command's first act is to block the signal, which /proc/PID/status shows; a `crac` that is a Python
script shows nothing, and the clock starts when Popen returns.

CRAC_TEST_SIGNAL_TRIES=N (default 2) sends the signal N times at each delay.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    WAIT_TIMEOUT,
    CracProc,
    build_ckpt_apps,
    checkpoint,
    complete_generations,
    fail,
    kill9,
    launch,
    restart,
    wait_exit,
    wait_for_step,
    wait_new_generation,
)
from conftest import crac_cmd

DELAYS_MS = (0, 1, 2, 5, 10, 20, 50, 100, 200)
TRIES = int(os.environ.get("CRAC_TEST_SIGNAL_TRIES", "2"))
SIG = signal.SIGUSR2
COUNTER_ARGS = ["1000000", "10"]  # runs until killed


@pytest.fixture(scope="session")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


def _native_command() -> bool:
    with open(crac_cmd()[0], "rb") as fh:
        return fh.read(4) == b"\x7fELF"


@pytest.fixture(scope="module")
def started_clock():
    """How a test knows crac runs (see the module docstring)."""
    if crac_cmd()[0] == sys.executable:
        pytest.skip(
            "no `crac` command here, only `python -m crac_py`: Python starts before "
            "anything can block the checkpoint signal (docs/DECISIONS.md)"
        )
    return _native_command()


def _wait_running(proc: CracProc, native: bool) -> None:
    if not native:
        return
    bit = 1 << (SIG - 1)
    status = Path(f"/proc/{proc.pid}/status")
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"{proc.label} ended before it blocked its checkpoint signal", proc)
        try:
            blocked = next(
                int(line.split()[1], 16)
                for line in status.read_text().splitlines()
                if line.startswith("SigBlk:")
            )
        except (OSError, StopIteration, ValueError):
            continue
        if blocked & bit:
            return
    fail(f"{proc.label} never blocked its checkpoint signal (/proc/{proc.pid}/status SigBlk)", proc)


def _signal_early(proc: CracProc, delay_ms: int, ckptdir: Path, native: bool) -> None:
    """Sends the checkpoint signal DELAY_MS after PROC started; it must survive and complete
    exactly the checkpoint asked for, then go on running."""
    before = complete_generations(ckptdir)
    try:
        _wait_running(proc, native)
        if delay_ms:
            time.sleep(delay_ms / 1000)
        os.kill(proc.pid, SIG)
        wait_new_generation(ckptdir, before, proc)
        step = proc.last_step()
        wait_for_step(proc, step + 1)
        if proc.poll() is not None:
            fail(f"{proc.label} ended after its checkpoint (status {proc.returncode})", proc)
    except BaseException:
        proc.stop()
        raise
    kill9(proc)


@pytest.mark.parametrize("delay_ms", DELAYS_MS)
def test_signal_early_after_launch(ckpt_apps, tmp_path, started_clock, delay_ms):
    for i in range(TRIES):
        ckptdir = tmp_path / f"ckpt{i}"
        ckptdir.mkdir()
        proc = launch(
            ckpt_apps["ckpt_counter"],
            COUNTER_ARGS,
            ckptdir,
            out_dir=tmp_path / "logs",
            label=f"launch{i}",
        )
        _signal_early(proc, delay_ms, ckptdir, started_clock)


@pytest.fixture(scope="module")
def counter_image(ckpt_apps, tmp_path_factory) -> Path:
    """A checkpoint directory holding one generation of ckpt_counter (copied for each restart:
    a restart writes its generations where its image is)."""
    base = tmp_path_factory.mktemp("early_restart")
    ckptdir = base / "ckpt"
    ckptdir.mkdir()
    proc = launch(ckpt_apps["ckpt_counter"], COUNTER_ARGS, ckptdir, out_dir=base / "logs")
    try:
        wait_for_step(proc, 3)
        checkpoint(proc, ckptdir)
    finally:
        kill9(proc)
    return ckptdir


@pytest.mark.parametrize("delay_ms", DELAYS_MS)
def test_signal_early_after_restart(counter_image, tmp_path, started_clock, delay_ms):
    for i in range(TRIES):
        ckptdir = tmp_path / f"ckpt{i}"
        shutil.copytree(counter_image, ckptdir, symlinks=True)
        (gen,) = [p.resolve() for p in ckptdir.glob("*/latest")]
        proc = restart(gen, out_dir=tmp_path / "logs", label=f"restart{i}")
        _signal_early(proc, delay_ms, ckptdir, started_clock)


def test_own_handler_is_warned_once(ckpt_apps, tmp_path):
    """ckpt_sigown installs a SIGUSR2 handler and raises SIGUSR2 at itself at every step
    (tests/apps/ckpt_sigown.c checks that its handler gets each one): one warning naming
    --ckpt-signal, and no checkpoint at all."""
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    proc = launch(ckpt_apps["ckpt_sigown"], ["20"], ckptdir, out_dir=tmp_path / "logs")
    status = wait_exit(proc)
    if status != 0:
        fail(f"ckpt_sigown exited with status {status}", proc)
    warnings = [ln for ln in proc.stderr_text().splitlines() if ln.startswith("crac: warning:")]
    assert len(warnings) == 1, proc.report()
    assert "signal 12" in warnings[0] and "--ckpt-signal" in warnings[0], warnings[0]
    assert complete_generations(ckptdir) == {}, "a self-sent SIGUSR2 started a checkpoint"


def test_own_handler_is_warned_once_per_job(ckpt_apps, tmp_path):
    """A shell that runs ckpt_sigown three times (each a fork and exec of a process that never
    said it, as a job script running xargs or ps in a loop): one warning for the job, not one per
    program; a new launch into the same directory says it again."""
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    sigown = ckpt_apps["ckpt_sigown"]
    loop = f"for i in 1 2 3; do {sigown} 3 || exit 1; done"
    for run in ("first", "second"):
        proc = launch("/bin/sh", ["-c", loop], ckptdir, out_dir=tmp_path / run)
        status = wait_exit(proc)
        if status != 0:
            fail(f"the loop of ckpt_sigown exited with status {status}", proc)
        warnings = [ln for ln in proc.stderr_text().splitlines() if ln.startswith("crac: warning:")]
        assert len(warnings) == 1, proc.report()
        assert "signal 12" in warnings[0], warnings[0]


def test_coordinator_checkpoint_before_the_program_runs(ckpt_apps, tmp_path):
    """A worker joins its coordinator before the loader has even loaded the program; a job
    checkpoint asked for at once must wait for the program and complete, not fail."""
    from coord_harness import Coordinator, request

    coord = Coordinator(tmp_path / "coord")
    ckptdir = tmp_path / "ckpt"
    ckptdir.mkdir()
    opts = ["--join-coordinator", "-p", str(coord.port)]
    proc = launch(
        ckpt_apps["ckpt_counter"], COUNTER_ARGS, ckptdir, out_dir=tmp_path / "logs", opts=opts
    )
    try:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while request(coord.port, "status")["num_peers"] < 1:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"the worker did not join\n{coord.log_text()}", proc)
        reply = request(coord.port, "bcheckpoint")
        assert reply.get("ok") is True, f"{reply}\n{coord.log_text()}\n{proc.report()}"
        wait_new_generation(ckptdir, {}, proc)
        wait_for_step(proc, proc.last_step() + 1)
    finally:
        proc.stop()
        coord.stop()


def test_checkpoints_of_util_linux_script_never_give_its_poll_eintr(apps, tmp_path):
    """util-linux `script` copying a program's fast output (ckpt_counter, a line every 3 ms),
    checkpointed 40 times: a checkpoint that found `script` running and reached it once it had
    entered poll ended the poll with EINTR, which `script` takes for an error: it ended its
    program's session (SIGTERM) within a few checkpoints. The poll is issued again now."""
    script = shutil.which("script")
    if script is None:
        pytest.skip("util-linux `script` is not installed")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    counter = f"{apps['ckpt_counter']} 100000 3"
    proc = launch(script, ["-qfec", counter, "/dev/null"], ckptdir, out_dir=logs)
    try:
        for _ in range(40):
            wait_for_step(proc, proc.last_step() + 5)
            checkpoint(proc, ckptdir)
        wait_for_step(proc, proc.last_step() + 5)
        assert proc.poll() is None, proc.report()
    finally:
        proc.stop()
