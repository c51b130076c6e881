"""--incremental against full images, side by side: checkpoint time and bytes when PERCENT % of
SIZE MiB was written since the last checkpoint, and restart from the chain against restart from
a full image.

    nice python bench/incremental.py [--size 256] [--percent 5] [--rounds 4] [--dir /var/tmp]
                                     [--json]

Builds bench/apps/incr_dirty.c (SIZE MiB of random bytes; each SIGUSR1 rewrites PERCENT % of its
pages, picked at random). Two programs, one `crac launch --incremental --full-every 100` and one
plain `crac launch`, each checkpointed once (full in both), then ROUNDS times, alternating
between the two: SIGUSR1, wait for "dirtied", SIGUSR2, timed until the new generation's
MANIFEST.json exists (the durable checkpoint), and upper.core's allocated bytes. Then both are
SIGKILLed and restarted from their newest generation (the incremental one from a chain of
1 + ROUNDS generations), timed from `crac restart` to the restarted program's first tick (all
its memory is back by then; Python's start-up is in both alike), ROUNDS times alternating.

Prints medians and the ratios; never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import shutil
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
    run_header,
    timed_restart,
    wait_line,
)

APP_SRC = REPO / "bench" / "apps" / "incr_dirty.c"
MIB = 1 << 20
TIMEOUT = 600.0


class Run:
    """One launched program and its checkpoint directory."""

    def __init__(self, app: Path, ckdir: Path, size: int, percent: int, opts: list[str]) -> None:
        self.ckdir = ckdir
        ckdir.mkdir()
        argv = [*crac_cmd(), "launch", *opts, "-c", str(ckdir), "--", str(app)]
        self.p = subprocess.Popen(
            [*argv, str(size), str(percent)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=clean_env(),
        )  # fmt: skip
        wait_line(self.p, b"tick 2")
        self.gens = 0

    def checkpoint(self) -> dict:
        t0 = time.perf_counter()
        self.p.send_signal(signal.SIGUSR2)
        self.gens += 1
        want = f"gen-{self.gens:06d}"
        deadline = time.monotonic() + TIMEOUT
        while True:
            procdir = next(iter(self.ckdir.glob("ckpt_*")), None)
            if procdir is not None and (procdir / want / "MANIFEST.json").exists():
                break
            if time.monotonic() > deadline or self.p.poll() is not None:
                raise BenchError(f"{want} never appeared in {self.ckdir}")
            time.sleep(0.002)
        seconds = time.perf_counter() - t0
        core = procdir / want / "upper.core"
        return {"ckpt_s": seconds, "bytes": core.stat().st_blocks * 512}

    def dirty(self, n: int) -> None:
        self.p.send_signal(signal.SIGUSR1)
        wait_line(self.p, f"dirtied {n}".encode())

    def kill(self) -> None:
        self.p.kill()
        self.p.wait(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--percent", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    res: dict = {"full": [], "incremental": [], "first": {}, "restart": {"full": [], "chain": []}}
    try:
        with tempfile.TemporaryDirectory(prefix="crac-incr-", dir=opts.dir) as tmp:
            work = Path(tmp)
            app = build_program(APP_SRC, work)
            incr_opts = ["--incremental", "--full-every", "100"]
            inc = Run(app, work / "inc", opts.size, opts.percent, incr_opts)
            full = Run(app, work / "full", opts.size, opts.percent, [])
            try:
                res["first"] = {"incremental": inc.checkpoint(), "full": full.checkpoint()}
                for n in range(1, opts.rounds + 1):
                    for run, key in ((inc, "incremental"), (full, "full")):
                        run.dirty(n)
                        res[key].append(run.checkpoint())
            finally:
                inc.kill()
                full.kill()
            for _ in range(opts.rounds):
                res["restart"]["chain"].append(timed_restart(inc.ckdir, "the chain"))
                res["restart"]["full"].append(timed_restart(full.ckdir, "the full image"))
            shutil.rmtree(work / "inc", ignore_errors=True)
            shutil.rmtree(work / "full", ignore_errors=True)
    except BenchError as exc:
        print(f"incremental.py: {exc}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps(res, indent=1))
        return 0
    print(run_header(opts.rounds))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    f_s, i_s = med(res["full"], "ckpt_s"), med(res["incremental"], "ckpt_s")
    f_b, i_b = med(res["full"], "bytes"), med(res["incremental"], "bytes")
    r_f, r_c = statistics.median(res["restart"]["full"]), statistics.median(res["restart"]["chain"])
    rows = [
        ["checkpoint after a round (s)", f"{f_s:.3f}", f"{i_s:.3f}", f"{i_s / f_s:.3f}"],
        ["image (MiB on disk)", f"{f_b / MIB:.1f}", f"{i_b / MIB:.1f}", f"{i_b / f_b:.3f}"],
        [f"restart (s; chain of {1 + opts.rounds})", f"{r_f:.3f}", f"{r_c:.3f}",
         f"{r_c / r_f:.3f}"],
        ["first checkpoint, both full (s)", f"{res['first']['full']['ckpt_s']:.3f}",
         f"{res['first']['incremental']['ckpt_s']:.3f}", ""],
    ]  # fmt: skip
    print(f"{opts.size} MiB, {opts.percent} % of the pages written between checkpoints\n")
    print(markdown_table(["", "full", "incremental", "incremental / full"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
