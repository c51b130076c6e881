#!/usr/bin/env python3
"""crac demo: build the vector-add example against crac's simulated CUDA device, run it natively
and under `crac launch --device sim`, and check that both give the same verified result.

    .venv/bin/python examples/demo.py

Exits 0 when the run under crac matches the native one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARGS = ["1048576", "200"]  # N, rounds: long enough to be worth checkpointing


def crac_cmd() -> list[str]:
    script = Path(sys.executable).parent / "crac"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "crac_py"]


def run(label: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    t0 = time.perf_counter()
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    dt = time.perf_counter() - t0
    print(f"[{label}] exit {cp.returncode} in {dt:.2f} s: {cp.stdout.strip()}")
    if cp.returncode != 0:
        print(cp.stderr, file=sys.stderr)
    return cp


def main() -> int:
    try:
        from crac_py import sim_toolchain
    except ImportError:
        sys.path.insert(0, str(HERE.parent))  # running from a clone without `pip install .`
        from crac_py import sim_toolchain
    tmp = Path(tempfile.mkdtemp(prefix="crac-demo-"))
    try:
        exe = tmp / "vector_add"
        try:
            sim_toolchain.build(HERE / "vector_add.c", exe, ("-lm",))
        except sim_toolchain.ToolchainError as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
        print(f"built {exe} against {sim_toolchain.cudart_dir()}/libcudart.so.13")

        native = run("native", [str(exe), *ARGS])
        under_crac = run("crac launch --device sim", [*crac_cmd(), "launch", "--device", "sim",
                                                       "--", str(exe), *ARGS])

        # ---- checkpoint / kill / restart (next step of the demo) ----------------------------
        # Run the program under crac with a checkpoint directory, checkpoint it mid-run
        # (`crac command --checkpoint` or SIGUSR2), kill it, `crac restart` the image (with
        # --sim-version 2: a different "driver"), and compare its output with `native` below.
        # --------------------------------------------------------------------------------------

        if native.returncode != 0 or under_crac.returncode != 0:
            print("demo: FAILED (see above)")
            return 1
        if native.stdout != under_crac.stdout:
            print("demo: FAILED: the output under crac differs from the native run")
            return 1
        print("demo: OK — same verified result natively and under crac")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
