"""Lazy restart: time to the first tick after `crac restart` vs `crac restart --lazy`, and time
until all memory is back (the userfaultfd closed) vs a plain read of the image, and vs the same
read into fresh memory (the floor under any restart: "What fresh memory costs on this VM").

    python bench/lazy.py [--mib 2048] [-n 3] [--cold] [--json]

Builds bench/apps/lazy_tick.c (MIB MiB of data, then a tick number written to a file every
10 ms), checkpoints it once, then restarts that image N times in each mode, interleaved with
`cat upper.core > /dev/null` and bench/apps/fill_floor.c's `small` (MADV_POPULATE_WRITE of fresh
4 KiB pages, then pread of the image into them), and prints medians side by side. Each restart
is SIGKILLed once measured. Warm page cache by default; --cold drops the caches before each timed
step (root).
Never asserts on time (docs/ARCHITECTURE.md "Testing").
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

from _common import (
    CFLAGS,
    REPO,
    BenchError,
    build_program,
    command_line,
    crac_cmd,
    drop_caches,
    markdown_table,
    missing_loader_message,
)
from fill_floor import run_mode

APP_SRC = REPO / "bench" / "apps" / "lazy_tick.c"
TIMEOUT = 600.0


def read_tick(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def wait(cond, what: str, timeout: float = TIMEOUT) -> float:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        time.sleep(0.002)
    return time.monotonic()


def uffd_open(pid: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    for fd in fds:
        try:
            if "userfaultfd" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                return True
        except OSError:
            pass
    return False


def make_image(app: Path, mib: int, work: Path) -> tuple[Path, Path, Path]:
    """(ckptdir, tick file, upper.core) of one checkpoint of the app, which is then killed."""
    ckptdir, tick = work / "ckpt", work / "tick"
    cmd = [*crac_cmd(), "launch", "-c", str(ckptdir), "--", str(app), str(mib), str(tick)]
    proc = subprocess.Popen(cmd, cwd=work)
    try:
        wait(lambda: read_tick(tick) >= 2, "the first ticks")
        proc.send_signal(signal.SIGUSR2)
        wait(lambda: any(ckptdir.glob("*/gen-000001/MANIFEST.json")), "the checkpoint")
    finally:
        proc.kill()
        proc.wait()
    core = next(ckptdir.glob("*/gen-000001/upper.core"))
    return ckptdir, tick, core


def restart_once(ckptdir: Path, tick: Path, lazy: bool, cold: bool) -> tuple[float, float]:
    """(seconds to the first tick, seconds until all memory is back) of one restart."""
    tick.write_text("0\n")
    before = 0
    if cold:
        drop_caches()
    cmd = [*crac_cmd(), "restart", str(ckptdir), *(["--lazy"] if lazy else [])]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        first = wait(lambda: read_tick(tick) > before or proc.poll() is not None, "a tick")
        if proc.poll() is not None:
            raise BenchError(f"{' '.join(cmd)} ended with status {proc.returncode}")
        full = wait(lambda: not uffd_open(proc.pid), "the prefetcher") if lazy else first
    finally:
        proc.kill()
        proc.wait()
    return first - t0, full - t0


def cat_once(core: Path, cold: bool) -> float:
    if cold:
        drop_caches()
    t0 = time.monotonic()
    with open(os.devnull, "wb") as null:
        subprocess.run(["cat", str(core)], stdout=null, check=True, timeout=TIMEOUT)
    return time.monotonic() - t0


def fresh_read_once(fill_floor: Path, core: Path, cold: bool) -> float:
    """upper.core read into fresh anonymous memory, fill_floor's own timing of its `small` mode."""
    if cold:
        drop_caches()
    return run_mode(fill_floor, core, "small")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=2048, help="the program's data (default 2048)")
    ap.add_argument("-n", "--reps", type=int, default=3, help="restarts per mode")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each step")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        raise BenchError(missing)
    if opts.cold and not drop_caches():
        raise BenchError("--cold needs to write /proc/sys/vm/drop_caches (root)")
    with tempfile.TemporaryDirectory(prefix="crac-lazy-bench-") as tmp:
        work = Path(tmp)
        app = work / "lazy_tick"
        cc = subprocess.run(["gcc", *CFLAGS, "-o", str(app), str(APP_SRC)], capture_output=True)
        if cc.returncode != 0:
            raise BenchError(f"cannot build {APP_SRC}: {cc.stderr.decode()}")
        fill_floor = build_program(REPO / "bench" / "apps" / "fill_floor.c", work)
        ckptdir, tick, core = make_image(app, opts.mib, work)
        eager: list[tuple[float, float]] = []
        lazy: list[tuple[float, float]] = []
        cat: list[float] = []
        fresh: list[float] = []
        for _ in range(opts.reps):  # interleaved: the machine's load hits every mode alike
            eager.append(restart_once(ckptdir, tick, False, opts.cold))
            lazy.append(restart_once(ckptdir, tick, True, opts.cold))
            cat.append(cat_once(core, opts.cold))
            fresh.append(fresh_read_once(fill_floor, core, opts.cold))
        size = core.stat().st_size

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    res = {
        "command": command_line(),
        "mib": opts.mib,
        "core_bytes": size,
        "cache": "cold" if opts.cold else "warm",
        "eager_first_tick_s": med([e[0] for e in eager]),
        "lazy_first_tick_s": med([e[0] for e in lazy]),
        "lazy_all_memory_s": med([e[1] for e in lazy]),
        "cat_upper_core_s": med(cat),
        "read_into_fresh_memory_s": med(fresh),
    }
    if opts.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{res['command']}  ({opts.mib} MiB, upper.core {size >> 20} MiB, {res['cache']} cache)")
    rows = [
        ["crac restart: first tick", f"{res['eager_first_tick_s']:.3f}", "1.00"],
        [
            "crac restart --lazy: first tick",
            f"{res['lazy_first_tick_s']:.3f}",
            f"{res['lazy_first_tick_s'] / res['eager_first_tick_s']:.2f}",
        ],
        ["crac restart --lazy: all memory back", f"{res['lazy_all_memory_s']:.3f}", ""],
        [
            "cat upper.core > /dev/null",
            f"{res['cat_upper_core_s']:.3f}",
            f"all memory / cat = {res['lazy_all_memory_s'] / res['cat_upper_core_s']:.2f}",
        ],
        [
            "upper.core read into fresh memory",
            f"{res['read_into_fresh_memory_s']:.3f}",
            f"all memory / this = {res['lazy_all_memory_s'] / res['read_into_fresh_memory_s']:.2f}",
        ],
    ]
    print(markdown_table(["step", "median s", "ratio"], rows))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"crac: error: {exc}", file=sys.stderr)
        sys.exit(1)
