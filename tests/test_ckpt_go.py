"""A Go program (tests/apps/go/ckpt_go.go, built here with Debian's golang-go) through two
checkpoint -> SIGKILL -> restart cycles. Go's runtime makes its own threads, preempts goroutines
with SIGURG, runs a garbage collector and finds the vDSO's clocks with its own ELF parser (which
needs version definitions: docs/DECISIONS.md "The upper half's vDSO"); built as crac needs it,
a cgo PIE. Built otherwise it is refused, with how to build it (docs/DECISIONS.md "Go
programs")."""

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
    return go_build(tmp_path_factory.mktemp("go") / "ckpt_go", source, "1", "-buildmode=pie")


def test_go_program(go_app, tmp_path):
    run_cycles(go_app, ["100", "20"], tmp_path, cycles=2)


@pytest.mark.parametrize(
    ("cgo", "flags", "why"),
    [
        ("0", [], "statically linked Go program"),
        ("1", [], "linked at a fixed address"),
        ("0", ["-buildmode=pie"], "built without cgo"),
    ],
    ids=["static", "fixed-address", "no-cgo"],
)
def test_go_program_built_otherwise_is_refused_with_how_to_build_it(tmp_path, cgo, flags, why):
    """Go's default build (static without cgo, at a fixed address with it) and a PIE without cgo
    are refused, saying how to build the program; built so, it runs under crac."""
    source = HELLO if cgo == "0" else HELLO.replace('import "fmt"', 'import "fmt"\n\nimport "C"')
    prog = go_build(tmp_path / "as_built", source, cgo, *flags)
    launch = [*crac_cmd(), "launch", "-c", str(tmp_path / "ckpt"), "--"]
    res = subprocess.run([*launch, str(prog)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and why in res.stderr, res.stderr
    line = res.stderr.split("build it with ", 1)[1]
    env, _, flags = line.split(" (", 1)[0].partition(" go build ")
    assert env == "CGO_ENABLED=1" and 'import _ "runtime/cgo"' in line, line
    with_cgo = HELLO.replace('import "fmt"', 'import (\n\t"fmt"\n\t_ "runtime/cgo"\n)')
    built = go_build(tmp_path / "rebuilt", with_cgo, "1", *flags.split())
    res = subprocess.run([*launch, str(built)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout == "hello from Go\n", res.stderr
