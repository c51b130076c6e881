"""`crac compact` against a full checkpoint of the same memory, side by side in one run: the
time to make a chain of one full and ROUNDS incremental generations of SIZE MiB one full
generation, and the time a full checkpoint of that program takes.

    nice python bench/compact.py [--size 256] [--percent 5] [--rounds 4] [--dir /var/tmp]

Builds bench/apps/incr_dirty.c (SIZE MiB of random bytes; each SIGUSR1 rewrites PERCENT % of its
pages). Two programs, one `crac launch --incremental --full-every 100`, one plain `crac launch`,
checkpointed once, then ROUNDS times alternating: SIGUSR1, SIGUSR2, timed until the generation's
MANIFEST.json exists (bench/incremental.py's Run). Both are SIGKILLed; then, ROUNDS times, the
chain's checkpoint directory is copied afresh (holes kept) and `crac compact` of the copy is
timed to its exit (a full generation written, flushed and published), alternating with `crac
compact` of an empty directory (the command's fixed cost: Python's start and a refusal).

Prints medians and the ratio compact / full checkpoint; never asserts on time.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, BenchError, build_program, clean_env, crac_cmd, markdown_table, run_header
from incremental import Run

APP_SRC = REPO / "bench" / "apps" / "incr_dirty.c"


def timed_compact(target: Path, expect_ok: bool) -> float:
    t0 = time.perf_counter()
    env = {**clean_env(), "CRAC_TIMING": "1"}
    cp = subprocess.run(
        [*crac_cmd(), "compact", str(target)], capture_output=True, env=env, timeout=600
    )
    for line in cp.stderr.decode().splitlines():
        if line.startswith("crac: timing: compact:"):
            print(line, file=sys.stderr)
    seconds = time.perf_counter() - t0
    if (cp.returncode == 0) != expect_ok:
        raise BenchError(f"crac compact {target}: exit {cp.returncode}: {cp.stderr.decode()}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--percent", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp")
    opts = ap.parse_args()
    full_s: list[float] = []
    compact_s: list[float] = []
    fixed_s: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="crac-compact-", dir=opts.dir) as tmp:
            work = Path(tmp)
            app = build_program(APP_SRC, work)
            inc = Run(
                app, work / "inc", opts.size, opts.percent, ["--incremental", "--full-every", "100"]
            )
            full = Run(app, work / "full", opts.size, opts.percent, [])
            try:
                inc.checkpoint()
                full_s.append(full.checkpoint()["ckpt_s"])
                for n in range(1, opts.rounds + 1):
                    inc.dirty(n)
                    inc.checkpoint()
                    full.dirty(n)
                    full_s.append(full.checkpoint()["ckpt_s"])
            finally:
                inc.kill()
                full.kill()
            empty = work / "empty"
            empty.mkdir()
            for r in range(opts.rounds):
                copy = work / f"copy{r}"
                subprocess.run(
                    ["cp", "-a", "--sparse=always", str(inc.ckdir), str(copy)], check=True
                )
                compact_s.append(timed_compact(copy, True))
                fixed_s.append(timed_compact(empty, False))
                shutil.rmtree(copy, ignore_errors=True)
    except BenchError as exc:
        print(f"compact.py: {exc}", file=sys.stderr)
        return 1
    print(run_header(opts.rounds))
    f, c, z = (statistics.median(v) for v in (full_s, compact_s, fixed_s))
    rows = [
        ["full checkpoint (s)", f"{f:.3f}", "1.000"],
        [f"crac compact, chain of {1 + opts.rounds} (s)", f"{c:.3f}", f"{c / f:.3f}"],
        ["crac compact refused (fixed cost, s)", f"{z:.3f}", f"{z / f:.3f}"],
        ["crac compact less its fixed cost (s)", f"{c - z:.3f}", f"{(c - z) / f:.3f}"],
    ]
    print(f"{opts.size} MiB, {opts.percent} % of the pages written between checkpoints\n")
    print(markdown_table(["", "seconds", "/ full checkpoint"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
