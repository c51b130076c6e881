"""Process groups and sessions of a tree (docs/DECISIONS.md "Process groups, sessions and tree
images"), each through two checkpoint->SIGKILL->restart cycles compared with an uninterrupted run:

* tests/apps/tree_pgrp_group.c: two children in a new group led by the first, signalled with
  kill(-pgid) at every step, and a child that called setsid(); each process's getpgrp()/getsid()
  (and the root's getpgid/getsid of its children) stay what they were at the start; with a
  controlling terminal, the root's tcsetpgrp/tcgetpgrp/tcgetsid too (job control).
* tests/apps/tree_pgrp_chld.c: a SIGCHLD handler counts the children's ends; a restart neither
  loses one nor sends one again for a recreated zombie.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from ckpt_harness import CracProc, Terminal, base_env, tree, wait_exit
from conftest import crac_cmd, require_native
from coord_harness import free_port
from job_harness import (
    Output,
    ScriptRun,
    restart_twice,
    segments_of,
    signal_checkpoint,
    wait_past,
)

from crac_py.coord.restart_script import listed_generations

STEPS = 200


def _kill_app(app: Path) -> None:
    """SIGKILL every process still running APP (this test's own build of it, under pytest's
    temporary directory): the tree's processes are no children of ours, and some are in groups
    and sessions of their own."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0 == str(app).encode():
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _cycles(apps, tmp: Path, app: str, tags: list[str], ms: int, tty: bool = False) -> None:
    """Launch APP, checkpoint the tree with the signal to the root, SIGKILL it; restart with the
    coordinator's script, `-bc`, SIGKILL, restart again to the end: every process's output is
    the uninterrupted run's. TTY: each run with a terminal of its own as stdin and controlling
    terminal (the app's `tty` mode)."""
    require_native()
    ckptdir, logs = tmp / "ckpt", tmp / "logs"
    terminals = [Terminal() for _ in range(3)] if tty else []
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", str(apps[app]), "P", str(STEPS), str(ms)]
        + (["tty"] if tty else []),
        out_dir=logs,
        label="launch",
        env=base_env(),
        terminal=terminals[0] if tty else None,
    )
    out = Output(root.out_path, "launch")
    runs: list[ScriptRun] = []
    try:
        script, before, after = signal_checkpoint(root.pid, out, tags, ckptdir, 20, root)
        wait_past(out, tags, after, 2, root)
        _kill_app(apps[app])
        if root.poll() is None:
            root.kill()
        wait_exit(root)
        chains = {t: [s] for t, s in segments_of(out, tags, before, after).items()}
        for gen in listed_generations(script):  # what the restart recreates
            proc = json.loads((gen / "MANIFEST.json").read_text())["process"]
            # recorded; 0 where the leader is outside our pid namespace (getsid in a container)
            assert all(isinstance(proc[k], int) and proc[k] >= 0 for k in ("pgid", "sid")), proc

        # Ten steps into the first restart (the trees' tests wait twenty); its images are not
        # checked generation by generation here.
        restart_twice(
            script,
            free_port(),
            tmp,
            chains,
            runs,
            tags,
            STEPS,
            lead=10,
            check_generations=False,
            terminals=(terminals[1], terminals[2]) if tty else (None, None),
        )
    except BaseException:
        print(root.report(), *(r.report() for r in runs), tree(ckptdir), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        _kill_app(apps[app])
        root.stop()
        for t in terminals:
            t.close()


def test_group_and_session_ids_survive_two_restarts(apps, tmp_path):
    _cycles(apps, tmp_path, "tree_pgrp_group", ["P.r", "P.a", "P.b", "P.s"], ms=20)


def test_sigchld_count_survives_two_restarts(apps, tmp_path):
    _cycles(apps, tmp_path, "tree_pgrp_chld", ["P"], ms=40)


def test_terminal_foreground_group_survives_two_restarts(apps, tmp_path):
    """A shell's job control: the root hands its terminal to a child group and takes it back at
    every step (tcsetpgrp/tcgetpgrp/tcgetsid in the ids it knew), each run on a terminal of its
    own."""
    _cycles(apps, tmp_path, "tree_pgrp_group", ["P.r", "P.a", "P.b", "P.s"], ms=20, tty=True)
