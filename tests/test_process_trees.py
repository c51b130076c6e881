"""Process trees (docs/DECISIONS.md "Process trees"): a process that forks under crac gives a child
that is itself a split process of the same job, checkpointed with it.

* A forked child joins the launch's coordinator as one more worker with its own image directory;
  `crac command -bc` checkpoints parent and child at one moment; both SIGKILLed, the restart
  script brings both back and each one's output equals an uninterrupted run's; twice.
* A launch without a coordinator starts one at its first fork: the checkpoint signal to the root
  checkpoints the whole tree; then the same two cycles.
* A fork-and-wait loop (tests/apps/tree_forkwait.c): restarted, the child is again the child of
  its restarted parent (getppid, waitpid's pid and status), whether the checkpoint found it
  running (its own image) or ended and not yet waited for (the parent's image keeps its status).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    WAIT_TIMEOUT,
    CracProc,
    base_env,
    checkpoint,
    complete_generations,
    kill9_unless_done,
    kill_tree,
    launch,
    process_dirs,
    process_table,
    restart,
    tree,
    tree_running,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd, require_native
from coord_harness import Coordinator, command, free_port, wait_until
from job_harness import (
    Output,
    ScriptRun,
    bcheckpoint,
    check_chain,
    restart_twice,
    segments_of,
    signal_checkpoint,
    wait_every_done,
    wait_past,
    wait_steps,
)

from crac_py.coord import client as coord_client
from crac_py.coord.client import Endpoint
from crac_py.coord.restart_script import listed_generations

STEPS = 300
TAGS = ["T.p", "T.c"]  # tree_counter's parent and child
TREE_PROGRAMS = (b"tree_counter", b"tree_forkwait", b"tree_pgrp_chld")


def _launch(
    apps, tmp: Path, *opts: str, app: str = "tree_counter", ms: int = 20
) -> tuple[CracProc, Output]:
    require_native()
    argv = [*crac_cmd(), "launch", *opts, "-c", str(tmp / "ckpt")]
    tag = "T" if app == "tree_counter" else "F"
    root = CracProc(
        [*argv, "--", str(apps[app]), tag, str(STEPS), str(ms)],
        out_dir=tmp / "logs",
        label="launch",
        env=base_env(),
    )
    return root, Output(root.out_path, "launch")


def _launch_py(tmp: Path, script: str, *args: str) -> tuple[CracProc, Output]:
    """`crac launch -c TMP/ckpt` of tests/apps/py/SCRIPT ARGS under this Python."""
    require_native()
    app = [sys.executable, str(APPS_DIR / "py" / script), *args]
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(tmp / "ckpt"), "--", *app],
        out_dir=tmp / "logs",
        label="launch",
        env=base_env(),
    )
    return root, Output(root.out_path, "launch")


def test_forked_child_is_a_job_member_bc_kill_restart_twice(apps, tmp_path):
    coord = Coordinator(tmp_path / "coord")
    port = coord.port
    root, out = _launch(apps, tmp_path, "--join-coordinator", "-p", str(port))
    runs: list[ScriptRun] = []
    try:
        coord.wait_peers(2)  # the root and its forked child
        wait_steps(out, TAGS, 30, root)
        before = {t: out.last_step(t) for t in TAGS}
        script = bcheckpoint(port)
        after = {t: out.last_step(t) for t in TAGS}
        gens1 = listed_generations(script)
        assert len(gens1) == 2 and all(g.name == "gen-000001" for g in gens1), tree(tmp_path)
        assert sorted(g.parent for g in gens1) == process_dirs(tmp_path / "ckpt")
        wait_past(out, TAGS, after, 2, root)
        kill_tree(tmp_path / "ckpt", *TREE_PROGRAMS)
        wait_exit(root)
        coord.stop()
        chains = {t: [s] for t, s in segments_of(out, TAGS, before, after).items()}
        restart_twice(script, port, tmp_path, chains, runs, TAGS, STEPS)
    except BaseException:
        print(root.report(), coord.log_text(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(tmp_path / "ckpt", *TREE_PROGRAMS)
        root.stop()
        coord.stop()


def test_signal_to_the_root_checkpoints_the_tree(apps, tmp_path):
    """No coordinator at launch: the first fork starts one, so the checkpoint signal to the root
    saves the root and its child at one moment, and the coordinator's restart script restarts
    both."""
    ckptdir = tmp_path / "ckpt"
    root, out = _launch(apps, tmp_path)
    runs: list[ScriptRun] = []
    try:
        script, before, after = signal_checkpoint(root.pid, out, TAGS, ckptdir, 30, root)
        gens = complete_generations(ckptdir)
        assert len(gens) == 2 and set(gens.values()) == {1}, tree(ckptdir)
        wait_past(out, TAGS, after, 2, root)
        kill_tree(ckptdir, *TREE_PROGRAMS)
        wait_exit(root)
        chains = {t: [s] for t, s in segments_of(out, TAGS, before, after).items()}
        restart_twice(script, free_port(), tmp_path, chains, runs, TAGS, STEPS)
        assert "crac: warning" not in root.stderr_text(), root.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(ckptdir, *TREE_PROGRAMS)
        root.stop()


def test_fork_and_wait_loop_restarts_as_a_tree(apps, tmp_path):
    ckptdir, tags = tmp_path / "ckpt", ["F"]
    root, out = _launch(apps, tmp_path, app="tree_forkwait", ms=60)
    runs: list[ScriptRun] = []
    try:
        script, before, after = signal_checkpoint(root.pid, out, tags, ckptdir, 10, root)
        wait_past(out, tags, after, 2, root)
        kill_tree(ckptdir, *TREE_PROGRAMS)
        kill9_if_running(root)
        chains = {t: [s] for t, s in segments_of(out, tags, before, after).items()}
        restart_twice(script, free_port(), tmp_path, chains, runs, tags, STEPS)
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(ckptdir, *TREE_PROGRAMS)
        root.stop()


def _kill_naming(word: str) -> None:
    """SIGKILL every process whose command line holds WORD (a path unique to the test)."""
    for e in os.listdir("/proc"):
        try:
            if e.isdigit() and word.encode() in Path(f"/proc/{e}/cmdline").read_bytes():
                os.kill(int(e), signal.SIGKILL)
        except OSError:
            pass


def test_daemon_that_outlived_its_parent_is_not_waited_for(tmp_path):
    """A daemon's double fork (tests/apps/py/tree_daemon.py): `crac launch` returns when the main
    process ends, the daemon running on; its restart script, too, once the main process it
    restarted ends, the restarted daemon running on (its manifest says a fork made it, and its
    parent in the job is gone). The daemon, released, ends its count where it left off."""
    ckptdir, release = tmp_path / "ckpt", tmp_path / "release"
    root, out = _launch_py(tmp_path, "tree_daemon.py", "D", str(release), "150")
    runs: list[ScriptRun] = []
    try:
        script, _, _ = signal_checkpoint(root.pid, out, ["D.m", "D.d"], ckptdir, 20, root)
        gens = complete_generations(ckptdir)
        assert len(gens) == 2, tree(ckptdir)  # the main process and the daemon
        kill_tree(ckptdir, b"tree_daemon")
        kill9_if_running(root)
        run = ScriptRun(script, tmp_path / "logs", "restart", "-p", str(free_port()))
        runs.append(run)
        assert run.proc.wait(timeout=RUN_TIMEOUT) == 0, run.report()
        assert run.out.lines("D.m")[-1].startswith("DONE"), run.report()
        assert not any(ln.startswith("DONE") for ln in run.out.lines("D.d")), run.report()
        still = run.out.last_step("D.d")
        wait_until(lambda: run.out.last_step("D.d") > still, "the daemon's count going on")
        release.touch()
        wait_until(lambda: any(ln.startswith("DONE") for ln in run.out.lines("D.d")), "D.d DONE")
        counted = [int(ln.split()[1]) for ln in run.out.lines("D.d") if ln.startswith("step")]
        assert counted == list(range(counted[0], counted[-1] + 1)), run.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        release.touch()
        for r in runs:
            r.kill()
        kill_tree(ckptdir, b"tree_daemon")
        _kill_naming(str(release))
        root.stop()


@contextlib.contextmanager
def _first_fork_cleanup(root, runs, ckptdir):
    """Reports the first_fork job on a failure; kills its restarts and processes in any case."""
    try:
        yield
    except BaseException:
        print(root.report(), *(r.report() for r in runs), tree(ckptdir), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(ckptdir, b"first_fork")
        root.stop()


def _restarted_by_script(tmp_path, script, out, tags, after, runs, steps):
    """The job's restart script run after its kill: each process's output up to AFTER, then the
    restart's, is its uninterrupted run of STEPS (RUNS gets the restart, for the caller's
    cleanup)."""
    chains = {t: [s] for t, s in segments_of(out, tags, dict.fromkeys(tags, 0), after).items()}
    run = ScriptRun(script, tmp_path / "logs", "restart", "-p", str(free_port()))
    runs.append(run)
    assert run.wait() == 0, run.report()
    wait_every_done(run, tags)
    for t, seg in segments_of(run.out, tags, None, None).items():
        chains[t].append(seg)
    check_chain(chains, steps)


def test_checkpoint_asked_for_at_the_first_fork_covers_the_job(tmp_path):
    """The checkpoint signal sent as the root forks for the first time
    (tests/apps/py/first_fork.py), while that fork starts the job's coordinator: the request
    goes to the coordinator once it is there, and the job's checkpoint has its restart script
    and every process the restart needs. It was taken as the root's alone, with no restart
    script (the coordinator there by the time it was published), the forking thread saved
    inside the coordinator's start."""
    ckptdir, tags = tmp_path / "ckpt", ["F.r", "F.a", "F.b"]
    root, out = _launch_py(tmp_path, "first_fork.py", "F", "120", "30")
    runs: list[ScriptRun] = []
    with _first_fork_cleanup(root, runs, ckptdir):
        deadline = time.monotonic() + WAIT_TIMEOUT
        while "F forking" not in out.text():
            assert root.poll() is None and time.monotonic() < deadline, root.report()
            time.sleep(0.001)
        os.kill(root.pid, signal.SIGUSR2)
        script = ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the job's restart script")
        after = {t: out.last_step(t) for t in tags}
        wait_past(out, tags, after, 2, root)
        kill_tree(ckptdir, b"first_fork")
        kill9_if_running(root)
        _restarted_by_script(tmp_path, script, out, tags, after, runs, 120)


def test_command_without_a_port_finds_the_coordinator_the_job_started(tmp_path):
    """A job launched without a coordinator starts one at its first fork, on a free port and
    with a random token: `crac command` given no host or port finds it among this user's
    coordinators (crac_py/coord/registry.py), checkpoints the job (bc) and kills it (k), and the
    restart script brings it back as an uninterrupted run ends. Before, `crac command` looked at
    localhost:7779 only and said "coordinator not found"."""
    if coord_client.answers(Endpoint("localhost", 7779)):
        pytest.skip("a coordinator answers at the default port 7779 on this host")
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    env = base_env({"XDG_RUNTIME_DIR": str(run_dir)})
    ckptdir, tags = tmp_path / "ckpt", ["F.r", "F.a", "F.b"]
    require_native()
    app = [sys.executable, str(APPS_DIR / "py" / "first_fork.py"), "F", "150", "30"]
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", *app],
        out_dir=tmp_path / "logs",
        label="launch",
        env=env,
    )
    out = Output(root.out_path, "launch")
    runs: list[ScriptRun] = []
    with _first_fork_cleanup(root, runs, ckptdir):
        listed = run_dir / "crac"
        wait_until(lambda: any(listed.glob("coord-*.json")), "the job's coordinator listed")
        wait_until(
            lambda: "NUM_PEERS=3" in command(None, "s", env=env).stdout, "the job's three processes"
        )
        wait_steps(out, tags, 5, root)
        bc = command(None, "bc", env=env, timeout=RUN_TIMEOUT)
        assert bc.returncode == 0, bc.stderr
        script = ckptdir / "crac_restart_script.sh"
        assert script.exists(), tree(ckptdir)
        after = {t: out.last_step(t) for t in tags}
        wait_past(out, tags, after, 2, root)
        k = command(None, "k", env=env)
        assert k.returncode == 0, k.stderr
        wait_exit(root, WAIT_TIMEOUT)
        # The coordinator exits with its last process, and takes itself off the list.
        wait_until(lambda: not any(listed.glob("coord-*.json")), "the coordinator unlisted")
        gone = command(None, "s", env=env)
        assert gone.returncode == 2 and "coordinator not found at localhost:7779" in gone.stderr
        _restarted_by_script(tmp_path, script, out, tags, after, runs, 150)


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
FORCED = 40  # steps whose fork the kernel is made to give the root's first pid
# Set in the copy of this suite that runs inside a pid namespace of its own.
OWN_PID_NAMESPACE = "CRAC_TEST_OWN_PID_NAMESPACE"


@pytest.mark.parametrize("app", ["tree_forkwait", "tree_pgrp_chld"])
def test_child_forked_after_a_restart_never_takes_a_pid_the_job_knew(apps, tmp_path, app, request):
    """After a restart the root's first pid names the root (its id map): a child forked then
    that got that very pid from the kernel would be the root for the root's own waitpid and
    kill. The test makes the kernel hand that pid out next (ns_last_pid), at each of the
    restarted fork-and-wait loop's first FORCED steps: the pid is held back (or such a child
    forked again), and the loop ends as an uninterrupted run does (it failed on waitpid's
    ECHILD). tree_pgrp_chld counts its SIGCHLDs: a child forked again was one too many for it
    (it ended, the program's handler counted its end).

    It runs in a pid namespace of its own (_in_own_pid_namespace): ns_last_pid is the next pid
    of the writer's namespace, and in the machine's it pushed every process beside this test
    into pids just freed, where another program's kill by a remembered pid hit them (a suite
    running beside this one lost its restart to a SIGTERM from an mpirun of this one's)."""
    if os.environ.get(OWN_PID_NAMESPACE) != "1":
        _in_own_pid_namespace(request.node.nodeid, tmp_path)
        return
    try:
        NS_LAST_PID.write_text(NS_LAST_PID.read_text())
    except OSError as exc:
        pytest.skip(f"cannot set the next pid here ({NS_LAST_PID}: {exc.strerror})")
    ckptdir, tags = tmp_path / "ckpt", ["F"]
    root, out = _launch(apps, tmp_path, app=app, ms=30)
    run = None
    try:
        script, before, after = signal_checkpoint(root.pid, out, tags, ckptdir, 10, root)
        # The root's first pid, as its image directory is named (the oldest of the tree's).
        first_pid = min(int(d.name.rsplit("-", 1)[1]) for d in process_dirs(ckptdir))
        wait_past(out, tags, after, 2, root)
        kill_tree(ckptdir, *TREE_PROGRAMS)
        kill9_if_running(root)
        run = ScriptRun(script, tmp_path / "logs", "restart", "-p", str(free_port()))
        # Once per step of the restarted loop, FORCED times: the next pid is every process's on
        # the machine, so not for the whole run (a suite beside this one has its processes
        # crowd into those pids, where any kill by a pid just freed hits another).
        deadline, step, forced = time.monotonic() + RUN_TIMEOUT, 0, 0
        while run.proc.poll() is None and time.monotonic() < deadline and forced < FORCED:
            if run.out.last_step("F") > step:
                step = run.out.last_step("F")
                forced += _force_next_pid(run, apps[app], first_pid)
            time.sleep(0.002)
        assert forced == FORCED, f"the next pid forced at {forced} steps only\n{run.report()}"
        assert run.wait() == 0, run.report()
        wait_every_done(run, tags)
        chains = {t: [s] for t, s in segments_of(out, tags, before, after).items()}
        for t, seg in segments_of(run.out, tags, None, None).items():
            chains[t].append(seg)
        check_chain(chains, STEPS)
    except BaseException:
        print(root.report(), run.report() if run else "", sep="\n")
        raise
    finally:
        if run is not None:
            run.kill()
        kill_tree(ckptdir, *TREE_PROGRAMS)
        root.stop()


def _in_own_pid_namespace(nodeid: str, tmp_path: Path) -> None:
    """Runs test NODEID again, alone, in a new pid namespace with its own /proc (unshare, which
    needs root here), and passes or fails (or skips) as that run does. bash is the namespace's
    first process: it reaps the orphans reparented to it, as init would."""
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        why = probe.stderr.strip()
        pytest.skip(f"cannot make a pid namespace of its own here (unshare: {why})")
    inner = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"]
    inner += ["-p", "no:xdist", "--basetemp", str(tmp_path / "inner"), nodeid]
    run = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        + ["bash", "-c", '"$@"; exit $?', "bash", *inner],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, OWN_PID_NAMESPACE: "1"},
        capture_output=True,
        text=True,
        timeout=3 * RUN_TIMEOUT,
    )
    report = f"{run.stdout}\n{run.stderr}"
    if run.returncode == 0 and "1 skipped" in run.stdout:
        reason = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
        pytest.skip(f"in its own pid namespace: {reason[0] if reason else report}")
    assert run.returncode == 0 and "1 passed" in run.stdout, report


# Where the restarted loop waits between its forks: nanosleep, clock_nanosleep, rt_sigsuspend,
# wait4, waitid (x86-64 numbers).
WAITING_CALLS = {35, 230, 130, 61, 247}


def _force_next_pid(run: ScriptRun, app: Path, first_pid: int) -> int:
    """Makes FIRST_PID the next pid the kernel hands out, while the restarted root (RUN's process
    running APP whose parent does not) is stopped in one of its waits, never in a fork: one
    forced between crac's look at the next pid and the fork is the race a fork can only lose
    (forked again). 1 when done, 0 when the root was elsewhere (or not found)."""
    table = process_table()
    ours = {
        pid
        for pid, (_, _, sid) in table.items()
        if sid == run.proc.pid and _argv0(pid) == str(app).encode()
    }
    roots = [pid for pid in ours if table[pid][0] not in ours]
    if len(roots) != 1:
        return 0
    root = roots[0]
    os.kill(root, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while Path(f"/proc/{root}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            assert time.monotonic() < deadline, "the restarted root does not stop"
            time.sleep(0.001)
        call = Path(f"/proc/{root}/syscall").read_text().split()[0]
        if not call.isdigit() or int(call) not in WAITING_CALLS:
            return 0
        NS_LAST_PID.write_text(str(first_pid - 1))
        return 1
    finally:
        os.kill(root, signal.SIGCONT)


def _argv0(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return b""


def kill9_if_running(proc: CracProc) -> None:
    if proc.poll() is None:
        proc.kill()
    wait_exit(proc)


def test_fork_inside_another_threads_section_child_checkpoints(apps, tmp_path):
    """Thread B holds a dmtcp_disable_ckpt() section while the main thread forks
    (tests/apps/fork_section.c): the child, which has no thread B, asks for a checkpoint and gets
    it. Its copy of the process's section count used to keep B's section open for ever there: the
    checkpoint waited (and this run hung) until killed."""
    require_native()
    ckptdir = tmp_path / "ckpt"
    argv = [*crac_cmd(), "launch", "-c", str(ckptdir), "--", str(apps["fork_section"])]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env(),
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session holds the child too
        out, err = proc.communicate()
        raise AssertionError(f"the child's checkpoint never came:\n{out}\n{err}") from None
    assert proc.returncode == 0, f"{out}\n{err}"
    assert "child checkpoint 1" in out and "parent: child status 0" in out, out
    # The child's own image (and the parent's: the request checkpoints the tree).
    gens = complete_generations(ckptdir)
    assert len(process_dirs(ckptdir)) == 2 and len(gens) == 2, tree(ckptdir)


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_member_that_cannot_be_restarted_stops_the_whole_restart(apps, tmp_path, damage):
    """The child's image is damaged: truncated (`crac restart` refuses it before its loader
    runs) or one byte of its pages flipped (its loader finds it while filling memory). Either
    tells the coordinator, which stops the parent's restart too (it waits at the restore
    barrier, none of its program has run), so the restart fails with the child's reason instead
    of the parent running on without its child after the barrier's deadline."""
    ckptdir = tmp_path / "ckpt"
    root, out = _launch(apps, tmp_path)
    run = None
    try:
        script, before, after = signal_checkpoint(root.pid, out, TAGS, ckptdir, 30, root)
        kill_tree(ckptdir, *TREE_PROGRAMS)
        wait_exit(root)
        child_dir = next(d for d in process_dirs(ckptdir) if not d.name.endswith(f"-{root.pid}"))
        core = child_dir / "gen-000001" / "upper.core"
        with open(core, "r+b") as f:
            if damage == "truncated":
                f.truncate(core.stat().st_size // 2)
            else:  # a byte among the saved pages, past the headers
                f.seek(core.stat().st_size * 3 // 4)
                byte = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([byte[0] ^ 0x5A]))
        run = ScriptRun(script, tmp_path / "logs", "restart", "--port", str(free_port()))
        status = run.proc.wait(timeout=120)
        err = run.stderr()
        assert status != 0, run.report()
        assert "the restart stops" in err and "could not be restarted" in err, run.report()
        assert not run.out.path.read_text().strip(), run.report()  # no program line ran
    except BaseException:
        print(root.report(), *([run.report()] if run else []), sep="\n")
        raise
    finally:
        if run:
            run.kill()
        kill_tree(ckptdir, *TREE_PROGRAMS)
        root.stop()


def test_restart_keeps_its_directory_while_a_child_forked_after_a_checkpoint_lives(tmp_path):
    """A child forked after its parent's first checkpoint (tests/apps/py/lingering_child.py) and
    outliving the killed parent: the parent's restart goes on writing its own directory
    (gen-000002 beside gen-000001). The child held the parent's directory lock, inherited with
    the descriptor, and the restart wrote a new lineage elsewhere ("another process's
    lineage")."""
    ckptdir, release, logs = tmp_path / "ckpt", tmp_path / "release", tmp_path / "logs"
    app = [str(APPS_DIR / "py" / "lingering_child.py"), str(release), "40", "70"]
    root = launch(sys.executable, app, ckptdir, out_dir=logs)
    again = None
    try:
        wait_for_step(root, 5)
        gen1 = checkpoint(root, ckptdir)
        wait_for_step(root, 45)  # the child is forked
        kill9_unless_done(root)
        again = restart(gen1, out_dir=logs, label="restart")
        wait_for_step(again, 1)
        gen2 = checkpoint(again, ckptdir)
        assert gen2 == gen1.parent / "gen-000002", tree(ckptdir)
        assert "lineage" not in again.stderr_text(), again.report()
        release.touch()
        assert wait_exit(again) == 0, again.report()
        assert again.lines()[-1] == "DONE steps=70", again.report()
    except BaseException:
        print(root.report(), again.report() if again else "", sep="\n")
        raise
    finally:
        release.touch()
        root.stop()
        if again:
            again.stop()


def _ended_then_restarted(
    root: CracProc, out: Output, before: dict[str, int], tmp_path: Path, runs: list[ScriptRun]
) -> None:
    """After a checkpoint that ends the job: the launch ended with status 0, the restart script
    was there by then, the child ended too; the script brings both back at the step after their
    last, twice (restart_twice)."""
    ckptdir = tmp_path / "ckpt"
    assert wait_exit(root) == 0, root.report()
    script = ckptdir / "crac_restart_script.sh"
    assert script.exists(), "the launch ended before the job's restart script was written"
    wait_until(
        lambda: not tree_running(ckptdir, *TREE_PROGRAMS), "the child's exit after the checkpoint"
    )
    after = {t: out.last_step(t) for t in TAGS}
    assert all(after[t] < STEPS for t in TAGS), root.report()
    chains = {t: [s] for t, s in segments_of(out, TAGS, before, after).items()}
    restart_twice(script, free_port(), tmp_path, chains, runs, TAGS, STEPS)
    for t in TAGS:
        resumed = chains[t][1].lines[0]
        assert resumed == f"step {after[t] + 1}", (
            f"{t} resumed at {resumed!r}, not after {after[t]}"
        )


@pytest.mark.parametrize("trigger", ["signal", "interval"])
def test_exit_after_checkpoint_ends_the_whole_tree(apps, tmp_path, trigger):
    """`crac launch --exit-after-checkpoint` of a program that forks: the checkpoint signal to
    the root, or the interval (which the coordinator the tree started runs), ends the root and
    its child once the job's images are written — the tree used to checkpoint and run on."""
    opts = ["--exit-after-checkpoint", *(["-i", "4"] if trigger == "interval" else [])]
    root, out = _launch(apps, tmp_path, *opts)
    runs: list[ScriptRun] = []
    try:
        wait_steps(out, TAGS, 30, root)
        before = {t: out.last_step(t) if trigger == "signal" else 0 for t in TAGS}
        if trigger == "signal":
            os.kill(root.pid, signal.SIGUSR2)
        _ended_then_restarted(root, out, before, tmp_path, runs)
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(tmp_path / "ckpt", *TREE_PROGRAMS)
        root.stop()


def test_coordinator_exit_after_ckpt_ends_the_job(apps, tmp_path):
    """DMTCP's batch pattern, `crac coordinator --exit-after-ckpt` and processes that join it:
    a checkpoint asked for without -kc (`crac command -c`) still ends the job once the images
    and the restart script are written."""
    coord = Coordinator(tmp_path / "coord", "--exit-after-ckpt")
    root, out = _launch(apps, tmp_path, "--join-coordinator", "-p", str(coord.port))
    runs: list[ScriptRun] = []
    try:
        coord.wait_peers(2)
        wait_steps(out, TAGS, 30, root)
        before = {t: out.last_step(t) for t in TAGS}
        asked = command(coord.port, "-c")
        assert asked.returncode == 0, asked.stdout + asked.stderr
        _ended_then_restarted(root, out, before, tmp_path, runs)
    except BaseException:
        print(root.report(), coord.log_text(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_tree(tmp_path / "ckpt", *TREE_PROGRAMS)
        root.stop()
        coord.stop()
