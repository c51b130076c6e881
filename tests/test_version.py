"""One version: pyproject.toml's. `crac --version`, crac_py.version() and the loader (the version it
writes into every image's MANIFEST.json) all say it."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from ckpt_harness import build_ckpt_apps, checkpoint, kill9, launch, wait_for_step
from conftest import DEFAULT_TIMEOUT, crac_cmd

import crac_py

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


def test_cli_loader_and_pyproject_agree(ckpt_apps, tmp_path):
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert crac_py.version() == crac_py.__version__ == expected

    cli = subprocess.run(
        [*crac_cmd(), "--version"], capture_output=True, text=True, timeout=DEFAULT_TIMEOUT
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == f"crac {expected}"

    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    ckptdir.mkdir()
    logs.mkdir()
    proc = launch(ckpt_apps["ckpt_counter"], [], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ckptdir)
    finally:
        kill9(proc)
    manifest = json.loads((gen / "MANIFEST.json").read_text())
    assert manifest["crac_version"] == expected, f"the loader says {manifest['crac_version']}"
