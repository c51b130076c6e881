"""A Go program (tests/apps/go/ckpt_go.go, built here with Debian's golang-go) through two
checkpoint -> SIGKILL -> restart cycles. Go's runtime makes its own threads, preempts goroutines
with SIGURG, runs a garbage collector and finds the vDSO's clocks with its own ELF parser (which
needs version definitions: docs/DECISIONS.md "The upper half's vDSO"). A Go program linked
statically (Go's default without cgo) is refused with how to build it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR, crac_cmd

HELLO = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from Go") }\n'


def go_build(out: Path, source: str, cgo: str, *flags: str) -> Path:
    """SOURCE built in OUT (its own module, caches and GOPATH there) with CGO_ENABLED=CGO."""
    go = shutil.which("go")
    if not go:
        pytest.skip("go is not installed (Debian: golang-go)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "go.mod").write_text("module ckptgo\n\ngo 1.19\n")
    (out / "main.go").write_text(source)
    env = dict(
        os.environ,
        CGO_ENABLED=cgo,
        GOCACHE=str(out.parent / "gocache"),
        GOPATH=str(out.parent / "gopath"),
        GOFLAGS="-mod=mod",
        GOTOOLCHAIN="local",
    )
    res = subprocess.run(
        [go, "build", *flags, "-o", "prog", "."],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    return out / "prog"


@pytest.fixture(scope="module")
def go_app(tmp_path_factory) -> Path:
    source = (APPS_DIR / "go" / "ckpt_go.go").read_text()
    return go_build(tmp_path_factory.mktemp("go") / "ckpt_go", source, "1")


def test_go_program(go_app, tmp_path):
    run_cycles(go_app, ["100", "20"], tmp_path, cycles=2)


def test_static_go_program_is_refused_with_how_to_build_it(tmp_path):
    """Go links statically unless cgo is in the build: crac refuses such a program and says how
    to build it, and the program built so runs under crac."""
    static = go_build(tmp_path / "static", HELLO, "0")
    res = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), "--", str(static)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert "statically linked Go program" in res.stderr, res.stderr
    flags = res.stderr.split("CGO_ENABLED=1 go build ", 1)[1].split()
    built = go_build(tmp_path / "dynamic", HELLO, "1", *flags)
    res = subprocess.run(
        [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), "--", str(built)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and res.stdout == "hello from Go\n", res.stderr
