"""A Go program (tests/apps/go/ckpt_go.go, built here with Debian's golang-go) through two
checkpoint -> SIGKILL -> restart cycles. Go's runtime makes its own threads, preempts goroutines
with SIGURG, runs a garbage collector and finds the vDSO's clocks with its own ELF parser (which
needs version definitions: docs/DECISIONS.md "The upper half's vDSO")."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR


@pytest.fixture(scope="module")
def go_app(tmp_path_factory) -> Path:
    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed (Debian: golang-go)")
    out = tmp_path_factory.mktemp("go")
    (out / "go.mod").write_text("module ckptgo\n\ngo 1.19\n")
    shutil.copy(APPS_DIR / "go" / "ckpt_go.go", out / "main.go")
    env = dict(
        os.environ,
        CGO_ENABLED="1",
        GOCACHE=str(out / "cache"),
        GOPATH=str(out / "gopath"),
        GOFLAGS="-mod=mod",
        GOTOOLCHAIN="local",
    )
    res = subprocess.run(
        [go, "build", "-o", "ckpt_go", "."],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    return out / "ckpt_go"


def test_go_program(go_app, tmp_path):
    run_cycles(go_app, ["100", "20"], tmp_path, cycles=2)
