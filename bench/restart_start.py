"""What `crac restart` costs before the program runs: time from the command to the restarted
program's first output line, native path against the Python CLI's, beside the program's own
start-up.

    python bench/restart_start.py [-n 20] [--timeout 60] [--json]

The program is tests/apps/ckpt_counter.c (a line every millisecond), launched under crac,
checkpointed once and SIGKILLed; the same generation is then restarted N times by each variant,
interleaved (after one warm-up each), and the restarted program is killed at its first line:

* native: the program itself, started fresh, to its first line;
* python -c print(1): the interpreter's own start-up (the floor of anything in Python);
* crac restart (native path): `crac restart DIR` (docs/DECISIONS.md "Restart without Python");
* crac restart (Python CLI): the same command with CRAC_FAST_RESTART_DECLINED set, the variable
  the loader sets when it leaves a restart to the Python CLI: the path every restart took before.
* crac_restart_script.sh: the restart script the launch wrote (`crac restart -- CHECKPOINT`,
  through a shell).

Prints medians, minimums and ratios against the native start-up. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BenchError, build_apps, command_line, crac_cmd, markdown_table

STEPS = "10000000"  # never reached (the most ckpt_counter takes)
TICK_MS = "1"


def first_line_s(cmd: list[str], env: dict[str, str], timeout: float) -> float:
    """Seconds from starting CMD to its first line on stdout; the process is killed then."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        took = time.perf_counter() - start
        if not line:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise BenchError(f"{cmd[0]} printed nothing: {err.strip()[-400:]}")
        return took
    finally:
        proc.kill()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdout, proc.stderr):
            if f:
                f.close()


def make_image(app: Path, work: Path, env: dict[str, str], timeout: float) -> Path:
    """ckpt_counter launched, checkpointed once, SIGKILLed: its checkpoint directory."""
    ckpt = work / "ckpt"
    proc = subprocess.Popen(
        [*crac_cmd(), "launch", "-c", str(ckpt), str(app), STEPS, TICK_MS],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + timeout
        while not list(ckpt.glob("ckpt_*/latest")):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise BenchError("the checkpoint did not complete")
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    return ckpt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAC_", "DMTCP_"))}
    with tempfile.TemporaryDirectory(prefix="crac-restart-start-") as tmp:
        work = Path(tmp)
        app = build_apps(["ckpt_counter"], work)["ckpt_counter"]
        ckpt = make_image(app, work, env, opts.timeout)
        restart = [*crac_cmd(), "restart", str(ckpt)]
        variants: list[tuple[str, list[str], dict[str, str]]] = [
            ("native program", [str(app), STEPS, TICK_MS], env),
            ("python -c print(1)", [sys.executable, "-c", "print(1)"], env),
            ("crac restart (native path)", restart, env),
            ("crac restart (Python CLI)", restart, env | {"CRAC_FAST_RESTART_DECLINED": "bench"}),
            ("crac_restart_script.sh", [str(ckpt / "crac_restart_script.sh")], env),
        ]
        samples: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        for rep in range(opts.reps + 1):
            for name, cmd, venv in variants:
                took = first_line_s(cmd, venv, opts.timeout)
                if rep:  # the first round warms the caches
                    samples[name].append(took)
    native = statistics.median(samples["native program"])
    results = [
        {
            "variant": name,
            "median_ms": statistics.median(s) * 1e3,
            "min_ms": min(s) * 1e3,
            "vs_native": statistics.median(s) / native,
            "reps": len(s),
        }
        for name, s in samples.items()
    ]
    if opts.json:
        print(json.dumps({"command": command_line(), "results": results}, indent=2))
        return 0
    print(f"Time to the first output line, {opts.reps} interleaved repetitions, medians\n")
    rows = [
        [r["variant"], f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}", f"{r['vs_native']:.1f}"]
        for r in results
    ]
    print(markdown_table(["variant", "median ms", "min ms", "median / native program"], rows))
    print(f"\ncommand: `{command_line()}`")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/restart_start.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
