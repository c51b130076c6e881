"""The floors under a restart's memory fill on this machine: reading the image from the page
cache against copying it into fresh anonymous memory, in 4 KiB pages, in huge pages, and
through a userfaultfd (UFFDIO_COPY, UFFDIO_MOVE), each as a ratio to the plain read.

    python bench/fill_floor.py [--mib 1024] [-n 3] [--settle 4] [--dir /var/tmp]

Builds bench/apps/fill_floor.c, writes MIB MiB of random data to a file in DIR, reads it once
(warm cache), then runs the modes interleaved N times in two conditions: "primed" (just before
each run, as much memory as the run needs is touched and freed: bench/_common.py's
prefault_and_free) and "settled" (SETTLE seconds of sleep before each run: on a VM whose balloon
reports free pages to the host, memory freed that long ago comes back only through the host's
page faults). No CRC or checks: the cost of the memory alone. Never asserts on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, BenchError, build_program, markdown_table, prefault_and_free, run_header

MODES = ["read", "small", "huge", "uffdcopy", "uffdmove"]
WHAT = {
    "read": "pread into one 2 MiB buffer (`cat`)",
    "small": "4 KiB pages: populate, pread",
    "huge": "huge pages: populate, pread",
    "uffdcopy": "userfaultfd: pread, UFFDIO_COPY (the lazy prefetch)",
    "uffdmove": "userfaultfd: pread into a huge page, UFFDIO_MOVE",
}


def run_mode(exe: Path, data: Path, mode: str) -> float:
    res = subprocess.run([str(exe), str(data), mode], capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise BenchError(f"fill_floor {mode}: {res.stderr.strip()}")
    return float(res.stdout.split()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("-n", "--reps", type=int, default=3)
    ap.add_argument("--settle", type=float, default=4.0, help="seconds before a settled run")
    ap.add_argument("--dir", default="/var/tmp", help="where the data file goes (a real disk)")
    opts = ap.parse_args()
    if opts.mib < 2 or opts.reps < 1:
        print("fill_floor.py: --mib must be >= 2 and -n >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="crac-fill-", dir=opts.dir) as tmp:
        exe = build_program(REPO / "bench" / "apps" / "fill_floor.c", Path(tmp))
        data = Path(tmp) / "data"
        with open(data, "wb") as f:
            for _ in range(opts.mib):
                f.write(os.urandom(1 << 20))
        run_mode(exe, data, "read")  # into the page cache
        nbytes = opts.mib << 20
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(opts.reps):
            for cond in ("primed", "settled"):
                for mode in MODES:
                    if cond == "primed":
                        prefault_and_free(2 * nbytes)
                    else:
                        time.sleep(opts.settle)
                    times.setdefault((cond, mode), []).append(run_mode(exe, data, mode))
    print(run_header(opts.reps))
    rows = []
    for mode in MODES:
        row = [mode, WHAT[mode]]
        for cond in ("primed", "settled"):
            t = statistics.median(times[(cond, mode)])
            read = statistics.median(times[(cond, "read")])
            row += [f"{t:.3f}", f"{t / read:.2f}"]
        rows.append(row)
    header = ["mode", "what", "primed s", "/ read", "settled s", "/ read"]
    print(markdown_table(header, rows))
    print("\neach run, seconds:")
    for (cond, mode), ts in times.items():
        print(f"- {cond} {mode}: {' '.join(f'{t:.3f}' for t in ts)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/fill_floor.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
