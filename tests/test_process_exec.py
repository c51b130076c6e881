"""Exec under crac (docs/DECISIONS.md "Exec under crac"): an execve from the upper half goes through
crac's loader again, so the new program is a split process of the same job; vfork and posix_spawn
children are split processes too; what crac cannot run is exec'd outside it.

* A program that execs itself in place every few steps (tests/apps/tree_exec_self.c, which checks
  its pid, parent, ignored and blocked signals, an inherited pipe and its cwd across each exec,
  and that failing execs give ENOENT, EACCES and ENOEXEC) through two checkpoint -> SIGKILL ->
  restart cycles: the image directory is the process's, its generations go on across the exec.
* Trees that exec (tests/apps/tree_exec_spawn.c): a fork-exec chain three deep, system(),
  posix_spawn and vfork loops; the checkpoint signal to the root checkpoints the whole tree (the
  processes the children exec'd included), SIGKILL, the restart script, a second checkpoint,
  SIGKILL, the script again to the end; each output equals an uninterrupted run's. popen() (and
  the others) without checkpoints: the same output as natively. Python's subprocess.run in a
  loop the same way (its children close every descriptor with close_range before their exec).
* close_range(3, ~0) in a loop while checkpointed (tests/apps/tree_close_fds.c): the files the
  checkpoint opens while the program runs are not closed under it (docs/DECISIONS.md "The
  program's close_range and the checkpoint's own files").
* A static program exec'd outside crac: its own SIGUSR2 handler gets the signal (neither the
  blocked checkpoint signal nor crac's filter reach it), one warning; a checkpoint while it runs
  is refused naming it, and the last good checkpoint stays the latest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    base_env,
    checkpoint,
    complete_generations,
    latest_complete,
    launch,
    run_cycles,
    tree,
    wait_for_step,
)
from conftest import crac_cmd, require_native
from coord_harness import Coordinator, free_port, wait_until
from job_harness import (
    Output,
    ScriptRun,
    bcheckpoint,
    check_chain,
    end_gate,
    gated_env,
    kill_job,
    segments_of,
    wait_steps,
)

from crac_py.coord.restart_script import listed_generations

APPS = Path(__file__).resolve().parent / "apps"


def test_exec_in_place_keeps_the_process_two_cycles(apps, tmp_path):
    """Checkpoints after an exec, restarts from them, execs again after the restart (with a pid
    the kernel changed, which the program must not see)."""
    res = run_cycles(apps["tree_exec_self"], ["60", "40", "4"], tmp_path, cycles=2)
    assert [g.name for g in res.gens] == ["gen-000001", "gen-000002"]


def test_directory_named_after_the_program_run_at_the_first_checkpoint(apps, tmp_path):
    """A shell that execs the program before any checkpoint: the process's directory is named
    after the program, as DMTCP names an image (it was the shell's: every process of a `make`
    was "make"); once it holds generations, an exec keeps it (the test above)."""
    ckptdir = tmp_path / "ckpt"
    app = apps["ckpt_counter"]
    proc = launch("/bin/sh", ["-c", f'exec "{app}" 100 40'], ckptdir, out_dir=tmp_path / "logs")
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ckptdir)
        assert gen.parent.name.startswith(f"ckpt_{app.name}_"), tree(ckptdir)
    finally:
        proc.stop()


@pytest.mark.parametrize("coordinated", [False, True], ids=["alone", "coordinated"])
def test_checkpoint_signal_during_an_exec_is_not_lost(apps, tmp_path, coordinated):
    """A program that execs itself at every step, sent the checkpoint signal 20 times, each
    once the one before made its generation: every signal makes one, the ones that arrive while
    an exec replaces the process too (they were lost: taken by the loader the exec replaced, or
    by a coordinator whose checkpoint failed when the process's connection went with its exec;
    the program then ran on without a checkpoint), and, coordinated, the ones that come just
    after a checkpoint ended (the coordinator dropped every request for a second after one; on
    a loaded machine the process's publish reached it that much after the test saw the
    generation complete, and a real request was dropped)."""
    ckptdir = tmp_path / "ckpt"
    coord = Coordinator(tmp_path / "coord") if coordinated else None
    opts = ["-j", "-p", str(coord.port)] if coord else []
    args = ["1000000", "10", "1"]
    proc = launch(apps["tree_exec_self"], args, ckptdir, out_dir=tmp_path, opts=opts)
    try:
        wait_for_step(proc, 3)
        for k in range(20):
            checkpoint(proc, ckptdir)
            time.sleep(0.01 * (k % 7))  # the next signal at another point of the cycle
    except BaseException:
        if coord:
            print(coord.log_text())
        raise
    finally:
        proc.stop()
        if coord:
            coord.stop()


def test_close_range_spares_the_checkpoints_own_files(apps, tmp_path):
    """A program that closes every descriptor above 2 with close_range in a loop (as Python's
    subprocess does in each child before its exec) while it is checkpointed: the files the
    checkpoint opens while the program runs (its directory scans, the image published after the
    program resumed: MANIFEST.json, the loader's hash) are not closed under it, so each
    generation is complete and restarts."""
    res = run_cycles(apps["tree_close_fds"], ["60", "40"], tmp_path, cycles=2)
    assert [g.name for g in res.gens] == ["gen-000001", "gen-000002"]


def test_child_forked_while_its_parent_is_held_can_exec(apps, tmp_path):
    """A fork while the parent's checkpoint holds its threads (the checkpoint waits for the
    parent's dmtcp_disable_ckpt() section; the fork comes from inside it): the child, which that
    checkpoint does not include, execs and ends; it used to see the parent's "threads held" and
    re-issue its exec for ever."""
    go = tmp_path / "go"
    root = Tree([str(apps["tree_fork_holding"]), str(go)], tmp_path)
    try:
        wait_until(lambda: "in section" in root.out.text(), "the section")
        os.kill(root.proc.pid, signal.SIGUSR2)
        wait_until(lambda: "waits for the program to leave" in root.err.read_text(), "the wait")
        go.write_text("")
        assert root.proc.wait(timeout=120) == 0, root.report()
        assert root.out.text().endswith("DONE\n"), root.report()
        assert len(complete_generations(tmp_path / "ckpt")) == 1, tree(tmp_path / "ckpt")
    except BaseException:
        print(root.report())
        raise
    finally:
        root.kill()


class Tree:
    """A launch in a session of its own (so every process it starts can be SIGKILLed at once),
    its output in one file."""

    def __init__(self, argv: list[str], tmp: Path, env: dict[str, str] | None = None):
        require_native()
        logs = tmp / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.out = Output(logs / "launch.out", "launch")
        self.err = logs / "launch.err"
        with open(self.out.path, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen(
                [*crac_cmd(), "launch", "-c", str(tmp / "ckpt"), "--", *argv],
                stdin=subprocess.DEVNULL,
                stdout=o,
                stderr=e,
                env=env or base_env(),
                start_new_session=True,
            )

    def kill(self) -> None:
        if self.proc.returncode is None:  # once reaped, its group's id may be another test's
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=60)

    def report(self) -> str:
        return (
            f"--- launch (status {self.proc.poll()}) ---\nstderr:\n"
            f"{self.err.read_text(errors='replace')[-3000:]}\nstdout tail:\n"
            f"{self.out.text()[-2000:]}"
        )


def _two_cycles(
    root: Tree, tmp: Path, tag: str, steps: int, first: int, gate: Path | None = None
) -> None:
    """Checkpoint signal to the root at step FIRST, SIGKILL the tree, restart it with the
    coordinator's script, `-bc`, SIGKILL, the script again to the end; the output over the three
    runs equals the uninterrupted run's. GATE: the program's end gate (gated_env), opened for
    the last run only, so the first restart cannot end before its `-bc`. The program waits at it
    before its last step: a `-bc` that a loaded machine lets come late still has a step after
    it (it once came after the last, and the steps waited for never came)."""
    ckptdir, logs, tags = tmp / "ckpt", tmp / "logs", [tag]
    reachable = steps - 1 if gate is not None else steps  # without opening the gate
    runs: list[ScriptRun] = []
    try:
        wait_steps(root.out, tags, first, root.proc)
        before = {tag: root.out.last_step(tag)}
        os.kill(root.proc.pid, signal.SIGUSR2)
        script = ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script")
        after = {tag: root.out.last_step(tag)}
        wait_steps(root.out, tags, min(after[tag] + 2, reachable), root.proc)
        root.kill()
        chains = {t: [s] for t, s in segments_of(root.out, tags, before, after).items()}

        port = free_port()
        run1 = ScriptRun(script, logs, "restart1", "-p", str(port))
        runs.append(run1)
        wait_steps(run1.out, tags, 1, run1.proc, extra=run1.report())
        start = run1.out.last_step(tag)
        wait_steps(run1.out, tags, min(start + 3, reachable), run1.proc, extra=run1.report())
        before = {tag: run1.out.last_step(tag)}
        assert bcheckpoint(port) == script
        after = {tag: run1.out.last_step(tag)}
        gens = listed_generations(script)
        assert gens and all(latest_complete(g.parent) == g for g in gens), tree(ckptdir)
        wait_steps(run1.out, tags, min(after[tag] + 2, reachable), run1.proc, extra=run1.report())
        kill_job(port, run1)
        for t, seg in segments_of(run1.out, tags, before, after).items():
            chains[t].append(seg)

        if gate is not None:
            end_gate(gate)
        run2 = ScriptRun(script, logs, "restart2", "-p", str(port))
        runs.append(run2)
        assert run2.wait() == 0, run2.report()
        for t, seg in segments_of(run2.out, tags, None, None).items():
            chains[t].append(seg)
        check_chain(chains, steps)
        for r in runs:
            assert "crac: error" not in r.stderr(), r.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        root.kill()


@pytest.mark.parametrize("mode", ["chain", "system", "popen", "spawn", "vfork"])
def test_exec_tree_same_as_native(apps, tmp_path, mode):
    """Without checkpoints: each way of starting programs gives what it gives natively."""
    app = apps["tree_exec_spawn"]
    args = [mode, "X", "8", "10"]
    native = subprocess.run([str(app), *args], capture_output=True, timeout=60)
    crac = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), "--", str(app), *args],
        capture_output=True,
        timeout=300,
        env=base_env(),
    )
    assert native.returncode == 0, native.stderr
    assert (crac.returncode, crac.stdout) == (0, native.stdout), crac.stderr
    assert b"crac:" not in crac.stderr, crac.stderr


# popen's pipe is open across nearly every checkpoint of its loop: shared between the processes
# and made again once by the tree's restart (crac_py/launch/share.py).
@pytest.mark.parametrize("mode", ["chain", "system", "popen", "spawn", "vfork"])
def test_exec_tree_two_cycles(apps, tmp_path, mode):
    """(The end gate: a loaded machine once took the first restart's `-bc` past the program's
    last step, and the steps after it never came.)"""
    steps, gate = 40, tmp_path / "gate"
    argv = [str(apps["tree_exec_spawn"]), mode, "X", str(steps), "60"]
    root = Tree(argv, tmp_path, gated_env(base_env(), gate))
    _two_cycles(root, tmp_path, "X", steps, 8, gate)
    # every process of the first checkpoint was under crac: the tree's images are complete
    assert len(complete_generations(tmp_path / "ckpt")) >= 1


SUBPROCESS_LOOP = """
import os, subprocess, sys, time
steps = int(sys.argv[1])
h = 0xCBF29CE484222325
for k in range(1, steps + 1):
    while k == steps and not os.path.exists(os.environ.get("TEST_END_GATE", "/")):  # the gate
        time.sleep(0.02)
    r = subprocess.run(["sh", "-c", f"sleep 0.05; echo {k}; exit {k % 50}"], capture_output=True)
    if r.returncode != k % 50 or r.stdout != f"{k}\\n".encode():
        sys.exit(f"step {k}: status {r.returncode}, output {r.stdout!r}, errors {r.stderr!r}")
    for i in range(8):
        h ^= (k >> (8 * i)) & 0xFF
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    print(f"P step {k}", flush=True)
print(f"P DONE checksum={h:016x} steps={steps}", flush=True)
"""


def test_python_subprocess_loop_two_cycles(tmp_path):
    """Python's subprocess.run in a loop (vfork and exec in _posixsubprocess, the child's output
    through a pipe), with the interpreter's real path (a pyenv shim script is refused)."""
    steps = 30
    script = tmp_path / "loop.py"
    script.write_text(SUBPROCESS_LOOP)
    python = os.path.realpath(sys.executable)
    gate = tmp_path / "end_gate"
    root = Tree([python, "-S", str(script), str(steps)], tmp_path, gated_env(base_env(), gate))
    _two_cycles(root, tmp_path, "P", steps, 5, gate)


@pytest.fixture(scope="module")
def static_app(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("static") / "tree_exec_static"
    cp = subprocess.run(
        [
            "gcc",
            "-O2",
            "-Wall",
            "-Werror",
            "-static",
            "-o",
            str(out),
            str(APPS / "tree_exec_static.c"),
        ],
        capture_output=True,
        text=True,
    )
    if cp.returncode != 0:
        pytest.fail(f"cannot build a static program (glibc's static libc missing?)\n{cp.stderr}")
    return out


def test_static_program_runs_outside_and_refuses_checkpoint(apps, static_app, tmp_path):
    """tree_exec_outer forks and execs the static program, which writes its pid and waits for
    SIGUSR2 with its own handler; a checkpoint meanwhile is refused naming it."""
    ckptdir = tmp_path / "ckpt"
    pidfile, donefile = tmp_path / "static.pid", tmp_path / "static.done"
    root = Tree(
        [str(apps["tree_exec_outer"]), str(static_app), str(pidfile), str(donefile)], tmp_path
    )
    try:
        wait_steps(root.out, ["O"], 3, root.proc)
        # a good checkpoint first (the static program does not run yet)
        os.kill(root.proc.pid, signal.SIGUSR2)
        wait_until(lambda: len(complete_generations(ckptdir)) >= 1, "the first checkpoint")
        first = dict(complete_generations(ckptdir))
        (tmp_path / "go").write_text("")  # the outer program starts the static one now
        wait_until(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"), "static pid")
        spid = int(pidfile.read_text())
        assert os.readlink(f"/proc/{spid}/exe") == str(static_app)
        os.kill(root.proc.pid, signal.SIGUSR2)  # refused: the static program is in the tree
        wait_until(lambda: "checkpoint refused" in root.err.read_text(), "the refusal")
        err = root.err.read_text()
        assert f"({static_app})" in err and "runs outside crac" in err, err
        assert "crac: warning:" in err and "statically linked" in err, err
        # its own handler takes SIGUSR2: it was neither blocked nor caught by crac
        os.kill(spid, signal.SIGUSR2)
        assert root.proc.wait(timeout=120) == 0, root.report()
        assert donefile.read_text() == "got USR2\n"
        assert complete_generations(ckptdir) == first, tree(ckptdir)
        assert "O DONE" in root.out.text(), root.report()
    except BaseException:
        print(root.report())
        raise
    finally:
        root.kill()


def test_exec_failure_errno_matches_native(apps, tmp_path):
    """Without checkpoints: the self-exec program's failing execs (ENOENT, EACCES, ENOEXEC) and
    its execs in place give what they give natively."""
    app = apps["tree_exec_self"]
    native = subprocess.run([str(app), "12", "0", "3"], capture_output=True, timeout=60)
    crac = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), "--", str(app), "12", "0", "3"],
        capture_output=True,
        timeout=120,
        env=base_env(),
    )
    assert native.returncode == 0, native.stderr
    assert (crac.returncode, crac.stdout) == (0, native.stdout), crac.stderr
    assert b"crac:" not in crac.stderr, crac.stderr
