"""More of the CUDA runtime on the sim (docs/SIM.md "More of the runtime"): programs written
against NVIDIA's headers that use stream priorities, events with flags and callbacks, CUDA graphs
(captured and explicit), stream-ordered allocation with memory pools, and registered host memory.
Each runs natively on the native sim, under `crac launch` on both sim versions, and through two
checkpoint -> SIGKILL -> restart cycles, with output identical to the native run; the state these
calls create (priorities, event flags, graphs, pools, registered ranges) must survive the
restarts, which the programs check at every step."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import base_env, run_cycles
from conftest import crac_cmd, require_native

PROGRAMS = {
    "sim_api_streams": ["40", "40"],
    "sim_api_graph": ["40", "40"],
    "sim_api_pool": ["40", "40"],
    "sim_api_hostreg": ["40", "40"],
}
TIMEOUT = 180
IMPORT_LISTS = Path(__file__).resolve().parent.parent / "docs" / "cuda_imports"


def _native(exe: Path, args: list[str]) -> str:
    cp = subprocess.run(
        [str(exe), *args], capture_output=True, text=True, timeout=TIMEOUT, env=base_env()
    )
    assert cp.returncode == 0, f"{exe.name} fails natively:\n{cp.stderr[-3000:]}"
    assert cp.stdout.splitlines()[-1].startswith("DONE"), cp.stdout[-500:]
    return cp.stdout


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("version", ["1", "2"])
def test_launch_matches_native(name, version, sim_apps, tmp_path):
    require_native()
    exe = sim_apps[name]
    args = [PROGRAMS[name][0], "0"]
    expected = _native(exe, args)
    cmd = [*crac_cmd(), "launch", "--device", "sim", "--sim-version", version]
    cmd += ["-c", str(tmp_path / "ckpt"), "--", str(exe), *args]
    cp = subprocess.run(
        cmd, capture_output=True, text=True, timeout=TIMEOUT, env=base_env(), cwd=tmp_path
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert cp.stdout == expected
    if name == "sim_api_streams":  # cudaGetDriverEntryPointByVersion is refused with one line
        notes = [ln for ln in cp.stderr.splitlines() if "cudaGetDriverEntryPoint" in ln]
        assert notes == [
            'crac sim: cudaGetDriverEntryPoint("cuInit"): the simulated device has no driver API'
        ], cp.stderr


def test_coverage_of_real_programs():
    """`--coverage` reports at least 150 supported functions, and its coverage of every import
    list in docs/cuda_imports/."""
    cp = subprocess.run(
        [sys.executable, "-m", "crac_py.codegen", "--coverage"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    first = re.match(r"coverage: (\d+)/(\d+) ", cp.stdout)
    assert first and int(first.group(1)) >= 150, cp.stdout
    lists = sorted(p.name for p in IMPORT_LISTS.glob("*.txt"))
    assert len(lists) >= 3
    for name in lists:
        assert re.search(rf"^coverage of {re.escape(name)}: \d+/\d+ ", cp.stdout, re.M), cp.stdout


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_two_checkpoint_restart_cycles(name, sim_apps, tmp_path):
    run_cycles(sim_apps[name], PROGRAMS[name], tmp_path, cycles=2)
