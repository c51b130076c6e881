"""What a restarted program pays for /proc/<pid> paths (docs/DECISIONS.md "/proc/<pid> after a
restart"): bench/apps/path_calls.c (rounds of open+close and stat of one file, listings of /etc,
reads of /proc/self/stat) natively, under `crac launch`, and restarted by `crac restart`, where
open, stat and getdents64 go through the loader, which translates the ids a path, a listing or a
stat file names (and restarted with CRAC_PROC_PATHS=0, which turns the trap off). Runs
interleaved; medians of each run's rounds.

    python bench/procpath.py [--reps 3] [--rounds 5] [-n 20000]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    REPO,
    BenchError,
    build_program,
    clean_env,
    crac_cmd,
    markdown_table,
    missing_loader_message,
    run_header,
)

MEASURES = ("open+close", "stat", "list /etc", "read /proc/self/stat")


def rounds(p: subprocess.Popen, count: int) -> list[tuple[float, ...]]:
    """COUNT `round` lines of P after its first (a warm-up, or one a checkpoint fell in): the ns
    of each of MEASURES."""
    assert p.stdout is not None
    got: list[tuple[float, ...]] = []
    first = True
    for line in p.stdout:
        words = line.split()
        if words[:1] != [b"round"]:
            continue
        if not first:
            got.append(tuple(float(w) for w in words[3::2]))
        first = False
        if len(got) == count:
            return got
    raise BenchError(f"the program stopped after {len(got)} rounds (exit {p.poll()})")


def run(cmd: list[str], count: int, cwd: Path, env: dict[str, str] | None = None) -> list:
    p = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        env={**clean_env(), **(env or {})},
    )
    try:
        return rounds(p, count)
    finally:
        p.kill()
        p.wait()


def checkpointed(exe: Path, n: int, count: int, work: Path) -> tuple[list, Path]:
    """The rounds of EXE under `crac launch`, then its image (the run is killed)."""
    ck = work / "ck"
    p = subprocess.Popen(
        [*crac_cmd(), "launch", "-c", str(ck), "--", str(exe), str(n)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=work,
        env=clean_env(),
    )
    try:
        launched = rounds(p, count)
        os.kill(p.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 300
        while not list(ck.glob("ckpt_*/latest")):
            if time.monotonic() > deadline:
                raise BenchError("no checkpoint after 300 s")
            time.sleep(0.05)
    finally:
        p.kill()
        p.wait()
    return launched, ck


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("-n", type=int, default=20000)
    args = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    results: dict[str, list[tuple[float, ...]]] = {
        "native": [],
        "launched": [],
        "restarted": [],
        "restarted, CRAC_PROC_PATHS=0": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = build_program(REPO / "bench" / "apps" / "path_calls.c", work)
        for rep in range(args.reps):
            results["native"] += run([str(exe), str(args.n)], args.rounds, work)
            rep_dir = work / f"rep{rep}"
            rep_dir.mkdir()
            launched, ck = checkpointed(exe, args.n, args.rounds, rep_dir)
            results["launched"] += launched
            restart = [*crac_cmd(), "restart", str(ck)]
            results["restarted"] += run(restart, args.rounds, rep_dir)
            off = {"CRAC_PROC_PATHS": "0"}
            results["restarted, CRAC_PROC_PATHS=0"] += run(restart, args.rounds, rep_dir, off)
    span = range(len(MEASURES))
    base = [statistics.median(v[i] for v in results["native"]) for i in span]
    rows = []
    for name, vals in results.items():
        med = [statistics.median(v[i] for v in vals) for i in span]
        rows.append([name, *(f"{med[i]:.0f} ({med[i] / base[i]:.2f})" for i in span)])
    print(run_header(args.reps * args.rounds))
    print(markdown_table(["run", *(f"{m} ns (ratio)" for m in MEASURES)], rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"procpath: {exc}", file=sys.stderr)
        sys.exit(2)
