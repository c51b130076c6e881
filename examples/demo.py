#!/usr/bin/env python3
"""crac demo: build the managed-memory Jacobi example against crac's simulated CUDA device, run it
natively, then under `crac launch --device sim` (sim "driver" version 1): checkpoint it mid-run,
kill it with SIGKILL, `crac restart` it on sim version 2, and check that it finishes with the
same verified result as the native run.

    .venv/bin/python examples/demo.py

Exits 0 when the restarted run matches the native one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARGS = ["256", "20000"]  # grid size, iterations: a few seconds, long enough to checkpoint


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


def wait_for_generation(ckpt: Path, timeout: float = 120.0) -> Path:
    """The first complete generation (latest link + manifest) under ckpt."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for latest in ckpt.glob("ckpt_*/latest"):
            if (latest / "MANIFEST.json").exists():
                return latest.resolve()
        time.sleep(0.05)
    raise SystemExit("demo: FAILED: no checkpoint was written")


def main() -> int:
    try:
        from crac_py.codegen import sim_toolchain
    except ImportError:
        sys.path.insert(0, str(HERE.parent))  # running from a clone without `pip install .`
        from crac_py.codegen import sim_toolchain
    tmp = Path(tempfile.mkdtemp(prefix="crac-demo-"))
    try:
        exe = tmp / "jacobi"
        try:
            sim_toolchain.build(HERE / "jacobi.c", exe, ("-lm",))
        except sim_toolchain.ToolchainError as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 1
        print(f"built {exe} against {sim_toolchain.cudart_dir()}/libcudart.so.13")
        native = run("native", [str(exe), *ARGS])

        ckpt = tmp / "ckpt"
        ckpt.mkdir()
        launch = [
            *crac_cmd(),
            "launch",
            "--device",
            "sim",
            "--sim-version",
            "1",
            "-c",
            str(ckpt),
            "--",
            str(exe),
            *ARGS,
        ]
        print(f"[launch] {' '.join(launch)}")
        proc = subprocess.Popen(
            launch, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        time.sleep(1.5)
        print(f"[checkpoint] kill -USR2 {proc.pid}")
        os.kill(proc.pid, signal.SIGUSR2)
        latest = wait_for_generation(ckpt)
        print(f"[checkpoint] written: {latest}")
        print(f"[kill] kill -KILL {proc.pid}")
        proc.kill()
        proc.wait(timeout=60)

        restart = [*crac_cmd(), "restart", "--device", "sim", "--sim-version", "2", str(ckpt)]
        restarted = run("restart on sim version 2", restart)

        if native.returncode != 0 or restarted.returncode != 0:
            print("demo: FAILED (see above)")
            return 1
        if native.stdout != restarted.stdout:
            print("demo: FAILED: the restarted run's result differs from the native run")
            return 1
        print("demo: OK — checkpointed, killed, restarted on another sim version, same result")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
