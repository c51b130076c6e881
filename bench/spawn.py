"""What a child costs under crac: bench/apps/spawn_loop.c (N forks whose child exits at once, then N
fork + exec of /bin/true, each waited for) natively and under `crac launch`, repetitions
interleaved.

    python bench/spawn.py [-n 50] [--reps 5] [--json]

Prints the medians over the repetitions of each run's median fork and fork+exec, the first fork
apart (under crac it starts the tree's coordinator), and their ratios to the native run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import (
    REPO,
    BenchError,
    build_program,
    clean_env,
    crac_launch_cmd,
    markdown_table,
    missing_loader_message,
    run_header,
)

FIELDS = ("first_fork_ms", "fork_ms", "fork_exec_ms")


def one_run(cmd: list[str], cwd: Path, timeout: float) -> dict[str, float]:
    res = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=clean_env()
    )
    words = res.stdout.split()
    if res.returncode != 0 or len(words) != 2 * len(FIELDS):
        raise BenchError(f"{cmd[0]} ... failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    return {words[i]: float(words[i + 1]) for i in range(0, len(words), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=50, help="children of each kind per run")
    ap.add_argument("--reps", type=int, default=5, help="runs of each variant")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        raise BenchError(missing)
    with tempfile.TemporaryDirectory(prefix="crac-spawn-") as tmp:
        work = Path(tmp)
        exe = build_program(REPO / "bench" / "apps" / "spawn_loop.c", work)
        launch = crac_launch_cmd(str(exe), str(opts.n))
        split = launch.index("--")  # the checkpoint directory goes before the program
        variants = {
            "native": [str(exe), str(opts.n)],
            "crac launch": [*launch[:split], "-c", str(work / "ckpt"), *launch[split:]],
        }
        samples: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(opts.reps):
            for name, cmd in variants.items():
                samples[name].append(one_run(cmd, work, opts.timeout))
    medians = {
        name: {f: statistics.median(s[f] for s in runs) for f in FIELDS}
        for name, runs in samples.items()
    }
    native = medians["native"]
    if opts.json:
        print(json.dumps({"medians": medians, "samples": samples}, indent=2))
        return 0
    print(run_header(opts.reps))
    rows = []
    for name, m in medians.items():
        rows.append(
            [name]
            + [f"{m[f]:.3f}" for f in FIELDS]
            + [
                f"{m['fork_ms'] / native['fork_ms']:.1f}",
                f"{m['fork_exec_ms'] / native['fork_exec_ms']:.1f}",
            ]
        )
    header = [
        "variant",
        "first fork (ms)",
        "fork (ms)",
        "fork+exec (ms)",
        "fork ×native",
        "fork+exec ×native",
    ]
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BenchError, subprocess.TimeoutExpired) as exc:
        print(f"spawn.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
