"""The pause a checkpoint costs for the descriptors whose contents it saves (files/ of the image):
written files and eventfds, against the same program holding none, side by side in one run.

    python bench/pause_files.py [--files 10] [--kib 100] [--eventfds 20] [--reps 7]
                                [--ckpt-open-files] [--dir /var/tmp] [--crac CMD] [--json]

Builds bench/apps/fd_holder.c and launches it twice under crac (CRAC_TIMING=1), each in a fresh
directory under DIR: holding nothing, and holding FILES written files of KIB KiB plus EVENTFDS
eventfds. REPS checkpoints of each, interleaved (SIGUSR2, then wait for the generation's
MANIFEST.json); the pause is crac's timing line's. Reports the medians (each repetition too), the
pause with the descriptors less the pause without, and that per descriptor, beside the time a
plain copy of the same files takes (read and written once, in the same directory, each
repetition). --ckpt-open-files launches the holder of files with it (files over the 64 MiB a
checkpoint copies by default). --crac CMD runs another build's `crac` (a before/after
comparison). Never asserts on time; a failure prints a clear message and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import REPO, BenchError, build_program, clean_env, crac_cmd, run_header

APP_SRC = REPO / "bench" / "apps" / "fd_holder.c"
TIMING_RE = re.compile(r"crac: timing: generation (\d+): .* pause ([\d.]+) ms")
TIMEOUT = 120.0


class Holder:
    """One launched fd_holder; its stderr's timing lines collected as they come."""

    def __init__(
        self,
        crac: list[str],
        exe: Path,
        work: Path,
        counts: tuple[int, int, int],
        opts: list[str],
    ):
        files, kib, events = counts
        self.ckdir = work / "ckpt"
        env = clean_env() | {"CRAC_TIMING": "1"}
        argv = [*crac, "launch", "-c", str(self.ckdir), *opts, "--", str(exe), str(work)]
        argv += [str(files), str(kib), str(events)]
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.pauses: dict[int, float] = {}
        self.err: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if line.strip() != b"ready":
            self.stop()
            raise BenchError(f"fd_holder did not start: {' | '.join(self.err[-3:])}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.p.stdout is not None
        for _ in self.p.stdout:
            pass

    def _pump(self) -> None:
        assert self.p.stderr is not None
        for raw in self.p.stderr:
            text = raw.decode(errors="replace").rstrip()
            with self.cond:
                self.err.append(text)
                m = TIMING_RE.match(text)
                if m:
                    self.pauses[int(m[1])] = float(m[2])
                self.cond.notify_all()

    def checkpoint(self, generation: int) -> float:
        os.kill(self.p.pid, signal.SIGUSR2)
        deadline = time.monotonic() + TIMEOUT
        with self.cond:
            while generation not in self.pauses:
                if self.p.poll() is not None or time.monotonic() > deadline:
                    raise BenchError(f"checkpoint {generation}: {' | '.join(self.err[-3:])}")
                self.cond.wait(0.1)
        # published: the next checkpoint does not overlap this one's commit
        while not any(self.ckdir.glob(f"*/gen-{generation:06d}/MANIFEST.json")):
            if time.monotonic() > deadline:
                raise BenchError(f"generation {generation} was not published")
            time.sleep(0.01)
        return self.pauses[generation]

    def stop(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait(timeout=60)


def plain_copy(work: Path) -> float:
    """ms to copy the holder's written files once (fresh copies beside them)."""
    for old in work.glob("copy-*"):
        old.unlink()
    t0 = time.perf_counter()
    for f in sorted(work.glob("written-*")):
        shutil.copyfile(f, work / f"copy-{f.name}")
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--kib", type=int, default=100)
    ap.add_argument("--eventfds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--ckpt-open-files", action="store_true")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--crac", help="another build's crac command")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    crac = a.crac.split() if a.crac else crac_cmd()
    with tempfile.TemporaryDirectory(dir=a.dir, prefix="crac-pause-files-") as tmp:
        root = Path(tmp)
        exe = build_program(APP_SRC, root)
        cases = {"none": (0, 0, 0), "saved": (a.files, a.kib, a.eventfds)}
        holders = {}
        opts = ["--ckpt-open-files"] if a.ckpt_open_files else []
        try:
            for name, counts in cases.items():
                (root / name).mkdir()
                holders[name] = Holder(crac, exe, root / name, counts, opts if counts[0] else [])
            samples: dict[str, list[float]] = {name: [] for name in [*cases, "copy"]}
            for rep in range(1, a.reps + 1):
                for name, h in holders.items():
                    samples[name].append(h.checkpoint(rep))
                samples["copy"].append(plain_copy(root / "saved"))
        finally:
            for h in holders.values():
                h.stop()
    med = {name: statistics.median(s) for name, s in samples.items()}
    n = a.files + a.eventfds
    extra = med["saved"] - med["none"]
    result = {"samples_ms": samples, "median_ms": med, "extra_ms": extra, "per_fd_ms": extra / n}
    if a.json:
        print(json.dumps(result, indent=2))
        return 0
    print(run_header(a.reps))
    print("| program holds | pause, median (ms) | each repetition (ms) |\n|---|---|---|")
    for name, (files, kib, events) in cases.items():
        what = f"{files} written files of {kib} KiB, {events} eventfds"
        what += " (--ckpt-open-files)" if a.ckpt_open_files else ""
        if name == "none":
            what = "nothing"
        each = " ".join(f"{v:.2f}" for v in samples[name])
        print(f"| {what} | {med[name]:.2f} | {each} |")
    each = " ".join(f"{v:.2f}" for v in samples["copy"])
    print(f"| (a plain copy of the same files, no crac) | {med['copy']:.2f} | {each} |")
    per_fd_us = extra / n * 1000
    print(f"\nthe saved descriptors add {extra:.2f} ms to the pause, {per_fd_us:.0f} us each")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"pause_files: {e}", file=sys.stderr)
        sys.exit(1)
