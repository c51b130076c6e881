"""What a program keeps in files across checkpoint -> SIGKILL -> restart, with programs of Python's
standard library: files it changes in place (SQLite in WAL mode) are put back as they were at the
checkpoint (docs/DECISIONS.md "Written files are put back as they were"), and the file locks it
holds (fcntl/lockf, OFD, flock) survive the checkpoint and are taken again at restart, or the
restart is refused when another process holds one now (docs/DECISIONS.md "File locks come
back")."""

from __future__ import annotations

import fcntl
import sys
from pathlib import Path

from ckpt_harness import (
    assert_refused,
    checkpoint,
    kill9,
    launch,
    restart,
    run_cycles,
    run_restart,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR

PYTHON = Path(sys.executable)
SQLITE_APP = APPS_DIR / "py" / "ckpt_sqlite.py"
LOCKS_APP = APPS_DIR / "py" / "ckpt_locks.py"


def test_sqlite_database_in_wal_mode(tmp_path):
    """SQLite changes its files in place after the checkpoint: the log is folded into the
    database and truncated, and the index it maps shared is rewritten. The restart puts the
    written files back as they were (they are small enough to be copied into the image), so they
    agree with the program's memory; before, SQLite failed with SQLITE_IOERR_SHORT_READ ("disk
    I/O error") or found rows its memory did not have."""
    run_cycles(PYTHON, [str(SQLITE_APP), "{work}", "300", "10"], tmp_path)


def test_locks_of_every_kind_survive(tmp_path):
    """The program checks every step that it holds its four locks: a checkpoint used to drop the
    fcntl lock on its write-only pid file (the copy of the file opened and closed it in the
    program's process, and any close drops that process's fcntl locks on the file), and a restart
    took none of them again."""
    run_cycles(PYTHON, [str(LOCKS_APP), "{work}", "200", "10"], tmp_path)


def test_restart_refused_while_another_process_holds_a_lock(tmp_path):
    """Another process took the pid file's lock after the program was killed: the restart stops
    with a message naming the file and that process (the program must not go on believing it
    holds the lock), and succeeds once the lock is free."""
    ckptdir, logs, work = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "work"
    work.mkdir()
    proc = launch(PYTHON, [str(LOCKS_APP), str(work), "100", "10"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 10)
        gen = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    with open(work / "app.pid", "r+") as other:
        fcntl.lockf(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        cp = run_restart(gen, cwd=tmp_path)
        msg = assert_refused(cp, "a restart while another process holds the program's lock")
        assert "app.pid" in msg and "held by another process" in msg, msg
    proc = restart(gen, out_dir=logs, label="restart")
    try:
        assert wait_exit(proc) == 0, proc.stderr_text()
        assert "DONE steps=100 locks=4" in proc.stdout_text()
    finally:
        proc.stop()
