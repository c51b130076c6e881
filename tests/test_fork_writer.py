"""The forked checkpoint writer (loader/ckpt/ckpt_writer.c, docs/ARCHITECTURE.md "Checkpoint"): the
program runs on as soon as its state is captured while a copy-on-write child writes upper.core;
the generation becomes `latest` only once the image is on disk.

* Two checkpoint -> SIGKILL -> restart cycles of a program that rewrites all its memory at every
  step (tests/apps/ckpt_cowrite.c), so the program's stores race the writer; each checkpoint says
  it was written by the forked writer.
* The writer held stopped: the program goes on, `latest` stays the previous generation; a SIGKILL
  of the program then ends the writer too and the previous generation restarts.
* The writer runs in a session of its own (a scheduler autogroup of its own: its share of the
  CPU does not shrink with the number of the program's busy threads).
* `crac command -bc` of a job returns once the image is on disk, written by the forked writer
  (the job's `durable` phase, docs/PROTOCOL.md), or with the process paused under
  --no-fork-writer; `-kc` exits after it, written paused.
* The fallback: --no-fork-writer, and a refused fork (tests/apps/deny_cow_fork.c), with one
  warning line.
* Direct writes (O_DIRECT by reference, loader/image/image_direct.c, the default) and
  CRAC_DIRECT_WRITE=0 (the page cache): two cycles each with the program's stores racing the
  writer; where O_DIRECT is refused (tests/apps/deny_odirect.c) each image is written through
  the page cache and restarts.

Which writer wrote a checkpoint is read from the CRAC_TIMING=1 line. No timing is asserted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ckpt_harness import (
    WAIT_TIMEOUT,
    CracProc,
    checkpoint,
    complete_generations,
    crac_launch_argv,
    kill9,
    latest_complete,
    launch,
    native_reference,
    process_dirs,
    restart,
    run_cycles,
    tree,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, CFLAGS
from coord_harness import command_bg, finish
from job_harness import Job

COWRITE_ARGS = ["1500", "64", "2"]


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, Path]:
    """The programs these tests run, built alone (not every program of tests/apps/)."""
    out = tmp_path_factory.mktemp("fork_writer_apps")
    built = {}
    for name in ("ckpt_cowrite", "deny_cow_fork", "coord_counter", "deny_odirect"):
        exe = out / name
        cmd = ["gcc", *CFLAGS, "-o", str(exe), str(APPS_DIR / f"{name}.c")]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"cannot build {name}: {res.stderr}"
        built[name] = exe
    return built  # steps, MiB rewritten per step, ms asleep per step


@pytest.fixture(autouse=True)
def _timing(monkeypatch):
    """Every crac process of these tests prints its CRAC_TIMING line (it names the writer)."""
    monkeypatch.setenv("CRAC_TIMING", "1")
    monkeypatch.delenv("CRAC_NO_FORK_WRITER", raising=False)


def writers(log: Path) -> list[str]:
    """The writer of each checkpoint a process's stderr reports: "forked" or "paused"."""
    return [
        line.rsplit(" ", 1)[-1]
        for line in log.read_text().splitlines()
        if line.startswith("crac: timing: generation ")
    ]


def ios(log: Path) -> list[str]:
    """How each checkpoint's page runs were written: "direct" (O_DIRECT) or "buffered"."""
    return [
        m.group(1)
        for line in log.read_text().splitlines()
        if (m := re.match(r"crac: timing: generation \d+: .*, io (\w+), ", line))
    ]


def wait_writers(log: Path, n: int) -> list[str]:
    """writers(log) once it names N checkpoints (the line follows the publish)."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while len(found := writers(log)) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def children(pid: int) -> list[int]:
    """The child processes of every thread of PID."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                out += [
                    int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
            except OSError:
                pass
    except OSError:
        pass
    return out


def proc_state(pid: int) -> str:
    """PID's state letter in /proc (R, S, T, Z, ...), "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def stopped(pid: int) -> bool:
    """SIGSTOPs PID and waits until it is stopped: False when it ended first (a writer can finish
    between being listed and being signalled)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        state = proc_state(pid)
        if state in ("T", "t"):
            return True
        if state in ("", "Z", "X"):
            return False
        time.sleep(0.001)
    pytest.fail(f"{pid} neither stopped nor ended after SIGSTOP")


PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """This process as a child subreaper: a descendant orphaned inside (a forked writer whose
    program was killed) becomes its child, so the test can wait for it and read how it ended,
    whatever init is (CI's pid namespace init reaps it at once; another init may never)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        pytest.fail(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def wait_adopted(pid: int) -> int:
    """The wait status of PID, an orphan adopted by this process (adopting_orphans)."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got == pid:
            return status
        time.sleep(0.01)
    pytest.fail(f"{pid} did not end")


def catch_writer(pid: int, start: Callable[[], None], done: Callable[[], bool]) -> int:
    """Starts a checkpoint and stops its forked writer (SIGSTOP) as soon as it appears; returns
    its pid. When the writer finished before it was seen (a small image, a fast disk), tries
    again with the next checkpoint, a few times."""
    for _ in range(5):
        start()
        deadline = time.monotonic() + WAIT_TIMEOUT
        while time.monotonic() < deadline:
            kids = children(pid)
            if kids and stopped(kids[0]):
                return kids[0]
            if done():
                break
            time.sleep(0.0005)
        else:
            pytest.fail("no checkpoint writer appeared and the checkpoint did not end")
    pytest.fail("five checkpoints ended without a forked writer being seen")


@pytest.mark.parametrize(
    ("value", "io"), [(None, "direct"), ("0", "buffered")], ids=["direct", "page-cache"]
)
def test_cow_two_cycles(apps, tmp_path, monkeypatch, value, io):
    """The program rewrites every page of 64 MiB at each step while its image is written: two
    cycles restart at the checkpointed step with intact memory (the program checks every page
    against its step) and end as the uninterrupted run; each checkpoint used the forked writer,
    which wrote its page runs O_DIRECT by reference (vmsplice, splice: image_direct.c) by
    default, through the page cache with CRAC_DIRECT_WRITE=0."""
    if io == "direct" and not direct_io_possible(tmp_path):
        pytest.skip(f"{tmp_path}'s filesystem refuses O_DIRECT")
    if value is None:
        monkeypatch.delenv("CRAC_DIRECT_WRITE", raising=False)
    else:
        monkeypatch.setenv("CRAC_DIRECT_WRITE", value)
    run_cycles(apps["ckpt_cowrite"], COWRITE_ARGS, tmp_path)
    # (A line may be lost: the harness kills the process right after `latest` switched.)
    logs = [tmp_path / "logs" / f"{label}.err" for label in ("launch", "restart1")]
    found = [w for log in logs for w in writers(log)]
    assert found and set(found) == {"forked"}, found
    ios_found = [x for log in logs for x in ios(log)]
    assert ios_found and set(ios_found) == {io}, ios_found


def test_writer_stopped_then_program_killed(apps, tmp_path):
    """While the writer of generation 2 is held stopped the program goes on and `latest` stays
    generation 1; SIGKILL of the program ends the writer too (it must not finish a generation
    nobody publishes), and generation 1 restarts and runs to the uninterrupted run's end."""
    app = apps["ckpt_cowrite"]
    ref = native_reference(app, COWRITE_ARGS, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    writer = 0
    with adopting_orphans():
        proc = launch(app, COWRITE_ARGS, ckptdir, out_dir=logs)
        try:
            wait_for_step(proc, 20)
            proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + WAIT_TIMEOUT
            while not complete_generations(ckptdir) and time.monotonic() < deadline:
                time.sleep(0.01)
            procdir = process_dirs(ckptdir)[0]
            first = latest_complete(procdir)
            assert first is not None, tree(ckptdir)
            known = complete_generations(ckptdir)
            writer = catch_writer(
                proc.pid,
                lambda: proc.send_signal(signal.SIGUSR2),
                lambda: complete_generations(ckptdir) != known,
            )
            latest = latest_complete(procdir)
            # The program runs on while its image is still being written ...
            wait_for_step(proc, proc.last_step() + 3)
            # ... and the generation being written is not the latest.
            assert latest_complete(procdir) == latest, tree(ckptdir)
            assert list(procdir.glob("gen-*.tmp")), tree(ckptdir)
            kill9(proc)
            # The writer is now this process's child, not yet waited for: SIGCONT finds it.
            # Stopped after it armed PR_SET_PDEATHSIG, it was killed with the program; stopped
            # before, it runs on and finds its parent gone (exit status 3, ckpt_writer.c).
            os.kill(writer, signal.SIGCONT)
            status = wait_adopted(writer)
        except BaseException:
            proc.stop()
            if writer:  # it may be held stopped, and now this process's child
                with contextlib.suppress(ProcessLookupError):
                    os.kill(writer, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(writer, 0)
            raise
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    gave_up = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3
    assert killed or gave_up, f"the writer outlived the program it was writing (status {status:#x})"
    assert latest_complete(procdir) == latest, tree(ckptdir)
    again = restart(ckptdir, out_dir=logs, label="restart")
    assert wait_exit(again) == 0, again.report()
    assert again.lines()[-1] == ref.done, again.report()


def session(pid: int) -> int | None:
    """The session id of PID (None once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def test_writer_in_own_session(apps, tmp_path):
    """The forked writer leaves the program's session for one of its own (it is its leader), so
    the scheduler's autogroups give it a share like the whole program's. It is caught stopped;
    it may be caught before its first steps, so it is let run and looked at until it is seen
    in its own session (a later checkpoint's writer when one ends unseen). The checkpoint then
    completes and restarts to the uninterrupted run's end."""
    app = apps["ckpt_cowrite"]
    ref = native_reference(app, COWRITE_ARGS, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    proc = launch(app, COWRITE_ARGS, ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 10)
        program_sid = session(proc.pid)
        assert program_sid is not None
        seen: list[tuple[int, int | None]] = []
        for _ in range(5):
            known = complete_generations(ckptdir)
            writer = catch_writer(
                proc.pid,
                lambda: proc.send_signal(signal.SIGUSR2),
                lambda: complete_generations(ckptdir) != known,
            )
            sid = session(writer)
            os.kill(writer, signal.SIGCONT)
            while sid == program_sid:
                sid = session(writer)
            seen.append((writer, sid))
            deadline = time.monotonic() + WAIT_TIMEOUT
            while complete_generations(ckptdir) == known and time.monotonic() < deadline:
                time.sleep(0.01)
            if sid is not None:
                break
        writer, sid = seen[-1]
        assert sid == writer and sid != program_sid, (program_sid, seen)
        assert wait_writers(proc.err_path, len(seen))[-1:] == ["forked"], proc.report()
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    again = restart(ckptdir, out_dir=logs, label="restart")
    assert wait_exit(again) == 0, again.report()
    assert again.lines()[-1] == ref.done, again.report()


@pytest.fixture
def one_job(apps, tmp_path):
    job = Job(apps["coord_counter"], tmp_path, ["w1"], steps=3000, ms=5, dirty_mib=96)
    yield job
    job.stop()


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "no_fork_writer"])
def test_bcheckpoint_returns_when_durable(apps, tmp_path, fork):
    """`crac command -bc` of a job: it returns once the image is complete and `latest`. The image
    is written by the forked writer (the job publishes once every process is durable), or with
    the process paused under CRAC_NO_FORK_WRITER=1 (the same protocol)."""
    env = {} if fork else {"CRAC_NO_FORK_WRITER": "1"}
    job = Job(apps["coord_counter"], tmp_path, ["w1"], steps=3000, ms=5, dirty_mib=96, env=env)
    try:
        bc_durable(job, "forked" if fork else "paused")
    finally:
        job.stop()


def bc_durable(job: Job, writer: str) -> None:
    job.wait_steps(5)
    rc, out, err = finish(command_bg(job.coord.port, "bc"))
    assert rc == 0, (out, err)
    gen = int(out.splitlines()[0].removeprefix("GENERATION="))
    latest = latest_complete(process_dirs(job.ckptdir)[0])
    assert latest is not None and latest.name == f"gen-{gen:06d}", tree(job.ckptdir)
    assert (latest / "MANIFEST.json").is_file()
    assert writers(job.procs["w1"].err_path) == [writer]


def test_kcheckpoint_writes_paused(one_job):
    """`crac command -kc`: the process exits after its image is written, so the image is
    written with it paused (no writer is forked) and is complete when the command returns."""
    job = one_job
    job.wait_steps(5)
    rc, out, err = finish(command_bg(job.coord.port, "kc"))
    assert rc == 0, (out, err)
    proc = job.procs["w1"]
    assert wait_exit(proc) == 0, proc.report()
    latest = latest_complete(process_dirs(job.ckptdir)[0])
    assert latest is not None and (latest / "MANIFEST.json").is_file(), tree(job.ckptdir)
    assert writers(proc.err_path) == ["paused"]


def test_no_fork_writer_option(apps, tmp_path, monkeypatch):
    """--no-fork-writer (crac launch), then CRAC_NO_FORK_WRITER=1 (crac restart): each
    checkpoint is written with the program paused, without a warning; the images restart."""
    app = apps["ckpt_cowrite"]
    args = ["3000", "16", "2"]
    ref = native_reference(app, args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    proc = launch(app, args, ckptdir, out_dir=logs, opts=["--no-fork-writer"])
    for label in ("launch", "restart1"):
        try:
            wait_for_step(proc, proc.last_step() + 10 if proc.lines() else 10)
            checkpoint(proc, ckptdir)
            found = wait_writers(proc.err_path, 1)
            kill9(proc)
        except BaseException:
            proc.stop()
            raise
        assert found == ["paused"], proc.report()
        assert "cannot fork" not in proc.err_path.read_text()
        monkeypatch.setenv("CRAC_NO_FORK_WRITER", "1")
        proc = restart(ckptdir, out_dir=logs, label=label + "-restart")
    assert wait_exit(proc) == 0, proc.report()
    assert proc.lines()[-1] == ref.done, proc.report()


def two_checkpoints_under(wrapper: Path, app: Path, args: list[str], tmp_path: Path):
    """APP launched under WRAPPER (a program that execs the rest of its argv with something
    refused), checkpointed twice and SIGKILLed: (its uninterrupted run, the checkpoint
    directory, the logs directory, the process, the writers its timing lines name)."""
    ref = native_reference(app, args, tmp_path / "ref", tmp_path / "ref_cwd")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    argv = [str(wrapper), *crac_launch_argv(app, args, ckptdir, ())]
    proc = CracProc(argv, out_dir=logs, label="launch", cwd=logs)
    try:
        wait_for_step(proc, 10)
        for _ in range(2):
            known = complete_generations(ckptdir)
            proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + WAIT_TIMEOUT
            while complete_generations(ckptdir) == known and time.monotonic() < deadline:
                time.sleep(0.01)
        found = wait_writers(proc.err_path, 2)
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    return ref, ckptdir, logs, proc, found


def test_refused_fork_falls_back(apps, tmp_path):
    """A process whose forks are refused (as strict overcommit refuses a big one): each
    checkpoint is written with the program paused, one warning line says so, and the image
    restarts."""
    ref, ckptdir, logs, proc, found = two_checkpoints_under(
        apps["deny_cow_fork"], apps["ckpt_cowrite"], ["3000", "16", "2"], tmp_path
    )
    assert found == ["paused", "paused"], proc.report()
    err = proc.err_path.read_text()
    warnings = [line for line in err.splitlines() if "cannot fork the checkpoint writer" in line]
    assert len(warnings) == 1 and warnings[0].startswith("crac: warning: "), err
    again = restart(ckptdir, out_dir=logs, label="restart")
    assert wait_exit(again) == 0, again.report()
    assert again.lines()[-1] == ref.done, again.report()


def direct_io_possible(where: Path) -> bool:
    """Whether WHERE's filesystem opens files O_DIRECT (tmpfs before Linux 6.6 does not)."""
    probe = where / "odirect_probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600))
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def test_direct_refused_falls_back(apps, tmp_path, monkeypatch):
    """Where every O_DIRECT open is refused (EINVAL, tests/apps/deny_odirect.c): each checkpoint
    is still written by the forked writer, through the page cache, and the image restarts to the
    uninterrupted run's end."""
    monkeypatch.delenv("CRAC_DIRECT_WRITE", raising=False)
    ref, ckptdir, logs, proc, found = two_checkpoints_under(
        apps["deny_odirect"], apps["ckpt_cowrite"], ["3000", "16", "2"], tmp_path
    )
    assert found == ["forked", "forked"], proc.report()
    assert ios(proc.err_path) == ["buffered", "buffered"], proc.report()
    again = restart(ckptdir, out_dir=logs, label="restart")
    assert wait_exit(again) == 0, again.report()
    assert again.lines()[-1] == ref.done, again.report()
