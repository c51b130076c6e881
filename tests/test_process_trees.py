"""Process trees (docs/DECISIONS.md "Process trees"): a process that forks under crac gives a child
that is itself a split process of the same job, checkpointed with it.

* A forked child joins the launch's coordinator as one more worker with its own image directory;
  `crac command -bc` checkpoints parent and child at one moment; both SIGKILLed, the restart
  script brings both back and each one's output equals an uninterrupted run's; twice.
"""

from __future__ import annotations

import os
import signal

from ckpt_harness import CracProc, base_env, process_dirs, tree, wait_exit
from conftest import crac_cmd, require_native
from coord_harness import Coordinator, request
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


def _kill_peers(port: int) -> None:
    """SIGKILL every worker of the coordinator on PORT (a forked child is no child of ours)."""
    for peer in request(port, "list")["peers"]:
        try:
            os.kill(int(peer["pid"]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_forked_child_is_a_job_member_bc_kill_restart_twice(apps, tmp_path):
    require_native()
    steps, tags = 300, ["T.p", "T.c"]
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    coord = Coordinator(tmp_path / "coord")
    port = coord.port
    argv = [*crac_cmd(), "launch", "--join-coordinator", "-p", str(port), "-c", str(ckptdir)]
    root = CracProc(
        [*argv, "--", str(apps["tree_counter"]), "T", str(steps), "20"],
        out_dir=logs,
        label="launch",
        env=base_env(),
    )
    out = Output(root.out_path, "launch")
    runs: list[ScriptRun] = []
    try:
        coord.wait_peers(2)  # the root and its forked child
        wait_steps(out, tags, 30, root)
        before = {t: out.last_step(t) for t in tags}
        script = bcheckpoint(port)
        after = {t: out.last_step(t) for t in tags}
        gens1 = listed_generations(script)
        assert len(gens1) == 2 and all(g.name == "gen-000001" for g in gens1), tree(ckptdir)
        assert sorted(g.parent for g in gens1) == process_dirs(ckptdir)
        wait_steps(out, tags, max(after.values()) + 2, root)
        _kill_peers(port)
        wait_exit(root)
        coord.stop()
        chains = {t: [s] for t, s in segments_of(out, tags, before, after).items()}

        run1 = ScriptRun(script, logs, "restart1")
        runs.append(run1)
        wait_steps(run1.out, tags, 1, run1.proc, extra=run1.report())
        first = {t: run1.out.last_step(t) for t in tags}
        wait_steps(run1.out, tags, max(first.values()) + 20, run1.proc, extra=run1.report())
        before2 = {t: run1.out.last_step(t) for t in tags}
        assert bcheckpoint(port) == script
        after2 = {t: run1.out.last_step(t) for t in tags}
        assert all(g.name == "gen-000002" for g in listed_generations(script)), tree(ckptdir)
        wait_steps(run1.out, tags, max(after2.values()) + 2, run1.proc, extra=run1.report())
        kill_job(port, run1)
        for t, seg in segments_of(run1.out, tags, before2, after2).items():
            chains[t].append(seg)

        run2 = ScriptRun(script, logs, "restart2")
        runs.append(run2)
        assert run2.wait() == 0, run2.report()
        for t, seg in segments_of(run2.out, tags, None, None).items():
            chains[t].append(seg)
        check_chain(chains, steps, ckptdir)
    except BaseException:
        print(root.report(), coord.log_text(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        if root.poll() is None and coord.proc.poll() is None:
            _kill_peers(port)
        root.stop()
        coord.stop()

