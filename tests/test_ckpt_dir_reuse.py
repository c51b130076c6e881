"""One checkpoint directory used by several runs (the README's `-c /scratch/ckpt`, twice): a
restart of the directory takes the newest run of the same program and says so in one line,
refuses with the list when the runs are of different programs, and inspect/verify read it. A
missing checkpoint directory is created, private; a file given as one is refused as such."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ckpt_harness import (
    base_env,
    build_ckpt_apps,
    launch,
    launch_checkpoint_kill,
    run_restart,
    wait_exit,
)
from conftest import crac_cmd, describe


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, Path]:
    return build_ckpt_apps(tmp_path_factory)


def run_and_checkpoint(app: Path, args: list[str], ckptdir: Path, logs: Path, label: str) -> None:
    """Launches APP into CKPTDIR, checkpoints it, kills it."""
    launch_checkpoint_kill(app, args, ckptdir, out_dir=logs, label=label, at_step=3)


def test_restart_takes_the_newest_run_of_one_program(apps, tmp_path):
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    run_and_checkpoint(apps["ckpt_counter"], ["3000", "10"], ckptdir, logs, "run1")
    run_and_checkpoint(apps["ckpt_counter"], ["200", "10"], ckptdir, logs, "run2")
    procs = sorted(p.name for p in ckptdir.glob("ckpt_*"))
    assert len(procs) == 2, procs
    cp = run_restart(ckptdir, timeout=180)
    assert cp.returncode == 0, describe(cp)
    # The second run counts to 200: that is the one restarted.
    assert cp.stdout.decode().splitlines()[-1].endswith("steps=200"), describe(cp)
    notes = [line for line in cp.stderr.decode().splitlines() if "crac: note:" in line]
    assert len(notes) == 1 and "2 runs" in notes[0] and "newest" in notes[0], describe(cp)
    env = base_env()
    for verb in ("inspect", "verify"):
        res = subprocess.run(
            [*crac_cmd(), verb, str(ckptdir)], capture_output=True, env=env, timeout=120
        )
        assert res.returncode == 0, describe(res)
        assert b"Traceback" not in res.stderr


def test_restart_refuses_runs_of_different_programs(apps, tmp_path):
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    run_and_checkpoint(apps["ckpt_counter"], ["3000", "10"], ckptdir, logs, "run1")
    run_and_checkpoint(apps["ckpt_threads"], [], ckptdir, logs, "run2")
    cp = run_restart(ckptdir)
    assert cp.returncode == 2, describe(cp)
    err = cp.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and err.startswith("crac: error:"), describe(cp)
    assert "ckpt_counter" in err and "ckpt_threads" in err, err


def test_missing_checkpoint_directory_is_created(apps, tmp_path):
    ckptdir = tmp_path / "not" / "yet"
    proc = launch(apps["ckpt_counter"], ["50", "1"], ckptdir, out_dir=tmp_path / "logs")
    assert wait_exit(proc) == 0, proc.report()
    assert ckptdir.is_dir() and (ckptdir.stat().st_mode & 0o777) == 0o700


def test_file_as_checkpoint_directory_is_refused(apps, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = launch(apps["ckpt_counter"], ["50", "1"], afile, out_dir=tmp_path / "logs")
    assert wait_exit(proc) == 2
    err = proc.stderr_text().strip()
    assert err == f"crac: error: checkpoint directory {afile} is not a directory", err
