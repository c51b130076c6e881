"""What a program keeps in files across checkpoint -> SIGKILL -> restart, with programs of Python's
standard library: files it changes in place (SQLite in WAL mode) are put back as they were at the
checkpoint (docs/DECISIONS.md "Written files are put back as they were"), and the file locks it
holds (fcntl/lockf, OFD, flock) survive the checkpoint and are taken again at restart, or the
restart is refused when another process holds one now (docs/DECISIONS.md "File locks come
back"), and a file the program put on its own stdout stays its output (docs/DECISIONS.md "A
program's own stdio redirection")."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import (
    assert_refused,
    base_env,
    check_inspect,
    checkpoint,
    crac_launch_argv,
    kill_tree,
    launch,
    launch_checkpoint_kill,
    launch_image,
    process_dirs,
    restart,
    run_cycles,
    run_restart,
    tree,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd, describe
from coord_harness import free_port, wait_until
from job_harness import ScriptRun

from crac_py import config

PYTHON = Path(sys.executable)
SQLITE_APP = APPS_DIR / "py" / "ckpt_sqlite.py"
LMDB_APP = APPS_DIR / "py" / "ckpt_lmdb.py"
LOCKS_APP = APPS_DIR / "py" / "ckpt_locks.py"


def test_sqlite_database_in_wal_mode(tmp_path):
    """SQLite changes its files in place after the checkpoint: the log is folded into the
    database and truncated, and the index it maps shared is rewritten. The restart puts the
    written files back as they were (they are small enough to be copied into the image), so they
    agree with the program's memory; before, SQLite failed with SQLITE_IOERR_SHORT_READ ("disk
    I/O error") or found rows its memory did not have."""
    run_cycles(PYTHON, [str(SQLITE_APP), "{work}", "300", "10"], tmp_path)


def test_sqlite_database_over_the_copy_bound_kept_whole(tmp_path):
    """`crac launch --ckpt-open-files` (DMTCP's flag) keeps a copy of every written file whatever
    its size: an 80 MiB SQLite database changed in place after each checkpoint is put back as it
    was, through two restarts (the second checkpoint is the restarted process's: the image records
    the option and the restart goes on with it). The program reads a big row each step and checks
    it against what its memory says it wrote (tests/apps/py/ckpt_sqlite.py)."""
    result = run_cycles(
        PYTHON,
        [str(SQLITE_APP), "{work}", "300", "10", "80"],
        tmp_path,
        launch_opts=["--ckpt-open-files"],
    )
    for gen in result.gens:
        sizes = [f.stat().st_size for f in (gen / "files").glob("fd-*")]
        assert max(sizes, default=0) > 80 << 20, f"no copy of the database in {gen}: {tree(gen)}"


def test_ckpt_open_files_is_resolved_as_dmtcp_users_expect():
    """The flag, else CRAC_CKPT_OPEN_FILES, else DMTCP_CKPT_OPEN_FILES (any value but 0 is on, as
    DMTCP's own launch sets it), else what the image recorded."""
    spec = config.ckpt_open_files_spec
    assert spec(False, environ={}) is False
    assert spec(True, environ={"CRAC_CKPT_OPEN_FILES": "0"}) is True
    assert spec(False, environ={"DMTCP_CKPT_OPEN_FILES": "1"}) is True
    assert spec(False, environ={"DMTCP_CKPT_OPEN_FILES": "yes"}) is True
    assert spec(False, environ={"CRAC_CKPT_OPEN_FILES": "0", "DMTCP_CKPT_OPEN_FILES": "1"}) is False
    assert spec(False, recorded=True, environ={}) is True
    assert spec(False, recorded=True, environ={"CRAC_CKPT_OPEN_FILES": "0"}) is False


def test_sqlite_database_over_the_copy_bound_is_refused(tmp_path):
    """Without --ckpt-open-files a written file with more than 64 MiB of data has no copy; an
    80 MiB database the killed run changed in place after the checkpoint cannot be put back, and
    the restart is refused, naming the file and both options (it used to warn and go on, and
    sqlite then found its database malformed). With --allow-changed-files it goes on, and says
    so. A file that was only appended to is not named (the next test)."""
    ckptdir, logs, work = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "work"
    work.mkdir()
    # after 7 steps: two of its log foldings into the database since the checkpoint
    args = [str(SQLITE_APP), str(work), "300", "10", "80"]
    gen = launch_image(PYTHON, args, ckptdir, out_dir=logs, at_step=10, after=7)
    db_before = (work / "data.db").read_bytes()
    cp = run_restart(gen)
    stderr = cp.stderr.decode()
    assert cp.returncode == 2, describe(cp)
    assert stderr.startswith("crac: error: fd "), describe(cp)
    assert f"{work}/data.db was changed in place since the checkpoint" in stderr, describe(cp)
    assert "--ckpt-open-files" in stderr and "--allow-changed-files" in stderr, describe(cp)
    assert len(stderr.strip().splitlines()) == 1, describe(cp)
    assert (work / "data.db").read_bytes() == db_before, "the refused restart changed the database"
    cp = run_restart(gen, "--allow-changed-files", timeout=300)
    stderr = cp.stderr.decode()
    assert f"{work}/data.db was changed in place since the checkpoint" in stderr, describe(cp)
    assert "crac: warning: fd " in stderr, describe(cp)
    assert "data.db-wal was changed in place" not in stderr, describe(cp)  # put back: no warning


# A log of 80 MiB held open for appending, a line per step (Python's buffered file object).
BIG_APPEND = """
import hashlib, sys, time
log = open(sys.argv[1] + "/big.log", "wb")
log.write(bytes(80 << 20))
for step in range(1, 301):
    log.write(b"line %d\\n" % step)
    log.flush()
    print("step", step, flush=True)
    time.sleep(0.01)
log.close()
print("DONE", hashlib.sha256(open(sys.argv[1] + "/big.log", "rb").read()).hexdigest())
"""


def test_log_over_the_copy_bound_only_appended_to_is_cut_back_in_silence(tmp_path):
    """A written file with more data than a checkpoint copies, only appended to since the
    checkpoint, is cut back to its size then, which makes it the checkpoint's file again: no
    warning (its tail record's last 4 KiB are the same), its modification time given back, and
    the final file the same as an uninterrupted run's."""
    result = run_cycles(PYTHON, ["-c", BIG_APPEND, "{work}"], tmp_path)
    for err in sorted((tmp_path / "logs").glob("*.err")):
        assert "changed in place" not in err.read_text(), f"{err.name}: {err.read_text()}"
    for gen in result.gens:
        assert list((gen / "files").glob("tail-*")), f"no tail record in {gen}: {tree(gen)}"


def test_lmdb_writing_through_its_map(tmp_path):
    """LMDB with writemap writes its B-tree pages in place through a shared mapping of a file as
    large as its map (256 MiB), almost all holes. The copy of a written file was kept only up to
    64 MiB of file size, so this one came back as the killed run had left it, its transactions
    past the checkpoint in it (the self-check failed, or the final digest differed). Written files
    are now measured by their data: the image holds the file's few hundred KiB, holes kept."""
    pytest.importorskip("lmdb", reason="the lmdb package (pip install '.[test]') is not installed")
    result = run_cycles(PYTHON, [str(LMDB_APP), "{work}", "200", "10"], tmp_path)
    for gen in result.gens:
        copies = [f for f in (gen / "files").glob("fd-*") if f.stat().st_size == 256 << 20]
        assert copies, f"no copy of the map-sized file in {gen}: {tree(gen)}"
        assert all(f.stat().st_blocks * 512 < 16 << 20 for f in copies), tree(gen)
        # its copy puts the mapped file back: no checkpoint names the mapping as lost
        assert json.loads((gen / "MANIFEST.json").read_text())["not_saved"] == [], gen


def test_locks_of_every_kind_survive(tmp_path):
    """The program checks every step that it holds its four locks: a checkpoint used to drop the
    fcntl lock on its write-only pid file (the copy of the file opened and closed it in the
    program's process, and any close drops that process's fcntl locks on the file), and a restart
    took none of them again."""
    run_cycles(PYTHON, [str(LOCKS_APP), "{work}", "200", "10"], tmp_path)


def test_locks_shared_with_a_child(tmp_path):
    """A forked child shares the open files of the OFD lock and the flock, and lists both locks
    as its own: only the parent takes them again (the tree's restart reopens the files in each
    process, and the child's second take stopped its restart: "held by another process"). The
    checkpoint signal to the root saves the tree; its restart script brings both back."""
    ckptdir, logs, work = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "work"
    work.mkdir()
    proc = launch(PYTHON, [str(LOCKS_APP), str(work), "300", "20", "fork"], ckptdir, out_dir=logs)
    run = None
    try:
        wait_for_step(proc, 10)
        os.kill(proc.pid, signal.SIGUSR2)
        script = ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script")
        assert len(process_dirs(ckptdir)) == 2, tree(ckptdir)
        wait_for_step(proc, proc.last_step() + 2)
        kill_tree(ckptdir, b"ckpt_locks")
        wait_exit(proc)
        run = ScriptRun(script, logs, "restart", "-p", str(free_port()))
        assert run.wait() == 0, run.report()
        assert "DONE steps=300 locks=4" in run.out.text(), run.report()
        assert "FAIL" not in run.stderr(), run.report()
    finally:
        if run:
            run.kill()
        kill_tree(ckptdir, b"ckpt_locks")
        proc.stop()


def test_restart_refused_while_another_process_holds_a_lock(tmp_path):
    """The image records the four locks (`crac inspect` lists them by descriptor). Another process
    took the pid file's lock after the program was killed: the restart stops with a message naming
    the file and that process (the program must not go on believing it holds the lock), and
    succeeds once the lock is free."""
    ckptdir, logs, work = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "work"
    work.mkdir()
    gen = launch_image(PYTHON, [str(LOCKS_APP), str(work), "100", "10"], ckptdir, out_dir=logs)
    held = {Path(f["path"]).name: f["locks"] for f in check_inspect(gen)["fds"] if f["locks"]}
    assert held == {
        "app.pid": ["fcntl write 0-end"],
        "data": ["fcntl read 10-19"],
        "ofd": ["OFD write 0-end"],
        "shared": ["flock read"],
    }, held
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


def _blocked_reading_stdin(pid: int) -> bool:
    """The process's main thread waits in read(0, ...) (/proc/PID/syscall: "0 0x0 ...")."""
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False


def test_sort_writes_its_output_file_across_a_restart(tmp_path):
    """GNU sort -o FILE opens FILE and puts it on its fd 1 before it reads its input (the
    program's own redirection, not the shell's): restarted, its output must still go to FILE
    (docs/DECISIONS.md "A program's own stdio redirection"). The checkpoint is taken while sort
    waits for the second half of its input on a pipe, and the restart is given that half. Before,
    fd 1 became the restart command's stdout and FILE stayed empty."""
    sort = shutil.which("sort")
    if sort is None:
        pytest.skip("GNU sort (coreutils) is not installed")
    lines = [f"{(i * 7919) % 100003:06d} line {i}\n" for i in range(100000)]
    first, second = "".join(lines[:50000]).encode(), "".join(lines[50000:]).encode()
    want = subprocess.run(
        [sort], input=first + second, capture_output=True, env=base_env(), timeout=60
    ).stdout
    ckptdir, logs, out = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "sorted.txt"
    logs.mkdir()
    argv = crac_launch_argv(sort, ["-o", str(out)], ckptdir)
    with open(logs / "launch.out", "wb") as so, open(logs / "launch.err", "wb") as se:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=so, stderr=se, env=base_env(), cwd=tmp_path
        )
    try:
        assert proc.stdin is not None
        proc.stdin.write(first)  # more than a pipe holds: returns once sort has read most of it
        proc.stdin.flush()
        wait_until(lambda: _blocked_reading_stdin(proc.pid), "sort waiting for more input")
        gen = checkpoint(proc.pid, ckptdir)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    with open(logs / "restart.out", "wb") as so, open(logs / "restart.err", "wb") as se:
        again = subprocess.Popen(
            [*crac_cmd(), "restart", str(gen)],
            stdin=subprocess.PIPE,
            stdout=so,
            stderr=se,
            env=base_env(),
            cwd=tmp_path,
        )
    try:
        again.communicate(second, timeout=300)
    finally:
        if again.poll() is None:
            again.kill()
    err = (logs / "restart.err").read_text(errors="replace")
    assert again.returncode == 0, err
    assert (logs / "restart.out").read_bytes() == b"", "sort's output went to the restart's stdout"
    assert out.read_bytes() == want, err


# dash, no external command (no children): `f 2>/dev/null` puts /dev/null on fd 2 for the
# function's body, where a failing `cd` complains on stderr at every step; a busy loop paces it.
SILENCED = (
    'f() {{ i=0; while [ "$i" -lt {n} ]; do cd /nonexistent-crac-noise;'
    ' [ $((i % 200)) -eq 0 ] && echo "step $((i / 200))"; i=$((i + 1)); done; }}; '
    "f 2>/dev/null; echo DONE"
)


def test_shell_redirect_to_dev_null_stays_silent_after_a_restart(tmp_path):
    """A shell's `f 2>/dev/null` (dash puts /dev/null on its own fd 2 for the function) is the
    program's redirection, not the invocation's stderr: restarted mid-function, the noise still
    goes to /dev/null. Before, fds 0-2 that were not regular files became the restart's own, and
    the silenced messages (a tree's `cmd >/dev/null` output too) came out of the restart."""
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    script = SILENCED.format(n=200 * 400)
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch_checkpoint_kill(sh, ["-c", script], ckptdir, out_dir=logs)
    assert "nonexistent" not in proc.stderr_text(), proc.report()
    res = run_restart(ckptdir, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, describe(res)
    assert res.stdout.endswith(b"step 399\nDONE\n"), describe(res)
    assert b"nonexistent" not in res.stderr, describe(res)


# A script that keeps its stdout on fd 3 and sends its commands' output to a log.
KEEPING = (
    'exec 3>&1 1>prog.log; i=0; while [ "$i" -lt {n} ]; do echo "log $i";'
    ' [ $((i % 200)) -eq 0 ] && echo "step $((i / 200))" >&3; i=$((i + 1)); done; echo DONE >&3'
)


def test_shell_copy_of_its_stdout_writes_to_the_restarts_stdout(tmp_path):
    """`exec 3>&1 1>prog.log`: fd 3 is a copy of the invocation's stdout, fd 1 the program's own
    log. After a restart fd 3 is the restart's stdout (it was the launch's output file reopened
    by path, so the restart's output went to the first run's file), and the log goes on where
    the checkpoint left it."""
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    steps = 300
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    script = KEEPING.format(n=200 * steps)
    proc = launch_checkpoint_kill(sh, ["-c", script], ckptdir, out_dir=logs, cwd=tmp_path)
    first_run = proc.stdout_text()
    res = run_restart(ckptdir, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, describe(res)
    assert res.stdout.endswith(f"step {steps - 1}\nDONE\n".encode()), describe(res)
    assert proc.stdout_text() == first_run, "the restart wrote into the launch's output file"
    log = (tmp_path / "prog.log").read_text().splitlines()
    assert log == [f"log {i}" for i in range(200 * steps)], "the log is not the whole run's"


# dash moves its stdout aside and back around every `echo ... >&2` (dup2 onto fd 1).
REDIRECTING = (
    'i=0; while [ "$i" -lt {n} ]; do echo "e $i" >&2;'
    ' [ $((i % 200)) -eq 0 ] && echo "step $((i / 200))"; i=$((i + 1)); done; echo DONE'
)


def test_shell_redirecting_through_checkpoints_keeps_its_stdout(tmp_path):
    """A shell that dup2s onto its fd 1 many times a millisecond, checkpointed again and again:
    the manager's short-lived descriptors, opened at the lowest free number while the program
    runs (publishing), could be that very number for a moment; the shell's dup2 then failed
    with EBUSY, or replaced the manager's file and lost its own stdout when the manager closed
    "its" number (the shell's writes then failed with EIO, and the checkpoint never
    published). Every checkpoint completes, and every line reaches stdout."""
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    steps = 4000
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(sh, ["-c", REDIRECTING.format(n=200 * steps)], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 5)
        for _ in range(8):
            if proc.poll() is not None:
                break
            checkpoint(proc, ckptdir)
        assert wait_exit(proc) == 0, proc.report()
    finally:
        proc.stop()
    err = proc.stderr_text()
    assert "I/O error" not in err and "busy" not in err, proc.report()
    want = "".join(f"step {k}\n" for k in range(steps)) + "DONE\n"
    assert proc.stdout_text() == want, proc.report()


def test_stdin_from_a_file_reads_on_after_a_restart(tmp_path):
    """`crac launch APP < input`, then `crac restart ... < input`: the restart's stdin is its own,
    and when it is the very file the program was reading, the program reads on from where it was
    (the file's offset at the checkpoint, past what Python had read ahead into its memory) instead
    of from the first line again."""
    lines = 2000  # more than Python reads ahead in one block: the offset is mid-file
    data = tmp_path / "input.txt"
    data.write_text("".join(f"line {k}\n" for k in range(1, lines + 1)))
    app = str(APPS_DIR / "py" / "ckpt_stdin.py")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    logs.mkdir()
    argv = crac_launch_argv(PYTHON, [app, "2"], ckptdir)
    with open(data, "rb") as stdin, open(logs / "launch.out", "wb") as so:
        proc = subprocess.Popen(
            argv, stdin=stdin, stdout=so, stderr=subprocess.DEVNULL, cwd=tmp_path, env=base_env()
        )
    try:
        wait_until(lambda: "step 50\n" in (logs / "launch.out").read_text(), "step 50")
        gen = checkpoint(proc.pid, ckptdir)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    with open(data, "rb") as stdin:
        cp = subprocess.run(
            [*crac_cmd(), "restart", str(gen)],
            stdin=stdin,
            capture_output=True,
            env=base_env(),
            cwd=tmp_path,
            timeout=300,
        )
    out = cp.stdout.decode()
    assert cp.returncode == 0, cp.stderr.decode()
    steps = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("step ")]
    assert steps and steps == list(range(steps[0], lines + 1)) and steps[0] > 50, out[:300]
    assert f"DONE lines={lines} total={lines * (lines + 1) // 2}" in out
