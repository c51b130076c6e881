"""`crac inspect` and `crac verify` of a process tree's job directory (crac_py/image/tree_view.py,
docs/DECISIONS.md "Process groups, sessions and tree images"). A tree of four processes
(tests/apps/tree_pgrp_group.c: a root, two children in a group of their own, one in a session
of its own) is checkpointed with the signal to the root and SIGKILLed; then:

* `crac inspect --json JOBDIR` gives the tree: each process's pid, parent, group, session and
  generation as the program knew them, and the children each parent checkpointed with it;
  the text form draws it.
* `crac verify JOBDIR` accepts it, and refuses (exit 2, one `crac: error:` line per problem, no
  traceback) a copy whose member directory was removed, one whose member's latest generation is
  not the job checkpoint's, and one without its restart script whose parent's manifest names a
  child that has no image.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import CracProc, base_env, wait_exit
from conftest import crac_cmd, require_native
from coord_harness import wait_until
from job_harness import Output, wait_steps
from test_process_groups import _kill_app

from crac_py.coord.restart_script import SCRIPT_NAME, listed_generations

TAGS = ["T.r", "T.a", "T.b", "T.s"]


@pytest.fixture(scope="module")
def tree_job(apps, tmp_path_factory) -> Path:
    """A job directory holding one checkpoint of the four-process tree, every process gone."""
    require_native()
    tmp = tmp_path_factory.mktemp("tree_job")
    ckptdir = tmp / "ckpt"
    app = apps["tree_pgrp_group"]
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", str(app), "T", "100000", "20"],
        out_dir=tmp / "logs",
        label="launch",
        env=base_env(),
    )
    try:
        wait_steps(Output(root.out_path, "launch"), TAGS, 5, root)
        os.kill(root.pid, signal.SIGUSR2)
        wait_until((ckptdir / SCRIPT_NAME).exists, "the restart script")
    except BaseException:
        print(root.report())
        raise
    finally:
        _kill_app(app)
        if root.poll() is None:
            root.kill()
        wait_exit(root)
    return ckptdir


def _crac(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*crac_cmd(), *map(str, args)], capture_output=True, text=True, timeout=300, env=base_env()
    )


def _copy(job: Path, tmp: Path) -> Path:
    out = tmp / "job"
    shutil.copytree(job, out, symlinks=True)
    return out


def _refused(cp: subprocess.CompletedProcess[str], *needles: str) -> list[str]:
    assert cp.returncode == 2, cp.stdout + cp.stderr
    assert "Traceback" not in cp.stderr, cp.stderr
    errors = [line for line in cp.stderr.splitlines() if line.startswith("crac: error:")]
    for needle in needles:
        assert any(needle in line for line in errors), cp.stderr
    return errors


def test_inspect_shows_the_tree(tree_job):
    cp = _crac("inspect", "--json", tree_job)
    assert cp.returncode == 0, cp.stderr
    info = json.loads(cp.stdout)
    members = info["members"]
    assert len(members) == 4 and info["problems"] == [], info
    by_vpid = {m["vpid"]: m for m in members}
    (root,) = [m for m in members if m["vppid"] not in by_vpid]
    kids = [m for m in members if m["vppid"] == root["vpid"]]
    assert len(kids) == 3
    assert sorted(root["children"]) == sorted(k["vpid"] for k in kids)
    leader = [k for k in kids if k["sid"] == k["vpid"]]  # S: its own session and group
    assert len(leader) == 1 and leader[0]["pgid"] == leader[0]["vpid"]
    group = [k for k in kids if k is not leader[0]]  # A leads the group B is in
    # One group, led by one of the two (not by the smaller pid: B's can be, after pids wrap).
    pgids = {k["pgid"] for k in group}
    assert len(pgids) == 1 and pgids <= {k["vpid"] for k in group}, group
    assert all(k["sid"] == root["sid"] for k in group)
    assert all(m["generation"] == 1 and m["connections"] == [] for m in members)
    text = _crac("inspect", tree_job)
    assert text.returncode == 0, text.stderr
    assert "process tree of" in text.stdout
    for m in members:
        assert str(m["vpid"]) in text.stdout


def test_verify_accepts_the_tree(tree_job):
    cp = _crac("verify", tree_job)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_verify_refuses_a_tree_without_a_member(tree_job, tmp_path):
    job = _copy(tree_job, tmp_path)
    gone = listed_generations(job / SCRIPT_NAME)[1].parent
    shutil.rmtree(gone)
    _refused(_crac("verify", job), f"tree member {gone}", "is missing")


def test_verify_refuses_a_member_generation_of_another_checkpoint(tree_job, tmp_path):
    job = _copy(tree_job, tmp_path)
    proc = listed_generations(job / SCRIPT_NAME)[2].parent
    shutil.copytree(proc / "gen-000001", proc / "gen-000002")
    (proc / "latest").unlink()
    (proc / "latest").symlink_to("gen-000002")
    _refused(_crac("verify", job), f"{proc}: its latest generation (gen-000002)")


def test_verify_refuses_a_named_child_without_image(tree_job, tmp_path):
    job = _copy(tree_job, tmp_path)
    (job / SCRIPT_NAME).unlink()
    info = json.loads(_crac("inspect", "--json", tree_job).stdout)
    root = next(m for m in info["members"] if m["children"])
    kid = next(m for m in info["members"] if m["vpid"] == root["children"][0])
    shutil.rmtree(job / Path(kid["generation_dir"]).parent.name)
    _refused(_crac("verify", job), f"process {kid['vpid']}, a child of process {root['vpid']}")
