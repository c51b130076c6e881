"""Acceptance of jobs with real processes: jobs of `crac launch --join-coordinator` processes
(tests/apps/coord_counter.c) under one `crac coordinator`.

* 4 independent processes: `crac command -bc`, SIGKILL everything, run crac_restart_script.sh
  from a fresh shell, every process continues where its checkpoint left it and its output equals
  an uninterrupted run's; twice. (Process trees, a process that forks a checkpointed child, are
  not supported: docs/CLI.md.)
* The checkpoint signal sent to one process checkpoints the whole job; kcheckpoint; `crac
  restart JOBDIR` with and without the script.
* Faults: one process killed in the middle of a coordinated checkpoint, one that hangs (phase
  timeout), the coordinator killed during a checkpoint, two jobs on two coordinators, a client
  with the wrong secret, --join-coordinator with no coordinator.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    WAIT_TIMEOUT,
    CracProc,
    assert_same_output,
    base_env,
    check_steps_contiguous,
    complete_generations,
    fail,
    generations,
    kill9,
    latest_complete,
    process_dirs,
    tree,
    wait_exit,
)
from conftest import crac_cmd
from coord_harness import (
    Coordinator,
    command,
    command_bg,
    describe_text,
    finish,
    free_port,
    request,
    status_lines,
    wait_until,
)
from job_harness import (
    Job,
    Output,
    ScriptRun,
    bcheckpoint,
    check_chain,
    expected,
    kill_job,
    segments_of,
    wait_past,
    wait_steps,
)

from crac_py.coord.restart_script import listed_generations

TAGS4 = ["p1", "p2", "p3", "p4"]


@pytest.fixture(scope="module")
def counter(apps) -> Path:
    return apps["coord_counter"]


def launch_segments(job: Job, before: dict[str, int], after: dict[str, int]) -> dict:
    return {t: segments_of(job.output(t), [t], before, after)[t] for t in job.tags}


def restart_and_check(job: Job, script: Path, chains: dict, steps: int, runs: list) -> None:
    """Runs the restart SCRIPT (the ScriptRun is added to RUNS, for the caller's report and
    clean-up); it must end with 0 and each process's output continue its chain in CHAINS."""
    run = ScriptRun(script, job.logs, "restart", "-p", str(free_port()))
    runs.append(run)
    assert run.wait() == 0, run.report()
    for t, seg in segments_of(run.out, job.tags, None, None).items():
        chains[t].append(seg)
    check_chain(chains, steps, job.ckptdir)


def finish_launched(job: Job, tags: list[str] | None = None) -> None:
    """The launched processes run to their end: status 0, uninterrupted output."""
    for t in tags or job.tags:
        p = job.procs[t]
        status = wait_exit(p)
        if status != 0:
            fail(f"{p.label} exited with status {status}\n{job.coord.log_text()}", p)
        lines = job.output(t).lines(t)
        check_steps_contiguous(lines, p.label)
        assert_same_output(lines, expected(job.steps), f"{p.label}'s output")


def test_four_processes_bc_kill_restart_twice(counter, tmp_path):
    steps = 400
    job = Job(counter, tmp_path, TAGS4, steps)
    port = job.coord.port
    runs: list[ScriptRun] = []
    try:
        kv = status_lines(command(port, "s"))
        assert (kv["NUM_PEERS"], kv["RUNNING"]) == ("4", "yes")
        job.wait_steps(40)
        before = job.last_steps()
        script = bcheckpoint(port)
        after = job.last_steps()
        gens1 = listed_generations(script)
        assert len(gens1) == 4 and all(g.name == "gen-000001" for g in gens1), tree(job.ckptdir)
        assert sorted(g.parent for g in gens1) == process_dirs(job.ckptdir)
        job.wait_past(after, 2)
        for p in job.procs.values():
            kill9(p)
        job.coord.stop()  # everything is gone, the coordinator too
        chains = {t: [s] for t, s in launch_segments(job, before, after).items()}

        # first restart: the script starts a coordinator on the old port, then the processes
        run1 = ScriptRun(script, job.logs, "restart1")
        runs.append(run1)
        wait_steps(run1.out, TAGS4, 1, run1.proc, extra=run1.report())
        first = {t: run1.out.last_step(t) for t in TAGS4}
        wait_until(lambda: request(port, "status")["num_peers"] == 4, "4 restarted processes")
        wait_past(run1.out, TAGS4, first, 40, run1.proc, extra=run1.report())
        before2 = {t: run1.out.last_step(t) for t in TAGS4}
        script2 = bcheckpoint(port)
        after2 = {t: run1.out.last_step(t) for t in TAGS4}
        assert script2 == script
        gens2 = listed_generations(script)
        assert sorted(g.parent for g in gens2) == sorted(g.parent for g in gens1)
        assert all(g.name == "gen-000002" for g in gens2), tree(job.ckptdir)
        # The job's count goes on from the images, as DMTCP's does (the restart's coordinator
        # counted from 1 again before).
        assert request(port, "status")["generation"] == 2
        assert "after job checkpoint 2 (" in script.read_text().splitlines()[1]
        wait_past(run1.out, TAGS4, after2, 2, run1.proc, extra=run1.report())
        kill_job(port, run1)
        for t, seg in segments_of(run1.out, TAGS4, before2, after2).items():
            chains[t].append(seg)

        # second restart, run to the end
        run2 = ScriptRun(script, job.logs, "restart2")
        runs.append(run2)
        status = run2.wait()
        assert status == 0, run2.report()
        for t, seg in segments_of(run2.out, TAGS4, None, None).items():
            chains[t].append(seg)
        check_chain(chains, steps, job.ckptdir)
    except BaseException:
        print(job.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        job.stop()


def test_signal_to_one_process_checkpoints_the_job(counter, tmp_path):
    job = Job(counter, tmp_path, ["a", "b", "c"], 300)
    try:
        job.wait_steps(20)
        os.kill(job.procs["b"].pid, signal.SIGUSR2)
        script = job.ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script", timeout=WAIT_TIMEOUT)
        gens = complete_generations(job.ckptdir)
        assert len(gens) == 3 and set(gens.values()) == {1}, tree(job.ckptdir)
        assert request(job.coord.port, "status")["generation"] == 1
        finish_launched(job)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.stop()


def test_signal_to_every_process_gives_one_checkpoint(counter, tmp_path):
    """A scheduler that signals every process of the job (scancel --signal=USR2) gets one job
    checkpoint, not one per process."""
    job = Job(counter, tmp_path, ["s1", "s2", "s3", "s4"], 300)
    try:
        job.wait_steps(20)
        for p in job.procs.values():
            os.kill(p.pid, signal.SIGUSR2)
        script = job.ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script", timeout=WAIT_TIMEOUT)
        time.sleep(2.0)
        gens = complete_generations(job.ckptdir)
        assert len(gens) == 4 and set(gens.values()) == {1}, tree(job.ckptdir)
        assert request(job.coord.port, "status")["generation"] == 1
        finish_launched(job)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.stop()


def test_kcheckpoint_then_restart(counter, tmp_path):
    steps = 250
    job = Job(counter, tmp_path, ["x", "y"], steps)
    runs = []
    try:
        job.wait_steps(30)
        before = job.last_steps()
        cp = command(job.coord.port, "kc")
        assert cp.returncode == 0, describe_text(cp)
        for t in job.tags:
            assert wait_exit(job.procs[t]) == 0, job.report()
        after = job.last_steps()
        chains = {t: [s] for t, s in launch_segments(job, before, after).items()}
        restart_and_check(job, job.ckptdir / "crac_restart_script.sh", chains, steps, runs)
    except BaseException:
        print(job.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        job.stop()


def test_crac_restart_job_directory(counter, tmp_path):
    """`crac restart JOBDIR` restarts every process: through the job's script when it is there,
    else each process directory's latest generation under a coordinator it starts."""
    steps = 300
    job = Job(counter, tmp_path, ["m", "n"], steps)
    try:
        job.wait_steps(30)
        before = job.last_steps()
        bcheckpoint(job.coord.port)
        after = job.last_steps()
        job.wait_past(after, 2)
        for p in job.procs.values():
            kill9(p)
        job.coord.stop()
        chains = {t: [s] for t, s in launch_segments(job, before, after).items()}

        argv = [*crac_cmd(), "restart", str(job.ckptdir)]
        r1 = CracProc(argv, out_dir=job.logs, label="restart-jobdir", env=base_env(), cwd=tmp_path)
        try:
            out = job_output(r1)
            wait_steps(out, job.tags, 1, r1)
            wait_until(lambda: request(job.coord.port, "status")["num_peers"] == 2, "2 peers")
            wait_past(out, job.tags, after, 30, r1)
            before2 = {t: out.last_step(t) for t in job.tags}
            bcheckpoint(job.coord.port)
            after2 = {t: out.last_step(t) for t in job.tags}
            wait_past(out, job.tags, after2, 2, r1)
            pids = [p["pid"] for p in request(job.coord.port, "list")["peers"]]
            coord_pid = request(job.coord.port, "status")["pid"]
            for pid in [*pids, coord_pid]:
                try:  # a loaded machine: a process may have run to its end meanwhile
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_exit(r1)
        finally:
            r1.stop()
        for t, seg in segments_of(out, job.tags, before2, after2).items():
            chains[t].append(seg)

        (job.ckptdir / "crac_restart_script.sh").unlink()
        # Its own port: on the default one another test, or a second suite beside, may answer.
        argv2 = [*crac_cmd(), "restart", "-p", str(free_port()), str(job.ckptdir)]
        r2 = CracProc(
            argv2, out_dir=job.logs, label="restart-noscript", env=base_env(), cwd=tmp_path
        )
        status = wait_exit(r2)
        assert status == 0, r2.report()
        for t, seg in segments_of(job_output(r2), job.tags, None, None).items():
            chains[t].append(seg)
        check_chain(chains, steps, job.ckptdir)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.stop()


def job_output(proc: CracProc) -> Output:
    return Output(proc.out_path, proc.label)


# ---------------------------------------------------------------------------------------------
# Faults


def no_new_generation(job: Job, gen: int) -> None:
    for procdir in process_dirs(job.ckptdir):
        latest = latest_complete(procdir)
        assert latest is not None and latest.name == f"gen-{gen:06d}", tree(job.ckptdir)
        assert [g.name for g in generations(procdir)][-1] == f"gen-{gen:06d}", tree(job.ckptdir)


class HeldWriters:
    """A job whose forked checkpoint writers start writing only once a file exists (the test knob
    CRAC_TEST_WRITER_HOLD, loader/ckpt/ckpt_run.c): while it is absent, every process of a
    checkpoint runs on with its image unwritten, however fast the machine writes."""

    def __init__(self, counter: Path, tmp_path: Path, tags: list[str], steps: int, mib: int):
        self.hold = tmp_path / "writers-go"
        self.job = Job(
            counter,
            tmp_path,
            tags,
            steps,
            dirty_mib=mib,
            env={"CRAC_TEST_WRITER_HOLD": str(self.hold)},
        )

    def release(self) -> None:
        self.hold.touch()

    def held_checkpoint(self):
        """Starts `crac command -bc` with the writers held; returns it once every process has
        resumed its program (the coordinator waits for their `durable`)."""
        self.hold.unlink(missing_ok=True)
        bc = command_bg(self.job.coord.port, "bc")
        n = len(self.job.tags)

        def flushing() -> bool:
            states = [p["state"] for p in request(self.job.coord.port, "list")["peers"]]
            return states.count("FLUSHING") == n

        wait_until(flushing, "every process resumed with its writer running")
        return bc

    def no_tmp_left(self, but: int = 0) -> bool:
        """No unfinished generation in any process directory (BUT: that pid's excepted: a
        killed process's is removed by its next checkpoint)."""
        dirs = [d for d in process_dirs(self.job.ckptdir) if not d.name.endswith(f"-{but}")]
        return not [p for d in dirs for p in d.glob("gen-*.tmp")]


def test_job_runs_while_its_writers_write(counter, tmp_path):
    """A coordinated checkpoint pauses each process only to capture its state: with every forked
    writer held back, all the programs go on (their steps advance, rewriting their memory) while
    `-bc` waits; it returns once every image is durable and published, and the images hold the
    state at the cut: the job restarts from them identically."""
    steps = 400
    tags = ["r1", "r2", "r3"]
    held = HeldWriters(counter, tmp_path, tags, steps, mib=64)
    job = held.job
    runs = []
    try:
        job.wait_steps(10)
        before = job.last_steps()
        bc = held.held_checkpoint()
        at_resume = job.last_steps()
        after_cut = at_resume  # the cut fell before the programs resumed
        wait_until(
            lambda: all(job.last_steps()[t] >= at_resume[t] + 5 for t in tags),
            "every program running on while its writer is held",
        )
        assert bc.poll() is None, "bc returned before the images were written"
        assert complete_generations(job.ckptdir) == {}, tree(job.ckptdir)
        held.release()
        rc, out, err = finish(bc)
        assert rc == 0 and "GENERATION=1" in out, (out, err, job.coord.log_text())
        script = Path(out.splitlines()[1].removeprefix("RESTART_SCRIPT="))
        assert set(complete_generations(job.ckptdir).values()) == {1}, tree(job.ckptdir)
        assert held.no_tmp_left(), tree(job.ckptdir)
        for p in job.procs.values():
            kill9(p)
        chains = {t: [s] for t, s in launch_segments(job, before, after_cut).items()}
        restart_and_check(job, script, chains, steps, runs)
    except BaseException:
        print(job.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        held.release()
        for r in runs:
            r.kill()
        job.stop()


def test_process_killed_mid_checkpoint(counter, tmp_path):
    """One process SIGKILLed while the job's forked writers write its images (held back by the
    test knob, so the window lasts): the coordinator abandons the checkpoint and says why; no
    process publishes the new generation, the others remove their unfinished one, go on and
    finish correctly; the previous generation stays the valid one and restarts the whole job,
    the killed process included."""
    steps = 300
    tags = ["k1", "k2", "k3"]
    held = HeldWriters(counter, tmp_path, tags, steps, mib=64)
    job = held.job
    runs = []
    try:
        job.wait_steps(10)
        held.release()
        before = job.last_steps()
        script = bcheckpoint(job.coord.port)
        after = job.last_steps()
        saved = script.read_text()
        bc = held.held_checkpoint()
        victim = job.procs["k2"]
        victim.send_signal(signal.SIGKILL)
        rc, out, err = finish(bc)
        assert rc == 2, (out, err)
        assert "abandoned" in err and f"pid {victim.pid}" in err, err
        assert "job generation 1" in err
        held.release()  # the survivors' writers finish; their images must not be published
        wait_until(lambda: held.no_tmp_left(victim.pid), "the unfinished generations removed")
        assert script.read_text() == saved
        st = request(job.coord.port, "status")
        assert (st["num_peers"], st["running"], st["generation"]) == (2, "yes", 1)
        finish_launched(job, ["k1", "k3"])
        no_new_generation(job, 1)
        # the previous checkpoint restarts the whole job, the killed process too
        chains = {t: [s] for t, s in launch_segments(job, before, after).items()}
        restart_and_check(job, script, chains, steps, runs)
    except BaseException:
        print(job.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        held.release()
        for r in runs:
            r.kill()
        job.stop()


def test_process_hangs_during_checkpoint(counter, tmp_path):
    """A process that does not answer a phase (stopped) makes the coordinator abandon the
    checkpoint after --phase-timeout; once it runs again the job goes on, and the next
    checkpoint of the whole job succeeds."""
    job = Job(counter, tmp_path, ["h1", "h2", "h3"], 400, coord_args=("--phase-timeout", "3"))
    try:
        job.wait_steps(10)
        hung = job.procs["h3"]
        hung.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            cp = command(job.coord.port, "bc")
            assert cp.returncode == 2, describe_text(cp)
            assert "did not answer the checkpoint phase within 3 s" in cp.stderr
            assert f"pid {hung.pid}" in cp.stderr
            assert time.monotonic() - t0 < 30
        finally:
            hung.send_signal(signal.SIGCONT)
        assert complete_generations(job.ckptdir) == {}, tree(job.ckptdir)
        job.wait_steps(job.last_steps()["h3"] + 5)
        bcheckpoint(job.coord.port)
        gens = complete_generations(job.ckptdir)
        assert len(gens) == 3 and len(set(gens.values())) == 1, tree(job.ckptdir)
        finish_launched(job)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.stop()


def test_coordinator_killed_during_checkpoint(counter, tmp_path):
    """The coordinator dies while the job is suspended: every process abandons the checkpoint,
    resumes and finishes on its own; the previous generation stays the latest."""
    job = Job(counter, tmp_path, ["c1", "c2", "c3"], 300)
    try:
        job.wait_steps(10)
        bcheckpoint(job.coord.port)
        stopped = job.procs["c3"]
        stopped.send_signal(signal.SIGSTOP)
        try:
            cp = command(job.coord.port, "c")
            assert cp.returncode == 0, describe_text(cp)

            def parked() -> bool:
                states = [p["state"] for p in request(job.coord.port, "list")["peers"]]
                return states.count("SUSPENDED") == 2

            wait_until(parked, "the other two processes suspended")
            job.coord.stop()
        finally:
            stopped.send_signal(signal.SIGCONT)
        finish_launched(job)
        no_new_generation(job, 1)
        for procdir in process_dirs(job.ckptdir):
            assert not list(procdir.glob("*.tmp")), tree(job.ckptdir)
    except BaseException:
        print(job.report())
        raise
    finally:
        job.stop()


def test_two_jobs_two_coordinators(counter, tmp_path):
    # long enough that A still runs while B (a second coordinator, two more processes) starts
    # on a loaded machine
    a = Job(counter, tmp_path / "a", ["a1", "a2"], 1500, ms=10)
    b = Job(counter, tmp_path / "b", ["b1", "b2"], 1500, ms=10)
    try:
        a.wait_steps(5)
        b.wait_steps(5)
        assert status_lines(command(a.coord.port, "s"))["NUM_PEERS"] == "2"
        assert status_lines(command(b.coord.port, "s"))["NUM_PEERS"] == "2"
        script_a = bcheckpoint(a.coord.port)
        assert set(complete_generations(a.ckptdir).values()) == {1}
        assert complete_generations(b.ckptdir) == {}, tree(b.ckptdir)
        script_b = bcheckpoint(b.coord.port)
        assert script_a.parent == a.ckptdir and script_b.parent == b.ckptdir
        assert {g.parent.parent for g in listed_generations(script_b)} == {b.ckptdir}
        assert request(a.coord.port, "status")["generation"] == 1
        finish_launched(a)
        finish_launched(b)
    except BaseException:
        print(a.report(), b.report(), sep="\n")
        raise
    finally:
        a.stop()
        b.stop()


def test_wrong_secret_refused(counter, tmp_path):
    coord = Coordinator(tmp_path / "coord", "--token", "right")
    logs = tmp_path / "logs"
    procs = []
    try:
        argv = [
            *crac_cmd(),
            "launch",
            "--join-coordinator",
            "-p",
            str(coord.port),
            "--coord-token",
            "wrong",
            "-c",
            str(tmp_path),
            "--",
            str(counter),
            "w",
            "5",
        ]
        bad = CracProc(argv, out_dir=logs, label="wrong", env=base_env(), cwd=tmp_path)
        procs.append(bad)
        assert wait_exit(bad, WAIT_TIMEOUT) == 2, bad.report()
        # A token on the command line is warned about (ps shows it), then refused.
        err = [ln for ln in bad.stderr_text().splitlines() if ln.strip()]
        assert len(err) == 2 and err[0].startswith("crac: warning: --coord-token"), err
        assert err[1].startswith("crac: error: ") and "token" in err[1], err
        assert bad.stdout_text() == ""
        assert request(coord.port, "status", token="right")["num_peers"] == 0
        env = base_env({"CRAC_COORD_TOKEN": "right"})
        argv = [
            *crac_cmd(),
            "launch",
            "--join-coordinator",
            "-p",
            str(coord.port),
            "-c",
            str(tmp_path),
            "--",
            str(counter),
            "ok",
            "100",
            "20",
        ]
        good = CracProc(argv, out_dir=logs, label="right", env=env, cwd=tmp_path)
        procs.append(good)
        wait_until(
            lambda: request(coord.port, "status", token="right")["num_peers"] == 1,
            "the process with the right secret",
        )
        assert wait_exit(good) == 0, good.report()
    finally:
        for p in procs:
            p.stop()
        coord.stop()


def test_join_without_coordinator(counter, tmp_path):
    port = free_port()
    argv = [*crac_cmd(), "launch", "--join-coordinator", "-p", str(port), "--", str(counter), "j"]
    p = CracProc(argv, out_dir=tmp_path, label="join", env=base_env(), cwd=tmp_path)
    assert wait_exit(p, WAIT_TIMEOUT) == 2, p.report()
    err = p.stderr_text().strip().splitlines()
    assert len(err) == 1 and f"coordinator not found at localhost:{port}" in err[0], p.report()


def test_new_coordinator_and_exit_on_last(counter, tmp_path):
    """--new-coordinator starts a daemon with --exit-on-last; others join it; a second
    --new-coordinator on the same port is refused; the coordinator leaves with the last process."""
    port = free_port()
    logs = tmp_path / "logs"
    procs = []
    try:
        argv = [
            *crac_cmd(),
            "launch",
            "--new-coordinator",
            "-p",
            str(port),
            "-c",
            str(tmp_path),
            "--",
            str(counter),
            "n1",
            "150",
            "20",
        ]
        procs.append(CracProc(argv, out_dir=logs, label="n1", env=base_env(), cwd=tmp_path))
        wait_until(lambda: command(port, "s").returncode == 0, "the new coordinator")
        argv = [
            *crac_cmd(),
            "launch",
            "-j",
            "-p",
            str(port),
            "-c",
            str(tmp_path),
            "--",
            str(counter),
            "n2",
            "150",
            "20",
        ]
        procs.append(CracProc(argv, out_dir=logs, label="n2", env=base_env(), cwd=tmp_path))
        wait_until(lambda: request(port, "status")["num_peers"] == 2, "2 processes")
        argv = [*crac_cmd(), "launch", "--new-coordinator", "-p", str(port), "--", str(counter)]
        again = CracProc(argv, out_dir=logs, label="again", env=base_env(), cwd=tmp_path)
        procs.append(again)
        assert wait_exit(again, WAIT_TIMEOUT) == 2
        assert "already answers" in again.stderr_text()
        for p in procs[:2]:
            assert wait_exit(p) == 0, p.report()
        wait_until(lambda: command(port, "s").returncode == 2, "the coordinator to exit")
    finally:
        for p in procs:
            p.stop()
        if command(port, "s").returncode == 0:
            command(port, "q")


def test_verify_job_images(counter, tmp_path):
    job = Job(counter, tmp_path, ["v1", "v2"], 200)
    try:
        job.wait_steps(5)
        bcheckpoint(job.coord.port)
        argv = [*crac_cmd(), "verify", str(job.ckptdir)]
        ok = CracProc(argv, out_dir=job.logs, label="verify-ok", env=base_env())
        assert wait_exit(ok, WAIT_TIMEOUT) == 0, ok.report()
        assert ok.stdout_text().count("VALID") == 2
        gen = latest_complete(process_dirs(job.ckptdir)[0])
        core = gen / "upper.core"
        with core.open("r+b") as fh:
            fh.seek(core.stat().st_size // 2)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0xFF]))
        bad = CracProc(
            [*crac_cmd(), "verify", "--json", str(gen)],
            out_dir=job.logs,
            label="verify-bad",
            env=base_env(),
        )
        assert wait_exit(bad, WAIT_TIMEOUT) == 2, bad.report()
        assert "upper.core" in bad.stderr_text() and "checksum" in bad.stderr_text()
        finish_launched(job)
    finally:
        job.stop()
