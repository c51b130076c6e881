"""The crossing details of docs/ARCHITECTURE.md "Crossing" with real CUDA calls: 8 threads calling
concurrently, each with its own lower-half TLS; a signal handler that fires inside a crossing runs
with the upper fs; device memory inside D (no holes after cudaFree), pinned memory inside W; virtual
handles hide the backend's handle values."""

from __future__ import annotations

import re

import pytest
from conftest import describe, run_native
from test_sim_examples import run_sim


@pytest.mark.parametrize("app", ["sim_threads", "sim_signal"])
def test_native_and_crac(app, sim_apps, tmp_path):
    native = run_native([sim_apps[app]], cwd=tmp_path, timeout=120)
    assert native.returncode == 0, describe(native)
    for version in (1, 2):
        crac = run_sim([sim_apps[app]], version, cwd=tmp_path)
        assert crac.returncode == 0, f"sim{version}\n" + describe(crac)
        assert crac.stdout == native.stdout, describe(crac)


def test_layout_and_virtual_handles(sim_apps, tmp_path):
    native = run_native([sim_apps["sim_layout"]], cwd=tmp_path)
    assert native.returncode == 0, describe(native)
    out = {}
    for version in (1, 2):
        crac = run_sim([sim_apps["sim_layout"]], version, cwd=tmp_path)
        assert crac.returncode == 0, f"sim{version}\n" + describe(crac)
        out[version] = crac.stdout.decode()
    handles = [re.search(r"^handles: (.*)$", out[v], re.M) for v in (1, 2)]
    assert handles[0] and handles[1], out
    # The program sees crac's handles: identical under both backends ...
    assert handles[0].group(1) == handles[1].group(1), out
    # ... and not the backend's (natively, sim1 hands out heap addresses).
    assert handles[0].group(1) != re.search(r"^handles: (.*)$", native.stdout.decode(), re.M).group(
        1
    )
    assert "driver: 13000" in out[1] and "driver: 13010" in out[2]
