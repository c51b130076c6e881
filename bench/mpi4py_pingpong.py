"""mpi4py under crac: mpi4py's own ping-pong (`python -m mpi4py.bench pingpong`, a program nobody
on the team wrote), numpy buffers and pickled objects, natively vs under crac.

    python bench/mpi4py_pingpong.py [-n 5] [--json]

Needs Open MPI (`mpirun`) and mpi4py (`pip install '.[test]'`). Each case runs `mpirun -np 2
python -m mpi4py.bench pingpong ...` (native) and `mpirun -np 2 crac launch python -m mpi4py.bench
pingpong ...` (crac) alternately, N repetitions each after one warm-up; mpi4py times its own
loop (after its own warm-up iterations), so start-up is left out. The time of one message (its
"Time Mean") is kept; medians over the repetitions, and the ratio crac/native. Under crac a
pickled message is received by a matched probe that copies it once more (docs/MPI.md, "mpi4py").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import BenchError, command_line, crac_cmd, markdown_table, missing_loader_message

TIMEOUT = 300.0
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

# (label, mpi4py.bench options, message size in bytes, iterations)
CASES = [
    ("numpy buffer, 8 B", [], 8, 20000),
    ("numpy buffer, 1 MiB", [], 1 << 20, 500),
    ("pickled bytes, 8 B", ["-p"], 8, 20000),
    ("pickled bytes, 1 MiB", ["-p"], 1 << 20, 500),
]


def _env() -> dict[str, str]:
    prefixes = ("CRAC_COORD", "DMTCP_COORD", "CRAC_CHECKPOINT", "DMTCP_CHECKPOINT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(MPI_ENV)
    return env


def one_run(argv: list[str], cwd: Path) -> float:
    """Seconds per message, as mpi4py.bench reports it ("SIZE BW | MEAN ± STD SAMPLES")."""
    res = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=cwd, timeout=TIMEOUT)
    if res.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-1500:]}")
    rows = [ln.split() for ln in res.stdout.splitlines() if ln.strip() and ln[0] != "#"]
    if len(rows) != 1 or "|" not in rows[0]:
        raise BenchError(f"unexpected output of {' '.join(argv)}:\n{res.stdout}")
    return float(rows[0][rows[0].index("|") + 1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=5, help="runs per variant and case")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    opts = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        raise BenchError(missing)
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if not mpirun:
        raise BenchError("Open MPI is not installed (apt-get install openmpi-bin)")
    launch = [mpirun, "-np", "2", "--oversubscribe", "--bind-to", "none"]
    results = []
    with tempfile.TemporaryDirectory(prefix="crac-bench-mpi4py-") as tmp:
        for label, flags, size, loops in CASES:
            bench = [sys.executable, "-m", "mpi4py.bench", "pingpong", *flags]
            bench += [
                "-m",
                str(size),
                "-n",
                str(size),
                "-l",
                str(loops),
                "--loop-large",
                str(loops),
            ]
            argvs = {"native": [*launch, *bench], "crac": [*launch, *crac_cmd(), "launch", *bench]}
            samples: dict[str, list[float]] = {"native": [], "crac": []}
            for i in range(opts.reps + 1):  # the first of each is a warm-up
                for name, argv in argvs.items():
                    v = one_run(argv, Path(tmp))
                    if i:
                        samples[name].append(v)
            med = {k: statistics.median(v) for k, v in samples.items()}
            ratio = med["crac"] / med["native"]
            results.append({"case": label, **med, "ratio": ratio, "samples": samples})
            us = {k: f"{v * 1e6:.2f} us" for k, v in med.items()}
            print(f"  {label}: native {us['native']}, crac {us['crac']}", file=sys.stderr)
    load = os.getloadavg()
    if opts.json:
        print(json.dumps({"command": command_line(), "loadavg": load, "cases": results}, indent=2))
        return 0
    rows = [[r["case"], f"{r['native'] * 1e6:.2f}", f"{r['crac'] * 1e6:.2f}",
             f"{(r['ratio'] - 1) * 100:+.1f} %"] for r in results]  # fmt: skip
    print(f"`{command_line()}` — load average {load[0]:.2f}, medians of {opts.reps}\n")
    print(markdown_table(["case (2 ranks)", "native µs", "crac µs", "crac vs native"], rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"mpi4py_pingpong: {exc}", file=sys.stderr)
        sys.exit(1)
