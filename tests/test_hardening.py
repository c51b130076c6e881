"""Crac used as an attacker (or a careless colleague) would: two processes writing one image
directory, planted symlinks where restart scripts are written, a coordinator flooded, fed huge
numbers or given its token on a command line, and inputs that are not programs or not manifests.
Each must end in a clear refusal or a safe outcome, never a crash, a traceback or lost images
(docs/TRUST.md, "Concurrent use, scripts, coordinator")."""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import (
    POLL_S,
    WAIT_TIMEOUT,
    base_env,
    build_ckpt_apps,
    checkpoint,
    fail,
    generations,
    latest_complete,
    launch,
    restart,
    wait_for_step,
)


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, Path]:
    return build_ckpt_apps(tmp_path_factory)


def wait_for_file(path: Path, proc, regular: bool = False) -> None:
    """The loader writes the restart script after it published the generation."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while not (path.is_file() and not (regular and path.is_symlink())):
        if time.monotonic() > deadline or proc.poll() is not None:
            fail(f"{path} was not written", proc)
        time.sleep(POLL_S)


def hostid() -> str:
    return f"{ctypes.CDLL(None).gethostid() & 0xFFFFFFFF:08x}"


# ---- one image directory, one writer ---------------------------------------------------------


def test_restart_while_the_original_runs_writes_a_lineage_of_its_own(apps, tmp_path):
    """A restart of a process directory whose process still runs: the two never write the same
    directory (today `latest` flipped between two histories and --keep pruned the other's)."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    orig = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs, label="orig")
    twin = None
    try:
        wait_for_step(orig, 3)
        first = checkpoint(orig, ckptdir)
        procdir = first.parent
        twin = restart(procdir, out_dir=logs, label="twin")
        wait_for_step(twin, wait_for_step(orig, 1) + 2)
        twin_gen = checkpoint(twin, ckptdir)
        assert twin_gen.parent != procdir, f"the restart wrote into the original's {procdir}"
        assert "crac: note:" in twin.stderr_text() and str(twin_gen.parent) in twin.stderr_text()
        mine = [checkpoint(orig, ckptdir) for _ in range(3)]
        assert all(g.parent == procdir for g in mine), mine
        assert latest_complete(procdir) == mine[-1]
        assert latest_complete(twin_gen.parent) == twin_gen
        assert [g.name for g in generations(procdir)] == [g.name for g in mine[-2:]]
    finally:
        orig.stop()
        if twin is not None:
            twin.stop()


def test_launch_never_writes_into_a_directory_holding_another_runs_images(apps, tmp_path):
    """Two launches reusing -c with the same pid (pid namespaces sharing a file system, or a pid
    reused): the second writes a lineage of its own, the first's generations stay."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir(mode=0o700)
    proc = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 2)
        other = ckptdir / f"ckpt_ckpt_counter_{hostid()}-{proc.pid}"
        (other / "gen-000001").mkdir(parents=True)
        (other / "gen-000001" / "MANIFEST.json").write_text("the other run's\n")
        (other / "latest").symlink_to("gen-000001")
        gen = checkpoint(proc, ckptdir)
        assert gen.parent != other
        assert (other / "gen-000001" / "MANIFEST.json").read_text() == "the other run's\n"
        assert os.readlink(other / "latest") == "gen-000001"
    finally:
        proc.stop()


# ---- generated scripts -----------------------------------------------------------------------


def test_restart_script_never_follows_a_planted_link(apps, tmp_path):
    """Links planted where the loader writes crac_restart_script.sh (its old temporary name was
    predictable: the pid) are never written through: the victim file stays as it was."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o600)
    proc = launch(apps["ckpt_counter"], ["100000", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 2)
        script = ckptdir / "crac_restart_script.sh"
        (ckptdir / f"crac_restart_script.sh.tmp-{proc.pid}").symlink_to(victim)
        script.symlink_to(victim)
        checkpoint(proc, ckptdir)
        checkpoint(proc, ckptdir)
        wait_for_file(script, proc, regular=True)
    finally:
        proc.stop()
    assert victim.read_text() == "precious\n" and (victim.stat().st_mode & 0o777) == 0o600
    assert not script.is_symlink() and script.read_text().startswith("#!/bin/sh\n")


def test_job_restart_script_never_follows_a_planted_link(tmp_path):
    from crac_py.coord.restart_script import ScriptJob, write

    job_dir = tmp_path / "job"
    job_dir.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (job_dir / f".crac_restart_script.sh.tmp-{os.getpid()}").symlink_to(victim)
    (job_dir / "crac_restart_script.sh").symlink_to(victim)
    job = ScriptJob(job_dir, [job_dir / "ckpt_a_1-1" / "gen-000001"], 1, 7779, 0, "crac")
    path = write(job)
    assert victim.read_text() == "precious\n"
    assert not path.is_symlink() and path.read_text().startswith("#!/bin/sh\n")


def test_restart_script_takes_a_ckptdir_starting_with_a_dash(apps, tmp_path):
    """`crac_restart_script.sh --ckptdir -copy`: the copy's path reaches `crac restart` as a
    path, not as an option."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(apps["ckpt_counter"], ["60", "20"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 3)
        checkpoint(proc, ckptdir)
        wait_for_file(ckptdir / "crac_restart_script.sh", proc)
    finally:
        proc.stop()
    subprocess.run(["cp", "-a", str(ckptdir), str(tmp_path / "-copy")], check=True)
    cp = subprocess.run(
        ["sh", str(ckptdir / "crac_restart_script.sh"), "--ckptdir", "-copy"],
        capture_output=True,
        cwd=tmp_path,
        env=base_env(),
        timeout=180,
    )
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    assert cp.stdout.decode().splitlines()[-1].startswith("DONE"), cp.stdout
