"""MPI under crac: ping-pong latency and bandwidth, an allreduce loop, natively vs under crac, and
the checkpoint of a 4-rank job vs 4 independent processes of the same size.

    python bench/mpi.py [-n 5] [-r RANKS_FOR_ALLREDUCE] [--ckpt-mib 64] [--ckpt-reps 5] [--json]

Needs Open MPI (`mpicc`, `mpirun`; `apt-get install openmpi-bin libopenmpi-dev`) and crac's
MPI shim. Each case runs `mpirun -np N ./mpi_pingpong ...` (native) and `mpirun -np N crac launch
./mpi_pingpong ...` (crac) alternately, N repetitions each after one warm-up; the program times
its own loop (MPI_Wtime, after an in-program warm-up) so launch costs are left out; each run
reports 3 timed rounds and its median round is kept; medians over the repetitions are reported
with the ratio crac/native.

The checkpoint part starts a 4-rank job (`mpirun -np 4 crac launch` of bench/apps/mpi_mem.c, an
MPI_Allreduce every 10 ms, CKPT_MIB MiB of random data per rank) under its own coordinator, and
4 independent `crac launch --no-coordinator` processes of the same program built without MPI,
side by side; each repetition checkpoints the job (a blocking checkpoint on the coordinator's
socket, until every image is written) and then the 4 processes (SIGUSR2 to each, until each
`latest` names a new complete generation), interleaved. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BenchError, command_line, crac_cmd, markdown_table, missing_loader_message
from coord import free_port, latest_gens, request, wait_for

HERE = Path(__file__).resolve().parent
TIMEOUT = 300.0
ROUNDS = 3  # timed rounds inside each run
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

# (label, mode, bytes, iterations, ranks, unit): the unit is what the program prints first.
CASES = [
    ("ping-pong 8 B latency", "pingpong", 8, 20000, 2, "us"),
    ("ping-pong 1 MiB bandwidth", "pingpong", 1 << 20, 200, 2, "MiB/s"),
    ("allreduce 8 doubles", "allreduce", 64, 10000, 2, "us"),
    ("allreduce 1 MiB", "allreduce", 1 << 20, 50, 2, "us"),
]


def _env() -> dict[str, str]:
    prefixes = ("CRAC_COORD", "DMTCP_COORD", "CRAC_CHECKPOINT", "DMTCP_CHECKPOINT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(MPI_ENV)
    return env


def tools() -> tuple[str, str]:
    mpicc = shutil.which("mpicc.openmpi") or shutil.which("mpicc")
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if not mpicc or not mpirun:
        raise BenchError("Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    return mpicc, mpirun


def build(cc: str, src: str, out: Path, *flags: str) -> Path:
    cmd = [cc, "-O2", "-Wall", "-Wextra", "-Werror", *flags, "-o", str(out), str(HERE / src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise BenchError(f"cannot build {src}: {' '.join(cmd)}\n{res.stderr}")
    return out


def mpirun_cmd(mpirun: str, n: int) -> list[str]:
    return [mpirun, "-np", str(n), "--oversubscribe", "--bind-to", "none"]


def one_run(argv: list[str], unit: str, cwd: Path) -> float:
    """The median of the program's timed rounds: microseconds, or MiB/s for bandwidth."""
    res = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=cwd, timeout=TIMEOUT)
    if res.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed ({res.returncode}):\n{res.stderr[-1500:]}")
    vals = []
    for line in res.stdout.splitlines():
        # "pingpong 8 B: 4.1 us one-way, 1.8 MiB/s" / "allreduce 64 B: 10.8 us per call"
        words = line.replace(",", "").split()
        if unit == "MiB/s" and "MiB/s" in words:
            vals.append(float(words[words.index("MiB/s") - 1]))
        elif unit == "us" and "us" in words:
            vals.append(float(words[words.index("us") - 1]))
    if len(vals) != ROUNDS:
        raise BenchError(f"unexpected output of {' '.join(argv)}:\n{res.stdout}")
    return statistics.median(vals)


def run_cases(exe: Path, mpirun: str, reps: int, ranks: int, work: Path) -> list[dict]:
    port = free_port()  # one coordinator for every crac run (started by the first, kept)
    results = []
    for label, mode, size, iters, n, unit in CASES:
        n = ranks if mode == "allreduce" else n
        args = [str(exe), mode, str(size), str(iters), str(ROUNDS)]
        native = [*mpirun_cmd(mpirun, n), *args]
        crac = [*mpirun_cmd(mpirun, n), *crac_cmd(), "launch", "-p", str(port), *args]
        samples: dict[str, list[float]] = {"native": [], "crac": []}
        for i in range(reps + 1):  # the first of each is a warm-up
            for name, argv in (("native", native), ("crac", crac)):
                v = one_run(argv, unit, work)  # crac's process directories land there
                if i:
                    samples[name].append(v)
        med = {k: statistics.median(v) for k, v in samples.items()}
        # Overhead as a time ratio for both units (bandwidth: native / crac).
        ratio = med["crac"] / med["native"] if unit == "us" else med["native"] / med["crac"]
        results.append(
            {"case": label, "ranks": n, "unit": unit, **med, "ratio": ratio, "samples": samples}
        )
        print(
            f"  {label}: native {med['native']:.2f}, crac {med['crac']:.2f} {unit}", file=sys.stderr
        )
    try:
        request(port, "quit", timeout=10)
    except (OSError, BenchError):
        pass
    return results


class CkptSets:
    """A 4-rank job under its own coordinator, and 4 independent processes of the same size."""

    def __init__(self, work: Path, mpirun: str, mpi_exe: Path, plain_exe: Path, mib: int, n: int):
        self.work, self.n = work, n
        self.children: list[subprocess.Popen] = []
        self.port = free_port()
        self.job_dir, self.solo_dir = work / "job", work / "solo"
        self.job_dir.mkdir()
        self.solo_dir.mkdir()
        try:
            self._spawn(
                [
                    *mpirun_cmd(mpirun, n),
                    *crac_cmd(),
                    "launch",
                    "-p",
                    str(self.port),
                    "-c",
                    str(self.job_dir),
                    str(mpi_exe),
                    str(mib),
                ],
                "job",
            )
            self.solo = [
                self._spawn(
                    [
                        *crac_cmd(),
                        "launch",
                        "--no-coordinator",
                        "-c",
                        str(self.solo_dir),
                        "--",
                        str(plain_exe),
                        str(mib),
                    ],
                    f"solo{i}",
                )
                for i in range(n)
            ]
            wait_for(lambda: self._ready() == 2 * n, "every process filled", check=self._errors)
            wait_for(
                lambda: request(self.port, "status").get("num_peers") == n,
                "the job's ranks at the coordinator",
                check=self._errors,
            )
        except BaseException:
            self.stop()
            raise

    def _spawn(self, argv: list[str], label: str) -> subprocess.Popen:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=open(self.work / f"{label}.out", "wb"),
            stderr=open(self.work / f"{label}.err", "wb"),
            env=_env(),
        )
        self.children.append(p)
        return p

    def _ready(self) -> int:
        return sum(f.read_bytes().count(b"ready") for f in self.work.glob("*.out"))

    def _errors(self) -> None:
        for p in self.children:
            if p.poll() is not None:
                errs = " ".join(
                    f.read_text(errors="replace")[-800:] for f in self.work.glob("*.err")
                )
                raise BenchError(f"{p.args!r} ended with status {p.returncode}: {errs}")

    def job(self) -> float:
        t0 = time.perf_counter()
        reply = request(self.port, "bcheckpoint")
        elapsed = time.perf_counter() - t0
        if not reply.get("ok"):
            raise BenchError(f"the job's checkpoint failed: {reply.get('error')}")
        return elapsed

    def independent(self) -> float:
        before = latest_gens(self.solo_dir)
        t0 = time.perf_counter()
        for p in self.solo:
            os.kill(p.pid, signal.SIGUSR2)

        def done() -> bool:
            now = latest_gens(self.solo_dir)
            return len(now) == self.n and all(g > before.get(d, 0) for d, g in now.items())

        wait_for(done, "every independent checkpoint", check=self._errors)
        return time.perf_counter() - t0

    def stop(self) -> None:
        try:
            request(self.port, "kill", timeout=10)
        except (OSError, BenchError, ValueError):
            pass
        for p in self.children:
            if p.poll() is None:
                p.kill()
        for p in self.children:
            p.wait(timeout=TIMEOUT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=5, help="runs per variant and case")
    ap.add_argument("-r", "--ranks", type=int, default=2, help="ranks of the allreduce cases")
    ap.add_argument("--ckpt-mib", type=int, default=64, help="MiB per process, checkpoint part")
    ap.add_argument("--ckpt-reps", type=int, default=5, help="checkpoints per variant")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    opts = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        raise BenchError(missing)
    mpicc, mpirun = tools()
    with tempfile.TemporaryDirectory(prefix="crac-bench-mpi-") as tmp:
        work = Path(tmp)
        pp = build(mpicc, "apps/mpi_pingpong.c", work / "mpi_pingpong")
        mem_mpi = build(mpicc, "apps/mpi_mem.c", work / "mpi_mem", "-DWITH_MPI")
        mem_plain = build("gcc", "apps/mpi_mem.c", work / "mem_plain")
        results = run_cases(pp, mpirun, opts.reps, opts.ranks, work)
        sets = CkptSets(work, mpirun, mem_mpi, mem_plain, opts.ckpt_mib, 4)
        ckpt: dict[str, list[float]] = {"4-rank job": [], "4 independent": []}
        try:
            sets.job()  # warm-up
            sets.independent()
            for _ in range(opts.ckpt_reps):
                ckpt["4-rank job"].append(sets.job())
                ckpt["4 independent"].append(sets.independent())
        finally:
            sets.stop()
    ckpt_med = {k: statistics.median(v) for k, v in ckpt.items()}
    load = os.getloadavg()
    if opts.json:
        print(
            json.dumps(
                {
                    "command": command_line(),
                    "loadavg": load,
                    "cases": results,
                    "checkpoint_s": ckpt,
                },
                indent=2,
            )
        )
        return 0
    rows = [
        [
            r["case"],
            str(r["ranks"]),
            r["unit"],
            f"{r['native']:.2f}",
            f"{r['crac']:.2f}",
            f"{(r['ratio'] - 1) * 100:+.1f} %",
        ]
        for r in results
    ]
    for k, v in ckpt.items():
        rel = ckpt_med[k] / ckpt_med["4 independent"]
        rows.append(
            [
                f"checkpoint, {k}",
                "4",
                "ms",
                "",
                f"{ckpt_med[k] * 1e3:.0f}",
                f"x{rel:.2f} vs independent",
            ]
        )
    print(
        f"MPI under crac: {opts.reps} interleaved runs per case (median of {ROUNDS} rounds "
        f"each), {opts.ckpt_reps} checkpoints of {opts.ckpt_mib} MiB per process\n"
    )
    print(markdown_table(["case", "ranks", "unit", "native", "crac", "crac overhead"], rows))
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; command: `{command_line()}`")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/mpi.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
