"""Process trees (docs/DECISIONS.md "Process trees"): a process that forks under crac gives a child
that is itself a split process of the same job, checkpointed with it.

* A forked child joins the launch's coordinator as one more worker with its own image directory;
  `crac command -bc` checkpoints parent and child at one moment; both SIGKILLed, the restart
  script brings both back and each one's output equals an uninterrupted run's; twice.
* A launch without a coordinator starts one at its first fork: the checkpoint signal to the root
  checkpoints the whole tree; then the same two cycles.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ckpt_harness import (
    CracProc,
    Segment,
    base_env,
    complete_generations,
    process_dirs,
    tree,
    wait_exit,
)
from conftest import crac_cmd, require_native
from coord_harness import Coordinator, free_port, wait_until
from job_harness import (
    Output,
    ScriptRun,
    bcheckpoint,
    check_chain,
    kill_job,
    segments_of,
    wait_steps,
)

from crac_py.coord.restart_script import listed_generations

STEPS = 300
TAGS = ["T.p", "T.c"]  # tree_counter's parent and child


def _launch(apps, tmp: Path, *opts: str) -> tuple[CracProc, Output]:
    require_native()
    argv = [*crac_cmd(), "launch", *opts, "-c", str(tmp / "ckpt")]
    root = CracProc(
        [*argv, "--", str(apps["tree_counter"]), "T", str(STEPS), "20"],
        out_dir=tmp / "logs",
        label="launch",
        env=base_env(),
    )
    return root, Output(root.out_path, "launch")


def _kill_tree(ckptdir: Path) -> None:
    """SIGKILL every process that has an image directory (a forked child is no child of ours)."""
    for d in process_dirs(ckptdir):
        try:
            os.kill(int(d.name.rsplit("-", 1)[1]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _restart_twice(
    script: Path, port: int, tmp: Path, chains: dict[str, list[Segment]], runs: list[ScriptRun]
) -> None:
    """Restart the tree with SCRIPT (its coordinator on PORT), `-bc`, SIGKILL everything, restart
    again and run to the end; every process's output over the three runs is the uninterrupted
    run's."""
    logs, ckptdir = tmp / "logs", tmp / "ckpt"
    run1 = ScriptRun(script, logs, "restart1", "-p", str(port))
    runs.append(run1)
    wait_steps(run1.out, TAGS, 1, run1.proc, extra=run1.report())
    first = {t: run1.out.last_step(t) for t in TAGS}
    wait_steps(run1.out, TAGS, max(first.values()) + 20, run1.proc, extra=run1.report())
    before = {t: run1.out.last_step(t) for t in TAGS}
    assert bcheckpoint(port) == script
    after = {t: run1.out.last_step(t) for t in TAGS}
    assert all(g.name == "gen-000002" for g in listed_generations(script)), tree(ckptdir)
    wait_steps(run1.out, TAGS, max(after.values()) + 2, run1.proc, extra=run1.report())
    kill_job(port, run1)
    for t, seg in segments_of(run1.out, TAGS, before, after).items():
        chains[t].append(seg)

    run2 = ScriptRun(script, logs, "restart2", "-p", str(port))
    runs.append(run2)
    assert run2.wait() == 0, run2.report()
    for t, seg in segments_of(run2.out, TAGS, None, None).items():
        chains[t].append(seg)
    check_chain(chains, STEPS, ckptdir)


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
        wait_steps(out, TAGS, max(after.values()) + 2, root)
        _kill_tree(tmp_path / "ckpt")
        wait_exit(root)
        coord.stop()
        chains = {t: [s] for t, s in segments_of(out, TAGS, before, after).items()}
        _restart_twice(script, port, tmp_path, chains, runs)
    except BaseException:
        print(root.report(), coord.log_text(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        _kill_tree(tmp_path / "ckpt")
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
        wait_steps(out, TAGS, 30, root)
        before = {t: out.last_step(t) for t in TAGS}
        os.kill(root.pid, signal.SIGUSR2)
        script = ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script")
        after = {t: out.last_step(t) for t in TAGS}
        gens = complete_generations(ckptdir)
        assert len(gens) == 2 and set(gens.values()) == {1}, tree(ckptdir)
        wait_steps(out, TAGS, max(after.values()) + 2, root)
        _kill_tree(ckptdir)
        wait_exit(root)
        chains = {t: [s] for t, s in segments_of(out, TAGS, before, after).items()}
        _restart_twice(script, free_port(), tmp_path, chains, runs)
        assert "crac: warning" not in root.stderr_text(), root.report()
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        _kill_tree(ckptdir)
        root.stop()
