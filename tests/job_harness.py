"""Helpers for the multi-process job tests: processes of tests/apps/coord_counter.c (`TAG step N`
lines) launched under one coordinator, their output per tag, restart-script runs whose processes
share one output file, and the checks that every process's output, stitched over its restarts,
equals an uninterrupted run's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    WAIT_TIMEOUT,
    CracProc,
    Segment,
    Terminal,
    assert_same_output,
    base_env,
    check_resume_point,
    check_steps_contiguous,
    counter_lines,
    inspect_images,
    latest_complete,
    process_start_time,
    process_table,
    stitch,
    tree,
)
from conftest import crac_cmd, require_native
from coord_harness import Coordinator, command, describe_text, request, wait_until

from crac_py.coord.restart_script import listed_generations


def gated_env(env: Mapping[str, str], gate: Path) -> dict[str, str]:
    """ENV for a test program that must not end before the test says so: tests/apps/ckpt_common.h
    end_gate waits for GATE to exist (a checkpoint asked for near the end cannot find the
    program gone). Open it with end_gate(GATE) once no more checkpoint will be asked for."""
    return {**env, "TEST_END_GATE": str(gate)}


def end_gate(gate: Path) -> None:
    gate.touch()


LINE_RE = re.compile(r"^(\S+) (step \d+|DONE .*)$")
STEP_RE = re.compile(r"^step (\d+)$")


def tagged_lines(text: str, tag: str) -> list[str]:
    """TAG's complete lines in TEXT, without the tag."""
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    out = []
    for line in text.splitlines():
        m = LINE_RE.match(line)
        if m and m.group(1) == tag:
            out.append(m.group(2))
    return out


def last_step(lines: Sequence[str]) -> int:
    steps = [int(m.group(1)) for m in map(STEP_RE.match, lines) if m]
    return max(steps) if steps else 0


def expected(steps: int) -> list[str]:
    return counter_lines(steps)


@dataclass
class Output:
    """A file the output of one or more processes goes to."""

    path: Path
    label: str

    def text(self) -> str:
        return self.path.read_bytes().decode(errors="replace") if self.path.exists() else ""

    def lines(self, tag: str) -> list[str]:
        return tagged_lines(self.text(), tag)

    def last_step(self, tag: str) -> int:
        return last_step(self.lines(tag))


def wait_steps(
    out: Output,
    tags: Sequence[str],
    n: int | Mapping[str, int],
    *alive: subprocess.Popen,
    timeout: float = WAIT_TIMEOUT,
    extra: str = "",
) -> dict[str, int]:
    """Waits until every tag has printed a step >= N in OUT (N: one step for all, or each tag's
    own); the last steps seen."""
    targets = {t: n if isinstance(n, int) else n[t] for t in tags}
    deadline = time.monotonic() + timeout
    while True:
        steps = {t: out.last_step(t) for t in tags}
        if all(steps[t] >= targets[t] for t in tags):
            return steps
        dead = [p for p in alive if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{dead[0].args!r} ended ({dead[0].returncode})" if dead else "timeout"
            pytest.fail(
                f"{out.label}: not every process reached its step {targets} ({why}): {steps}\n"
                f"{extra}\n--- output tail ---\n{out.text()[-3000:]}"
            )
        time.sleep(0.01)


def wait_past(
    out: Output,
    tags: Sequence[str],
    since: Mapping[str, int],
    lead: int,
    *alive: subprocess.Popen,
    timeout: float = WAIT_TIMEOUT,
    extra: str = "",
) -> dict[str, int]:
    """Waits until every tag has printed LEAD steps past its own step in SINCE. Not LEAD past
    the largest of SINCE: under load the processes drift apart, and while the slowest catches
    up with the fastest's step the fastest runs on, to its last step and exit before the
    checkpoint or kill the test does next; nor is the wait then bounded by LEAD steps."""
    targets = {t: since[t] + lead for t in tags}
    return wait_steps(out, tags, targets, *alive, timeout=timeout, extra=extra)


@dataclass
class Job:
    """N processes of coord_counter launched with `crac launch --join-coordinator`."""

    app: Path
    tmp: Path
    tags: list[str]
    steps: int
    ms: int = 20
    dirty_mib: int = 0
    coord_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # added to base_env()
    coord: Coordinator = field(init=False)
    procs: dict[str, CracProc] = field(init=False, default_factory=dict)
    ckptdir: Path = field(init=False)
    logs: Path = field(init=False)

    def __post_init__(self) -> None:
        require_native()
        self.ckptdir = self.tmp / "ckpt"
        self.logs = self.tmp / "logs"
        for d in (self.ckptdir, self.logs, self.tmp / "cwd"):
            d.mkdir(parents=True, exist_ok=True)
        self.coord = Coordinator(self.tmp / "coord", *self.coord_args)
        for tag in self.tags:
            argv = [
                *crac_cmd(),
                "launch",
                "--join-coordinator",
                "-p",
                str(self.coord.port),
                "-c",
                str(self.ckptdir),
                "--",
                str(self.app),
                tag,
                str(self.steps),
                str(self.ms),
                str(self.dirty_mib),
            ]
            self.procs[tag] = CracProc(
                argv,
                out_dir=self.logs,
                label=f"launch-{tag}",
                env={**base_env(), **self.env},
                cwd=self.tmp / "cwd",
            )
        self.coord.wait_peers(len(self.tags))

    def output(self, tag: str) -> Output:
        return Output(self.procs[tag].out_path, f"launch-{tag}")

    def wait_steps(self, n: int | Mapping[str, int]) -> dict[str, int]:
        return {
            t: wait_steps(self.output(t), [t], n, self.procs[t], extra=self.report())[t]
            for t in self.tags
        }

    def wait_past(self, since: Mapping[str, int], lead: int) -> dict[str, int]:
        """Every process LEAD steps past its own step in SINCE (wait_past)."""
        return self.wait_steps({t: since[t] + lead for t in self.tags})

    def last_steps(self) -> dict[str, int]:
        return {t: self.output(t).last_step(t) for t in self.tags}

    def report(self) -> str:
        parts = [p.report() for p in self.procs.values()]
        return "\n".join([*parts, "--- coordinator ---", self.coord.log_text()])

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop()
        self.coord.stop()


def bcheckpoint(port: int, *extra: str) -> Path:
    """`crac command -p PORT -bc`: must succeed; the restart script it names."""
    cp = command(port, "-bc", *extra, timeout=RUN_TIMEOUT)
    assert cp.returncode == 0, describe_text(cp)
    lines = cp.stdout.splitlines()
    assert lines[0].startswith("GENERATION="), describe_text(cp)
    script = Path(lines[1].removeprefix("RESTART_SCRIPT="))
    assert script.is_file(), describe_text(cp)
    return script


class ScriptRun:
    """crac_restart_script.sh run from a fresh shell: every restarted process writes to one
    output file opened with O_APPEND (so lines never mix)."""

    def __init__(
        self,
        script: Path,
        logs: Path,
        label: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        terminal: Terminal | None = None,
    ):
        self.out = Output(logs / f"{label}.out", label)
        self.err_path = logs / f"{label}.err"
        elsewhere = logs / f"{label}-cwd"
        elsewhere.mkdir(parents=True, exist_ok=True)
        out_fd = os.open(self.out.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        err_fd = os.open(self.err_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            session = (
                terminal.popen_args()
                if terminal
                else {"stdin": subprocess.DEVNULL, "start_new_session": True}
            )
            self.proc = subprocess.Popen(
                [str(script), *args],
                stdout=out_fd,
                stderr=err_fd,
                env=dict(env) if env is not None else base_env(),
                cwd=elsewhere,
                **session,
            )
        finally:
            os.close(out_fd)
            os.close(err_fd)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def report(self) -> str:
        return (
            f"--- {self.out.label} (status {self.proc.poll()}) ---\nstderr:\n"
            f"{self.stderr()[-3000:]}\nstdout tail:\n{self.out.text()[-2000:]}"
        )

    def wait(self, timeout: float = RUN_TIMEOUT) -> int:
        try:
            status = self.proc.wait(timeout=timeout)
            self.reaped_at = time.time()
            return status
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.out.label} did not end in {timeout:.0f} s\n{self.report()}")

    reaped_at: float | None = None

    def kill(self) -> None:
        """SIGKILL the script and everything it started (its own session). Once the script is
        reaped its pid, the session's and group's id, may be another's: a test beside this one
        started its restart script as that pid, a session leader, and lost its whole job to this
        kill. Then only what is left of this session and started before the reaping goes."""
        if self.proc.returncode is None:  # not reaped: alive or a zombie, the id is still its
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        elif self.reaped_at is not None:
            members = [p for p, ids in process_table().items() if ids[2] == self.proc.pid]
            for pid in members:
                try:
                    if process_start_time(pid) <= self.reaped_at:
                        os.kill(pid, signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        try:
            self.proc.wait(timeout=WAIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass


def kill_job(port: int, run: ScriptRun) -> None:
    """SIGKILL every process of a job restarted by RUN (they are in the script's session) and
    the coordinator the script started (a daemon, in a session of its own)."""
    pid = request(port, "status")["pid"]
    run.kill()
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + WAIT_TIMEOUT
    while command(port, "s").returncode != 2:
        if time.monotonic() > deadline:
            pytest.fail(f"the coordinator on port {port} still answers after SIGKILL")
        time.sleep(0.05)


def segments_of(
    out: Output,
    tags: Sequence[str],
    before: Mapping[str, int] | None,
    after: Mapping[str, int] | None,
) -> dict[str, Segment]:
    segs = {}
    for t in tags:
        lines = out.lines(t)
        check_steps_contiguous(lines, f"{out.label}/{t}")
        segs[t] = Segment(
            f"{out.label}/{t}",
            lines,
            None if before is None else before[t],
            None if after is None else after[t],
        )
    return segs


def check_chain(
    chains: Mapping[str, Sequence[Segment]], steps: int, ckptdir: Path | None = None
) -> None:
    """Every tag's output over its restarts equals the uninterrupted run's, and each restart
    resumed at the step its checkpoint was taken. With CKPTDIR (the job's checkpoint directory),
    `crac inspect --json` then reads every generation the job left there (check_inspect): done at
    the end, not at each checkpoint, where it would slow the job down while it runs."""
    for tag, segs in chains.items():
        for prev, seg in zip(segs, segs[1:]):
            check_resume_point(seg, prev)
        assert_same_output(stitch(segs), expected(steps), f"{tag}'s output")
    if ckptdir is not None:
        inspect_images(ckptdir)


def signal_checkpoint(
    pid: int, out: Output, tags: Sequence[str], ckptdir: Path, first: int, *alive: subprocess.Popen
) -> tuple[Path, dict[str, int], dict[str, int]]:
    """Waits until every tag has printed step FIRST, sends the checkpoint signal (SIGUSR2) to the
    root PID and waits for the coordinator's restart script in CKPTDIR. Returns the script and
    each tag's last step before the signal and once the script was there (the checkpoint fell
    between the two)."""
    wait_steps(out, tags, first, *alive)
    before = {t: out.last_step(t) for t in tags}
    os.kill(pid, signal.SIGUSR2)
    script = ckptdir / "crac_restart_script.sh"
    wait_until(script.exists, "the restart script")
    after = {t: out.last_step(t) for t in tags}
    return script, before, after


def wait_every_done(run: ScriptRun, tags: Sequence[str]) -> None:
    """After the restart script ended: the script waits for the roots it restarted; a child its
    program does not wait for (as in tree_counter) may still be at its last steps, an orphan as
    in an uninterrupted run. Waits for each tag's DONE line."""
    wait_until(
        lambda: all(any(ln.startswith("DONE") for ln in run.out.lines(t)) for t in tags),
        f"every process's DONE line in {run.out.path}",
    )


def restart_twice(
    script: Path,
    port: int,
    tmp: Path,
    chains: dict[str, list[Segment]],
    runs: list[ScriptRun],
    tags: Sequence[str],
    steps: int,
    *,
    lead: int = 20,
    check_generations: bool = True,
    terminals: tuple[Terminal | None, Terminal | None] = (None, None),
) -> None:
    """Restart a tree with SCRIPT (its coordinator on PORT; logs in TMP/logs, images in
    TMP/ckpt), let it run LEAD steps past its first, `-bc`, SIGKILL everything, restart again
    and run to the end; every tag's output over the three runs is the uninterrupted run's
    (CHAINS holds each tag's first segment; RUNS gets the script runs, for the caller to kill).
    With CHECK_GENERATIONS, the `-bc` must have given every process of the script a new
    complete generation (a child forked since the restart its first). TERMINALS: the two runs'
    controlling terminals (ScriptRun's), if any."""
    logs, ckptdir = tmp / "logs", tmp / "ckpt"
    run1 = ScriptRun(script, logs, "restart1", "-p", str(port), terminal=terminals[0])
    runs.append(run1)
    wait_steps(run1.out, tags, 1, run1.proc, extra=run1.report())
    first = {t: run1.out.last_step(t) for t in tags}
    wait_past(run1.out, tags, first, lead, run1.proc, extra=run1.report())
    before = {t: run1.out.last_step(t) for t in tags}
    assert bcheckpoint(port) == script
    after = {t: run1.out.last_step(t) for t in tags}
    if check_generations:
        gens = listed_generations(script)
        assert gens and all(latest_complete(g.parent) == g for g in gens), tree(ckptdir)
        assert any(g.name == "gen-000002" for g in gens), tree(ckptdir)
    wait_past(run1.out, tags, after, 2, run1.proc, extra=run1.report())
    kill_job(port, run1)
    for t, seg in segments_of(run1.out, tags, before, after).items():
        chains[t].append(seg)

    run2 = ScriptRun(script, logs, "restart2", "-p", str(port), terminal=terminals[1])
    runs.append(run2)
    assert run2.wait() == 0, run2.report()
    wait_every_done(run2, tags)
    for t, seg in segments_of(run2.out, tags, None, None).items():
        chains[t].append(seg)
    check_chain(chains, steps, ckptdir)
