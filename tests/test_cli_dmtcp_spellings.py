"""DMTCP's spellings of launch, restart and coordinator options (crac_py/cli/dmtcp_spellings.py):
made crac's, dropped with a note, or refused with what to do instead; and a job run end to end
with the options a `dmtcp_launch`/`dmtcp_restart` script passes."""

from __future__ import annotations

import json
import subprocess

import pytest
from ckpt_harness import build_ckpt_apps, checkpoint, kill9, launch, wait_for_step
from conftest import crac_cmd

from crac_py.cli.dmtcp_spellings import SpellingError, rewrite


@pytest.fixture(scope="module")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


LAUNCH_VALUES = {"-c", "--ckptdir", "-i", "--interval", "-p", "--coord-port", "--compress"}


@pytest.mark.unit
def test_launch_spellings_stop_at_the_program():
    args, notes = rewrite(
        "launch",
        ["-c", "--gzip", "--no-gzip", "-q", "--rm", "-t", "/tmp", "./app", "--gzip", "-q"],
        LAUNCH_VALUES,
        stop_at_operand=True,
    )
    # -c's value is a directory named --gzip; the program's own --gzip and -q stay its own.
    assert args == ["-c", "--gzip", "--compress", "none", "./app", "--gzip", "-q"]
    assert [n.split()[0] for n in notes] == ["--rm", "-t"]
    assert rewrite("launch", ["--", "--gzip"], LAUNCH_VALUES, True) == (["--", "--gzip"], [])
    args, _ = rewrite("launch", ["--checkpoint-open-files", "app"], LAUNCH_VALUES, True)
    assert args == ["--ckpt-open-files", "app"]


@pytest.mark.unit
def test_restart_and_coordinator_spellings():
    assert rewrite("restart", ["--restartdir", "d", "-q"], set(), False) == (["d"], [])
    assert rewrite("restart", ["--restartdir=d"], set(), False) == (["d"], [])
    assert rewrite("coordinator", ["--kill-after-ckpt", "-q"], set(), False)[0] == [
        "--exit-after-checkpoint",
        "-q",  # crac coordinator's own
    ]
    with pytest.raises(SpellingError, match="--no-strict-checking is DMTCP's: .*--force"):
        rewrite("restart", ["--no-strict-checking", "d"], set(), False)
    with pytest.raises(SpellingError, match="--ib is DMTCP's"):
        rewrite("launch", ["--ib", "app"], set(), True)


def test_refused_spelling_is_one_line_and_status_2(tmp_path):
    cp = subprocess.run(
        [*crac_cmd(), "launch", "--with-plugin", "x.so", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert cp.returncode == 2, cp.stderr
    assert cp.stderr.startswith("crac: error: --with-plugin is DMTCP's: DMTCP plugins"), cp.stderr
    assert len(cp.stderr.splitlines()) == 1, cp.stderr


def test_a_dmtcp_scripts_options_run_a_job(ckpt_apps, tmp_path):
    """`crac launch --gzip -q --rm` (DMTCP's compression, quiet, resource-manager plugin), then
    `crac restart --restartdir DIR -q`: the image is compressed, the restart runs to the end."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    opts = ["--gzip", "-q", "--rm"]
    proc = launch(ckpt_apps["ckpt_counter"], ["60", "20"], ckptdir, out_dir=logs, opts=opts)
    try:
        wait_for_step(proc, 5)
        gen = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    assert "--rm is DMTCP's and ignored" in proc.stderr_text(), proc.report()
    manifest = json.loads((gen / "MANIFEST.json").read_text())
    assert manifest["format_version"] == 3, manifest  # compressed regions
    cp = subprocess.run(
        [*crac_cmd(), "restart", "--restartdir", str(ckptdir), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert cp.stdout.splitlines()[-1].startswith("DONE"), cp.stdout
