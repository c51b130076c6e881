"""Every example gives the same verified result natively (the native sim libcudart) and under
`crac launch --device sim` with sim version 1 and 2 (docs/SIM.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import crac_cmd, describe, require_native, run_native
from sim_build import EXAMPLES, EXAMPLES_DIR

ARGS = {
    "vector_add": ["100000", "3"],
    "multistream": ["50000"],
    "jacobi": ["64", "200"],
    "threads": ["5000"],
}


def run_sim(argv, version: int, *, env=None, cwd=None, timeout: float = 120):
    """argv under `crac launch --device sim --sim-version N`."""
    require_native()
    cmd = [
        *crac_cmd(),
        "launch",
        "--device",
        "sim",
        "--sim-version",
        str(version),
        "--",
        *map(str, argv),
    ]
    return subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, env=env, cwd=cwd, timeout=timeout
    )


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_same_under_crac(name, examples, tmp_path):
    argv = [examples[name], *ARGS[name]]
    native = run_native(argv, cwd=tmp_path, timeout=120)
    assert native.returncode == 0, "the native run itself fails\n" + describe(native)
    assert b" OK\n" in native.stdout, describe(native)
    for version in (1, 2):
        crac = run_sim(argv, version, cwd=tmp_path)
        assert crac.returncode == 0, f"sim{version}\n" + describe(crac)
        assert crac.stdout == native.stdout, f"sim{version}: output differs\n" + describe(crac)


def test_examples_makefile(tmp_path):
    """examples/Makefile builds all four against the native sim library."""
    make = shutil.which("make")
    assert make, "make is not installed; the examples' Makefile needs it"
    env = dict(os.environ)
    res = subprocess.run(
        [make, "-C", str(EXAMPLES_DIR), f"OUT={tmp_path}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for name in EXAMPLES:
        exe = tmp_path / name
        assert exe.is_file(), res.stdout
        cp = run_native([exe, *ARGS[name]], timeout=120)
        assert cp.returncode == 0, describe(cp)


def test_demo_script():
    """examples/demo.py (the README's demo) exits 0."""
    require_native()
    res = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / "demo.py")], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "demo: OK" in res.stdout
