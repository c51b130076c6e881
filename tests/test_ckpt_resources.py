"""Resources a single process holds that must come back at restart (or be refused clearly at
checkpoint time): huge MAP_NORESERVE mappings, files whose directory is gone, /proc/<own pid>
paths, pseudo-terminals, error returns of system calls, POSIX message queues. Each program checks
itself and runs through two checkpoint -> SIGKILL -> restart cycles (tests/ckpt_harness.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import termios
from pathlib import Path

import pytest
from ckpt_harness import (
    CracProc,
    Segment,
    base_env,
    check_finished,
    check_inspect,
    checkpoint,
    counter_lines,
    crac_launch_argv,
    kill9,
    launch,
    restart,
    run_cycles,
    wait_for_step,
)
from conftest import APPS_DIR, CFLAGS, crac_cmd, require_native

_BUILT: dict[str, Path] = {}


def build(name: str, tmp_path_factory: pytest.TempPathFactory, libs: tuple[str, ...] = ()) -> Path:
    """tests/apps/NAME.c compiled once per session with conftest's flags."""
    if name not in _BUILT:
        exe = tmp_path_factory.mktemp("res_apps") / name
        cmd = ["gcc", *CFLAGS, "-o", str(exe), str(APPS_DIR / f"{name}.c"), *libs]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"cannot build {name}.c:\n{' '.join(cmd)}\n{res.stderr}")
        _BUILT[name] = exe
    return _BUILT[name]


def test_noreserve_64gib(tmp_path, tmp_path_factory):
    """A 64 GiB private writable MAP_NORESERVE mapping (more than this machine's memory) with a
    few pages touched is mapped back the way the program had it."""
    run_cycles(build("ckpt_noreserve", tmp_path_factory), ["64"], tmp_path, cycles=2)


def test_kernel_excluded_ring_stays_excluded(tmp_path, tmp_path_factory):
    """A perf event's ring buffer is excluded from dumps by the kernel (VM_DONTDUMP), not by the
    program: the checkpoint leaves it out, the restart maps it back as plain memory still
    excluded, and the restarted process's checkpoint leaves it out too (its VmFlags are read
    before the write there as well: the program never asked MADV_DONTDUMP)."""
    app = build("ckpt_perfbuf", tmp_path_factory)
    native = subprocess.run([str(app), "16", "1"], capture_output=True, text=True, timeout=60)
    if native.returncode != 0:
        pytest.skip(f"no perf ring on this machine: {native.stderr.strip()}")
    ring = int(native.stdout.split()[1])
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(app, ["16", "400"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 3)
        first = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    assert check_inspect(first)["excluded_bytes"] >= ring
    proc = restart(ckptdir, out_dir=logs, label="restart")
    try:
        wait_for_step(proc, proc.last_step() + 2)
        second = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    assert second != first
    assert check_inspect(second)["excluded_bytes"] >= ring


def test_removed_directory(tmp_path, tmp_path_factory):
    """A file written through an fd after its directory was `rm -rf`'d, and that directory held
    open too, come back with their contents as removed (unlinked) ones."""
    run_cycles(build("ckpt_lostdir", tmp_path_factory), ["{work}"], tmp_path, cycles=2)


def test_proc_self(tmp_path, tmp_path_factory):
    """/proc/<own pid>/status and /stat opened through the numeric pid, and /proc/self/fd as a
    directory fd, are reopened for the restarted process (whose pid differs)."""
    run_cycles(build("ckpt_procself", tmp_path_factory), [], tmp_path, cycles=2)


def test_syscall_errors(tmp_path, tmp_path_factory):
    """System calls with invalid arguments (bad fds, bad pointers, bad flags) fail with the errno
    Linux gives, trapped ones included, before and after a restart; nothing crashes."""
    run_cycles(build("ckpt_errnos", tmp_path_factory), [], tmp_path, cycles=2)


def test_mqueue(tmp_path, tmp_path_factory):
    """A POSIX message queue comes back with its attributes and the messages it held at the
    checkpoint, in priority order (the killed run's later sends and receives undone); no file
    appears in its place."""
    run_cycles(build("ckpt_mqueue", tmp_path_factory), [], tmp_path, cycles=2)


def test_pty_pair(tmp_path, tmp_path_factory):
    """A pseudo-terminal pair the program opened comes back as a new pair, master and slave still
    connected, with the slave's termios and the window size."""
    run_cycles(build("ckpt_pty", tmp_path_factory), [], tmp_path, cycles=2)


def _take_terminal() -> None:
    """In the child, after setsid: stdin becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class TtyProc(CracProc):
    """A CracProc whose stdin is a fresh pseudo-terminal, its controlling terminal."""

    def __init__(self, argv: list[str], *, out_dir: Path, label: str):
        self.label = label
        self.out_path = out_dir / f"{label}.out"
        self.err_path = out_dir / f"{label}.err"
        self.master, slave = os.openpty()
        try:
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                subprocess.Popen.__init__(
                    self,
                    [str(a) for a in argv],
                    stdin=slave,
                    stdout=out,
                    stderr=err,
                    env=base_env(),
                    cwd=out_dir,
                    start_new_session=True,
                    preexec_fn=_take_terminal,
                )
        finally:
            os.close(slave)

    def stop(self) -> None:
        super().stop()
        os.close(self.master)


def tty_nr(pid: int) -> int:
    """The controlling terminal of PID (field 7 of /proc/PID/stat; 0: none)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[4])


def test_controlling_terminal(tmp_path, tmp_path_factory):
    """A program whose stdin is its controlling terminal still checkpoints and restarts (on the
    restart's own terminal), untouched by the pseudo-terminal pairs crac recreates."""
    require_native()
    app = build("ckpt_counter", tmp_path_factory)
    steps = 100
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    proc = TtyProc(crac_launch_argv(app, [str(steps)], ckptdir), out_dir=logs, label="launch")
    try:
        wait_for_step(proc, 10)
        assert tty_nr(proc.pid) != 0, "the launched program has no controlling terminal"
        before = proc.last_step()
        gen = checkpoint(proc, ckptdir)
        done = proc.last_step()
        wait_for_step(proc, done + 2)
        kill9(proc)
    finally:
        proc.stop()
    prev = Segment(proc.label, proc.lines(), before, done, gen)
    again = TtyProc([*crac_cmd(), "restart", str(ckptdir)], out_dir=logs, label="restart1")
    try:
        wait_for_step(again, done + 1)
        assert tty_nr(again.pid) != 0, "the restarted program has no controlling terminal"
        check_finished(again, counter_lines(steps), prev)
    finally:
        again.stop()
