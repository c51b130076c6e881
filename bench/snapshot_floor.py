"""A checkpoint snapshot's floors on this machine: the forked writer (crac's current design, in
miniature) against a userfaultfd write-protect snapshot, beside dd and O_DIRECT of the same bytes.

    python bench/snapshot_floor.py [--sizes 256,2048] [--reps 3] [--dir /var/tmp] [--verify]
                                   [--no-prime] [--cases dd,direct,fork,fork_splice]

Builds bench/apps/snapshot_floor.c into a temporary directory and runs it once per case, size and
repetition (a fresh process each; cases rotated each repetition; the image file in DIR deleted
after each). The memory is SIZE MiB of 4 KiB anonymous pages of xorshift bytes; in the fork and
uffd cases a "program" keeps writing one word into a random page after each ~20 us of compute,
and its rate during the checkpoint is compared with its rate before. CPU is from getrusage (the
machine's 2 CPUs are shared with other work, so wall time alone says little): the child's for
fork, the process's minus the program thread's for uffd. Writeback done by kernel flusher
threads is nobody's CPU here, which flatters the buffered cases. Before each run, twice its memory
is touched and freed (bench/_common.py's prefault_and_free; --no-prime skips it): on this VM,
page-cache and COW pages from memory freed long ago come back slowly, so `dd` of 2048 MiB varied
from 1.2 to 5.2 s between repetitions without it.

--verify runs each case once per size with the snapshot copy kept and compared with the file
(untimed), plus uffd_wp with kernel writes (pread) into the protected memory, with and without
UFFD_USER_MODE_ONLY. Never asserts on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from _common import REPO, BenchError, markdown_table, prefault_and_free, run_header

SRC = REPO / "bench" / "apps" / "snapshot_floor.c"
CFLAGS = ["-O2", "-std=c11", "-msse4.2", "-Wall", "-Wextra", "-Werror", "-pthread"]
CASES = ["dd", "direct", "fork", "fork_direct", "fork_splice", "uffd_wp", "uffd_wp_buffered"]
SNAPSHOTS = {"fork", "fork_direct", "fork_splice", "uffd_wp", "uffd_wp_buffered"}
UFFD = {"uffd_wp", "uffd_wp_buffered"}

Result = dict[str, str]


def build(out_dir: Path) -> Path:
    exe = out_dir / "snapshot_floor"
    res = subprocess.run(
        ["gcc", *CFLAGS, "-o", str(exe), str(SRC)], capture_output=True, text=True, timeout=120
    )
    if res.returncode != 0:
        raise BenchError(f"cannot build {SRC.name}:\n{res.stderr}")
    return exe


def run_case(exe: Path, case: str, mib: int, image_dir: Path, prime: bool, *opts: str) -> Result:
    """One fresh process; its one line of key=value results. The image is deleted after."""
    image = image_dir / f"snapshot_floor-{os.getpid()}-{case}.img"
    if prime:
        prefault_and_free(2 * (mib << 20))  # syncs first
    else:
        os.sync()  # earlier runs' dirty pages are not this run's writeback
    try:
        res = subprocess.run(
            [str(exe), case, str(mib), str(image), *opts],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        image.unlink(missing_ok=True)
    if res.returncode not in (0, 3):  # 3: ran, but the verification failed
        tail = " | ".join(res.stderr.strip().splitlines()[-3:])
        raise BenchError(f"{case} {mib} MiB {' '.join(opts)}: exit {res.returncode}: {tail}")
    fields = dict(kv.split("=", 1) for kv in res.stdout.split() if "=" in kv)
    if res.stderr.strip():
        fields["stderr"] = " | ".join(res.stderr.strip().splitlines()[:3])
    return fields


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def cell(samples: list[float], fmt: str) -> str:
    """The median in bold, then each repetition in run order."""
    if not samples:
        return "–"
    each = " ".join(format(s, fmt) for s in samples)
    return f"**{format(statistics.median(samples), fmt)}** [{each}]"


def column(runs: list[Result], get: Callable[[Result], float | None]) -> list[float]:
    out = [get(r) for r in runs]
    return [v for v in out if v is not None]


def field(key: str, scale: float = 1.0) -> Callable[[Result], float | None]:
    return lambda r: float(r[key]) * scale if key in r else None


def timed(exe: Path, sizes: list[int], reps: int, image_dir: Path, prime: bool) -> None:
    runs: dict[tuple[int, str], list[Result]] = {}
    for mib in sizes:
        for rep in range(reps):
            k = rep % len(CASES)
            for case in CASES[k:] + CASES[:k]:
                print(f"  {mib} MiB rep {rep + 1}: {case}", file=sys.stderr, flush=True)
                runs.setdefault((mib, case), []).append(run_case(exe, case, mib, image_dir, prime))

    header = [
        "MiB",
        "case",
        "pause ms",
        "wall to durable s",
        "writer CPU s",
        "of it CRC CPU s",
        "CPU / dd",
        "CPU / direct",
        "program rate during / before",
        "program sys ms",
        "program faults",
        "writer faults",
        "WP faults",
    ]
    rows = []
    for mib in sizes:
        floor = {
            base: statistics.median(column(runs[(mib, base)], field("cpu_s")))
            for base in ("dd", "direct")
        }
        for case in CASES:
            rs = runs[(mib, case)]
            cpu = column(rs, field("cpu_s"))
            snap = case in SNAPSHOTS
            rows.append(
                [
                    str(mib),
                    case,
                    cell(column(rs, field("pause_ms")), ".2f"),
                    cell(column(rs, field("wall_s")), ".3f"),
                    cell(cpu, ".3f"),
                    cell(column(rs, field("crc_s")), ".3f"),
                    cell([c / floor["dd"] for c in cpu], ".2f") if floor["dd"] else "–",
                    cell([c / floor["direct"] for c in cpu], ".2f") if floor["direct"] else "–",
                    cell(
                        column(
                            rs,
                            lambda r: (
                                float(r["rate_during"]) / float(r["rate_before"])
                                if float(r.get("rate_before", 0))
                                else None
                            ),
                        ),
                        ".2f",
                    )
                    if snap
                    else "–",
                    cell(column(rs, field("prog_sys_ms")), ".0f"),
                    cell(column(rs, field("prog_minflt")), ".0f"),
                    cell(column(rs, field("minflt")), ".0f"),
                    cell(column(rs, field("faults")), ".0f"),
                ]
            )
    print(markdown_table(header, rows))
    print(
        "\npause: fork() in the parent / the UFFDIO_WRITEPROTECT of the whole range. wall: from"
        " just before the pause (dd, direct: the first pwrite) to fdatasync's return. writer"
        " CPU: dd, direct: the process; fork: the child (wait4); uffd: the process minus the"
        " program thread. program faults: its minor faults during the checkpoint (COW copies,"
        " WP faults). writer faults: the child's (one per page when GUP unshares pages for"
        " O_DIRECT). Program rate: writes per second with ~20 us of compute each."
    )
    print("\nother numbers, medians:")
    for (mib, case), rs in runs.items():
        extra = [
            f"{key} {statistics.median(column(rs, field(key))):g}"
            for key in (
                "rate_before",
                "rate_during",
                "stall_ms",
                "stall_max_us",
                "handler_ms",
                "reg_ms",
                "patched",
                "late",
                "dup",
                "user_s",
                "sys_s",
            )
            if column(rs, field(key))
        ]
        print(f"- {mib} MiB {case}: {', '.join(extra)}")


def verify(exe: Path, sizes: list[int], image_dir: Path, prime: bool) -> int:
    rows = []
    bad = 0
    variants = [(case, ["verify"]) for case in CASES]
    variants += [(case, ["verify", "kwrite"]) for case in sorted(UFFD)]
    variants += [(case, ["verify", "kwrite", "umo"]) for case in sorted(UFFD)]
    for mib in sizes:
        for case, opts in variants:
            r = run_case(exe, case, mib, image_dir, prime, *opts)
            ok = r.get("verify") == "ok" and r.get("crc_check", "ok") == "ok"
            bad += not ok
            rows.append(
                [
                    str(mib),
                    case,
                    " ".join(opts[1:]) or "–",
                    r.get("verify", "?"),
                    r.get("crc_check", "–"),
                    r.get("faults", "–"),
                    r.get("kwrite_errors", "–"),
                    r.get("stderr", ""),
                ]
            )
    header = [
        "MiB",
        "case",
        "options",
        "file = snapshot",
        "CRC",
        "WP faults",
        "pread EFAULT",
        "stderr",
    ]
    print(markdown_table(header, rows))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="256,2048", help="MiB, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp", help="where the image files go (a real disk)")
    ap.add_argument("--verify", action="store_true", help="check the images instead of timing")
    ap.add_argument("--no-prime", action="store_true", help="no prefault_and_free before runs")
    ap.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated; dd and direct always run"
    )
    opts = ap.parse_args()
    chosen = [c for c in opts.cases.split(",") if c]
    if not set(chosen) <= set(CASES):
        print(f"snapshot_floor.py: --cases takes {', '.join(CASES)}", file=sys.stderr)
        return 2
    CASES[:] = [c for c in CASES if c in {"dd", "direct", *chosen}]
    try:
        sizes = [int(s) for s in opts.sizes.split(",") if s]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1 or opts.reps < 1:
        print("snapshot_floor.py: --sizes needs MiB >= 1 and --reps >= 1", file=sys.stderr)
        return 2
    image_dir = Path(opts.dir)
    print(run_header(1 if opts.verify else opts.reps))
    print(f"start: {uptime()}\n")
    with tempfile.TemporaryDirectory(prefix="crac-snapshot-") as tmp:
        exe = build(Path(tmp))
        rc = verify(exe, sizes, image_dir, not opts.no_prime) if opts.verify else 0
        if not opts.verify:
            timed(exe, sizes, opts.reps, image_dir, not opts.no_prime)
    print(f"\nend: {uptime()}")
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/snapshot_floor.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
