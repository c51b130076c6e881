"""CUDA semantics of the sim, natively and under crac with both sim versions: error semantics
(last error, sticky errors, invalid pointers and handles, memory limit) and stream ordering
(in-order streams, host functions, cross-stream cudaStreamWaitEvent, legacy default stream)."""

from __future__ import annotations

import os

import pytest
from conftest import describe, run_native
from test_sim_examples import run_sim

SIM_ENV = {**os.environ, "CRAC_SIM_MEMORY": "64M"}


@pytest.mark.parametrize("app", ["sim_errors", "sim_streams"])
def test_semantics_native_and_crac(app, sim_apps, tmp_path):
    native = run_native([sim_apps[app]], env=SIM_ENV, cwd=tmp_path, timeout=120)
    assert native.returncode == 0, describe(native)
    assert native.stdout.rstrip().endswith(b"OK"), describe(native)
    for version in (1, 2):
        crac = run_sim([sim_apps[app]], version, env=SIM_ENV, cwd=tmp_path)
        assert crac.returncode == 0, f"sim{version}\n" + describe(crac)
        assert crac.stdout == native.stdout, f"sim{version}\n" + describe(crac)


def test_driver_versions(sim_apps, tmp_path):
    """The two sim versions report different driver versions (13.0, 13.1), like two drivers."""
    seen = {}
    for version in (1, 2):
        crac = run_sim([sim_apps["sim_errors"]], version, env=SIM_ENV, cwd=tmp_path)
        assert crac.returncode == 0, describe(crac)
        seen[version] = crac.stderr
    assert b"driver version 13000" in seen[1]
    assert b"driver version 13010" in seen[2]
