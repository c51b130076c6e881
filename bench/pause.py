"""The program's pause and the durable checkpoint vs `dd` + fsync of the same bytes.

    python bench/pause.py [--sizes 256,2048] [--threads 1,8] [--reps 3] [--dir /var/tmp]
                          [--work-us 20] [--crac CMD] [--no-fork-writer] [--hog] [--json]

Builds bench/apps/worker.c (gcc -O2): it fills SIZE MiB with pseudo-random data, then THREADS
threads work forever (about WORK_US us of computing, then one store into the next page of their
share of the buffer, a unit) and the main thread prints the units done every 20 ms. For each size
and thread count, one program is launched (`crac launch`, CRAC_TIMING=1) in a fresh directory
under DIR (default /var/tmp: a real disk, not /dev/shm) and, REPS times, interleaved:

1. dd: `dd if=SRC of=OUT bs=8M conv=fsync` (SRC: SIZE MiB of random bytes made once per size,
   read from the page cache), timed to its end; its CPU time (user+system) from getrusage;
2. the program's normal tick rate over the second before the checkpoint;
3. checkpoint: SIGUSR2, timed until the new generation's `latest/MANIFEST.json` exists (crac
   publishes only what is on disk); the pause is crac's timing line's; the checkpoint's CPU time
   is the process's CPU (its ended threads and reaped children, the forked writer, included) less
   that of the program's workers (told apart by their CPU in step 2); the tick rate from the end
   of the pause to the publish, against step 2's.

Reports medians: pause, pause / dd time (target <= 5 %), durable / dd (target <= 1.1), CPU of
the checkpoint and of dd, tick rate during the write / normal (target >= 0.9). --crac CMD runs
another build's `crac` (e.g. /work/main/.venv/bin/crac) for a before/after comparison. --hog runs
a CPU hog beside (`yes > /dev/null`, one per CPU, each in a session of its own as other programs
would be, not in the session of dd and of this script) for each case, dd's runs
included. Every wait
has a timeout; a failure prints a clear message and exits 1. Never asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import CFLAGS, REPO, BenchError, Hog, command_line, crac_cmd, markdown_table

APP_SRC = REPO / "bench" / "apps" / "worker.c"
MIB = 1 << 20
TIMEOUT = 300.0
TIMING_RE = re.compile(r"crac: timing: generation (\d+): .* pause ([\d.]+) ms, .*")
TICK_RE = re.compile(r"^tick (\d+)$")
CLK = os.sysconf("SC_CLK_TCK")


class Program:
    """`crac launch` of the worker; stdout ticks and stderr lines collected with arrival times."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.cond = threading.Condition()
        self.ticks: list[tuple[float, int]] = []
        self.err: list[str] = []
        self.ready = False
        for name, stream in (("out", self.p.stdout), ("err", self.p.stderr)):
            threading.Thread(target=self._pump, args=(name, stream), daemon=True).start()

    def _pump(self, name: str, stream) -> None:
        for raw in stream:
            t = time.perf_counter()
            line = raw.decode(errors="replace").rstrip("\n")
            with self.cond:
                if name == "err":
                    self.err.append(line)
                elif line.startswith("ready"):
                    self.ready = True
                elif m := TICK_RE.match(line):
                    self.ticks.append((t, int(m.group(1))))
                self.cond.notify_all()

    def wait(self, pred, what: str, timeout: float = TIMEOUT) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: pred() or self.p.poll() is not None, timeout):
                raise BenchError(f"timed out waiting for {what}")
        if self.p.poll() is not None and not pred():
            raise BenchError(f"the program ended ({self.p.returncode}): {self.err[-5:]}")

    def rate(self, t0: float, t1: float) -> float:
        """Units per second between the tick lines nearest t0 and t1."""
        with self.cond:
            inside = [(t, n) for t, n in self.ticks if t0 <= t <= t1]
        if len(inside) < 2:
            return float("nan")
        (ta, na), (tb, nb) = inside[0], inside[-1]
        return (nb - na) / (tb - ta) if tb > ta else float("nan")

    def kill(self) -> None:
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait(timeout=TIMEOUT)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user+system) of each thread of PID."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(f[11]) + int(f[12])) / CLK
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds of PID: every thread's, those that ended included, and its reaped children's
    (the forked writer)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / CLK


def make_source(path: Path, mib: int) -> None:
    with path.open("wb") as fh:
        for _ in range(mib // 8):
            fh.write(os.urandom(8 * MIB))
        fh.flush()
        os.fsync(fh.fileno())


def run_dd(src: Path, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        ["dd", f"if={src}", f"of={out}", "bs=8M", "conv=fsync", "status=none"],
        check=True,
        timeout=TIMEOUT,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.unlink()
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def latest_manifest(images: Path, generation: int) -> bool:
    return any(
        p.resolve().name == f"gen-{generation:06d}"
        for p in images.glob("ckpt_*/latest")
        if (p / "MANIFEST.json").is_file()
    )


def one_case(args, crac: list[str], app: Path, src: Path, mib: int, threads: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="crac-pause-", dir=args.dir))
    images = work / "images"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CRAC_", "DMTCP_"))}
    env["CRAC_TIMING"] = "1"
    opts = ["--no-fork-writer"] if args.no_fork_writer else []
    argv = [*crac, "launch", "-c", str(images), *opts, "--", str(app), str(mib), str(threads),
            str(args.work_us)]  # fmt: skip
    prog = Program(argv, env)
    reps = []
    try:
        prog.wait(lambda: prog.ready and len(prog.ticks) > 5, "the program to start")
        for rep in range(1, args.reps + 1):
            dd_s, dd_cpu = run_dd(src, work / "dd.out")
            # The normal rate, and which threads are the program's workers.
            cpu0 = thread_cpu(prog.p.pid)
            t0 = time.perf_counter()
            time.sleep(1.0)
            t1 = time.perf_counter()
            cpu1 = thread_cpu(prog.p.pid)
            # Lower-half threads idle between checkpoints; the workers never do.
            workers = {t for t in cpu1 if cpu1[t] - cpu0.get(t, 0.0) > 0.02 * (t1 - t0)}
            normal = prog.rate(t0, t1)
            base = thread_cpu(prog.p.pid)
            base_total = process_cpu(prog.p.pid)
            n_err = len(prog.err)
            start = time.perf_counter()
            os.kill(prog.p.pid, signal.SIGUSR2)
            deadline = start + TIMEOUT
            while not latest_manifest(images, rep):
                if time.perf_counter() > deadline or prog.p.poll() is not None:
                    raise BenchError(f"checkpoint {rep} did not complete: {prog.err[-5:]}")
                time.sleep(0.001)
            durable = time.perf_counter() - start
            end_cpu = thread_cpu(prog.p.pid)
            ckpt_cpu = (process_cpu(prog.p.pid) - base_total) - sum(
                end_cpu[t] - base.get(t, 0.0) for t in workers if t in end_cpu
            )
            prog.wait(lambda: any(TIMING_RE.match(x) for x in prog.err[n_err:]), "the timing line")
            m = next(m for x in prog.err[n_err:] if (m := TIMING_RE.match(x)))
            pause = float(m.group(2)) / 1e3
            during = prog.rate(start + pause, start + durable)
            reps.append(
                {"dd_s": dd_s, "dd_cpu_s": dd_cpu, "durable_s": durable, "pause_s": pause,
                 "ckpt_cpu_s": ckpt_cpu, "rate_normal": normal, "rate_during": during}
            )  # fmt: skip
            time.sleep(0.5)
    finally:
        prog.kill()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
    med["rate_ratio"] = statistics.median(r["rate_during"] / r["rate_normal"] for r in reps)
    return {"size_mib": mib, "threads": threads, "reps": reps, "median": med}


def build_app(out: Path) -> Path:
    exe = out / "worker"
    cmd = ["gcc", *CFLAGS, "-o", str(exe), str(APP_SRC)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise BenchError(f"cannot build {APP_SRC}: {res.stderr}")
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,2048")
    ap.add_argument("--threads", default="1,8")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--work-us", type=int, default=20)
    ap.add_argument("--crac", default=None, help="the crac command to measure (default: this one)")
    ap.add_argument("--no-fork-writer", action="store_true")
    ap.add_argument("--hog", action="store_true", help="a CPU hog beside: `yes` per CPU")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    crac = shlex.split(args.crac) if args.crac else crac_cmd()
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="crac-pause-app-") as tmp:
            app = build_app(Path(tmp))
            for mib in [int(s) for s in args.sizes.split(",")]:
                src = Path(tempfile.mkdtemp(prefix="crac-pause-src-", dir=args.dir)) / "src"
                try:
                    make_source(src, mib)
                    for threads in [int(t) for t in args.threads.split(",")]:
                        with Hog(args.hog):
                            results.append(one_case(args, crac, app, src, mib, threads))
                finally:
                    shutil.rmtree(src.parent, ignore_errors=True)
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        print(f"bench/pause.py: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    rows = []
    for r in results:
        m = r["median"]
        rows.append([
            f"{r['size_mib']} MiB, {r['threads']} thr" + (", hog" if args.hog else ""),
            f"{m['pause_s'] * 1e3:.0f} ms",
            f"{m['pause_s'] / m['dd_s'] * 100:.1f} %",
            f"{m['durable_s']:.2f} s",
            f"{m['dd_s']:.2f} s",
            f"{m['durable_s'] / m['dd_s']:.2f}",
            f"{m['ckpt_cpu_s']:.2f} s",
            f"{m['dd_cpu_s']:.2f} s",
            f"{m['rate_ratio']:.2f}",
        ])  # fmt: skip
    print(f"command: {command_line()}  (crac: {shlex.join(crac)})")
    print(f"load average before: {os.getloadavg()}, {platform.node()}, {os.cpu_count()} CPUs")
    print(
        markdown_table(
            ["case", "pause", "pause/dd", "durable ckpt", "dd+fsync", "durable/dd",
             "ckpt CPU", "dd CPU", "ticks during/normal"],
            rows,
        )
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
