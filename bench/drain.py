"""Drain time of a connection between two processes of a tree: the checkpoint of a parent and its
forked child joined by a Unix socketpair with BYTES queued in it (the parent never reads) vs. the
same two with an empty one.

    python bench/drain.py [--bytes 1048576] [--reps 5] [--dir /var/tmp] [--json]

Builds bench/apps/share_drain.c; for each repetition, interleaved, launches it (`crac launch`,
CRAC_TIMING=1) with BYTES and with 0, waits until both processes say `ready` (the bytes queued),
sends SIGUSR2 to the root (the tree's coordinator checkpoints both at one moment) and takes the
larger of the two processes' pauses from crac's timing lines and the wall time from the signal
to the coordinator's restart script. Reports medians and the difference. Every wait has a
timeout; never asserts on time (docs/ARCHITECTURE.md "Testing").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import CFLAGS, REPO, BenchError, command_line, crac_cmd, markdown_table

TIMEOUT = 120.0
TIMING_RE = re.compile(r"crac: timing: generation (\d+): .* pause ([\d.]+) ms, .*")
READY_RE = re.compile(r"(parent|child) ready (\d+)")


class Run:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.out: list[str] = []
        self.err: list[str] = []
        for name, stream in (("out", self.p.stdout), ("err", self.p.stderr)):
            threading.Thread(
                target=self._pump, args=(getattr(self, name), stream), daemon=True
            ).start()

    @staticmethod
    def _pump(into: list[str], stream) -> None:
        for raw in stream:
            into.append(raw.decode(errors="replace").rstrip("\n"))

    def wait(self, pred, what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not pred():
            if self.p.poll() is not None:
                raise BenchError(
                    f"the program ended ({self.p.returncode}) before {what}: {self.err[-5:]}"
                )
            if time.monotonic() > deadline:
                raise BenchError(f"timed out waiting for {what}")
            time.sleep(0.005)


def kill_tree(ckpt: Path, run: Run) -> None:
    for d in ckpt.glob("ckpt_*"):
        try:
            os.kill(int(d.name.rsplit("-", 1)[1]), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass
    run.p.kill()
    run.p.wait(timeout=TIMEOUT)


def one(crac: list[str], app: Path, nbytes: int, base: Path) -> dict:
    ckpt = Path(tempfile.mkdtemp(prefix="drain-", dir=base))
    env = dict(os.environ, CRAC_TIMING="1")
    run = Run([*crac, "launch", "-c", str(ckpt), "--", str(app), str(nbytes)], env)
    try:
        run.wait(lambda: sum(bool(READY_RE.match(x)) for x in run.out) >= 2, "both processes ready")
        queued = max(int(m.group(2)) for x in run.out if (m := READY_RE.match(x)))
        script = ckpt / "crac_restart_script.sh"
        t0 = time.monotonic()
        os.kill(run.p.pid, signal.SIGUSR2)
        run.wait(script.exists, "the restart script")
        wall = time.monotonic() - t0
        run.wait(lambda: sum(bool(TIMING_RE.match(x)) for x in run.err) >= 2, "two timing lines")
        pauses = [float(m.group(2)) for x in run.err if (m := TIMING_RE.match(x))]
        saved = sum(f.stat().st_size for f in ckpt.glob("ckpt_*/gen-*/files/sockq-*"))
        return {
            "bytes": nbytes,
            "queued": queued,
            "saved": saved,
            "pause_ms": max(pauses),
            "wall_ms": wall * 1000,
        }
    finally:
        kill_tree(ckpt, run)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        build = Path(tempfile.mkdtemp(prefix="drain-build-"))
        app = build / "share_drain"
        cmd = ["gcc", *CFLAGS, "-o", str(app), str(REPO / "bench" / "apps" / "share_drain.c")]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            raise BenchError(f"cannot build {app.name}: {' '.join(cmd)}")
        crac = crac_cmd()
        results: dict[int, list[dict]] = {args.bytes: [], 0: []}
        for _ in range(args.reps):
            for n in (args.bytes, 0):
                results[n].append(one(crac, app, n, Path(args.dir)))
    except BenchError as exc:
        print(f"drain: {exc}", file=sys.stderr)
        return 1
    rows, summary = [], {}
    for n, rs in results.items():
        med = {
            k: statistics.median(r[k] for r in rs)
            for k in ("queued", "saved", "pause_ms", "wall_ms")
        }
        summary[n] = med
        rows.append(
            [
                str(n),
                f"{med['queued']:.0f}",
                f"{med['saved']:.0f}",
                f"{med['pause_ms']:.1f}",
                f"{med['wall_ms']:.1f}",
            ]
        )
    if args.json:
        print(json.dumps({"command": command_line(), "results": results, "medians": summary}))
        return 0
    print(f"command: {command_line()}  ({args.reps} reps, medians)")
    print(
        markdown_table(
            ["bytes sent", "queued", "saved", "pause ms (max of 2)", "signal to restart script ms"],
            rows,
        )
    )
    full, empty = summary[args.bytes], summary[0]
    print(
        f"drain cost: pause +{full['pause_ms'] - empty['pause_ms']:.1f} ms, "
        f"checkpoint +{full['wall_ms'] - empty['wall_ms']:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
