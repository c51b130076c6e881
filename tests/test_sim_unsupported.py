"""CUDA functions outside the spec: `crac launch` refuses a program importing one (exit 2, the
function named); a library loaded behind preflight's back gets ld.so's clear error."""

from __future__ import annotations

import subprocess

from conftest import crac_cmd, describe, require_native, run_native
from test_sim_examples import run_sim


def test_launch_refuses_unsupported_import(sim_apps):
    require_native()
    cp = subprocess.run(
        [*crac_cmd(), "launch", "--device", "sim", "--", str(sim_apps["sim_unsupported"])],
        capture_output=True,
        timeout=60,
    )
    assert cp.returncode == 2, describe(cp)
    err = cp.stderr.decode()
    assert "cudaIpcGetMemHandle" in err and "does not support" in err, describe(cp)
    assert "Traceback" not in err
    # auto picks a device for it too, and refuses the same way
    cp = subprocess.run(
        [*crac_cmd(), "launch", str(sim_apps["sim_unsupported"])], capture_output=True, timeout=60
    )
    assert cp.returncode == 2 and b"cudaIpcGetMemHandle" in cp.stderr, describe(cp)


def test_unsupported_call_at_run_time(sim_apps, tmp_path):
    lib = sim_apps["sim_unsupported_lib"]
    app = sim_apps["sim_dlopen"]
    for mode in ("now", "lazy"):
        native = run_native([app, lib, mode], cwd=tmp_path)
        crac = run_sim([app, lib, mode], 1, cwd=tmp_path)
        if mode == "now":
            # dlopen fails and says which symbol is missing, as with the native library
            for cp in (native, crac):
                assert cp.returncode == 0, describe(cp)
                assert b"dlopen failed" in cp.stdout, describe(cp)
                assert b"undefined symbol: cudaIpcGetMemHandle" in cp.stdout, describe(cp)
        else:
            # ld.so stops the program at the call, naming the symbol and its version
            for cp in (native, crac):
                assert cp.returncode == 127, describe(cp)
                assert b"undefined symbol: cudaIpcGetMemHandle, version libcudart.so.13" in (
                    cp.stderr
                ), describe(cp)
