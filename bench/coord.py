"""Coordinated checkpoints: a job of P small processes under one coordinator vs P independent
processes checkpointed by their own signal, and the latency of `crac command -s`.

    python bench/coord.py [-n 10] [-p 16] [--status-reps 50] [--mib M [--no-fork-writer]] [--json]

Both sets of P `ckpt_counter` processes (tests/apps) run side by side for the whole benchmark;
each repetition checkpoints one set, then the other (interleaved):

* coordinated: a blocking checkpoint of the job sent to the coordinator's socket (the time until
  every image and crac_restart_script.sh are written; also with the `crac command -bc` CLI);
* independent: the checkpoint signal to each of the P processes at once, until every process
  directory's `latest` names a new complete generation.

Then `crac command -s` (the CLI, a Python process each time) and a status request on the socket
are timed. Medians reported; nothing is asserted. Exits 1 when crac's loader is not built.

The pause columns: how long each process's program was stopped per checkpoint (its CRAC_TIMING=1
line), the median and the largest over every process and repetition. With `--mib M` the
processes are bench/apps/dirty.c holding M MiB each instead of ckpt_counter; `--no-fork-writer`
makes the job's processes write with the program paused (the coordinated checkpoint before
docs/DECISIONS.md "Coordinated checkpoints with forked writers").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    BenchError,
    build_apps,
    command_line,
    crac_cmd,
    markdown_table,
    missing_loader_message,
)
from ckpt import build_dirty

TIMEOUT = 120.0
TIMING_RE = re.compile(r"crac: timing: generation (\d+): .* pause ([\d.]+) ms, .*")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, verb: str, timeout: float = TIMEOUT) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(json.dumps({"type": "command", "verb": verb, "token": ""}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise BenchError(f"the coordinator closed the connection ({verb})")
            buf += chunk
    return json.loads(buf)


def _env() -> dict[str, str]:
    prefixes = ("CRAC_COORD", "DMTCP_COORD", "CRAC_CHECKPOINT", "DMTCP_CHECKPOINT")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def wait_for(pred, what: str, timeout: float = TIMEOUT, check=None) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise BenchError(f"timed out waiting for {what}")
        time.sleep(0.001)


def latest_gens(ckptdir: Path) -> dict[Path, int]:
    out = {}
    for d in ckptdir.glob("ckpt_*"):
        link = d / "latest"
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if (d / target / "MANIFEST.json").is_file():
            out[d] = int(target.removeprefix("gen-"))
    return out


class Sets:
    """The two sets of processes and the coordinator of the coordinated one."""

    def __init__(self, work: Path, app: Path, procs: int, args: list[str], fork: bool = True):
        self.work = work
        self.env = {**_env(), "CRAC_TIMING": "1"}
        self.args = [str(app), *args]
        self.fork = fork
        self.children: list[subprocess.Popen] = []
        self.labels: list[str] = []
        try:
            self._start(procs)
        except BaseException:
            self.stop()
            raise

    def _start(self, procs: int) -> None:
        self.port_file = self.work / "coord.port"
        self.coord = self._spawn(
            [*crac_cmd(), "coordinator", "-p", "0", "--port-file", str(self.port_file), "-q"],
            "coord",
        )
        wait_for(lambda: self.port_file.exists() and self.port_file.read_text().strip(), "port")
        self.port = int(self.port_file.read_text())
        self.job_dir = self.work / "job"
        self.solo_dir = self.work / "solo"
        args = self.args
        self.solo: list[subprocess.Popen] = []
        for i in range(procs):
            for d in (self.job_dir, self.solo_dir):
                d.mkdir(exist_ok=True)
            join = ["--join-coordinator", "-p", str(self.port)]
            if not self.fork:
                join.append("--no-fork-writer")
            self._spawn([*crac_cmd(), "launch", *join, "-c", str(self.job_dir), "--", *args], "j")
            p = self._spawn([*crac_cmd(), "launch", "-c", str(self.solo_dir), "--", *args], "s")
            self.solo.append(p)
        wait_for(
            lambda: request(self.port, "status")["num_peers"] == procs,
            "the job's processes",
            check=self._errors,
        )
        time.sleep(1.0)  # every program past its start-up
        if self.args[1:] and self.args[0].endswith("dirty"):  # every one holding its memory
            wait_for(self._all_ready, "every process's memory filled", check=self._errors)

    def _all_ready(self) -> bool:
        outs = [self.work / f"{lab}-{i}.out" for i, lab in enumerate(self.labels) if lab != "coord"]
        return all(b"ready" in p.read_bytes() for p in outs)

    def _spawn(self, argv: list[str], label: str) -> subprocess.Popen:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=open(self.work / f"{label}-{len(self.children)}.out", "wb"),
            stderr=open(self.work / f"{label}-{len(self.children)}.err", "wb"),
            env=self.env,
        )
        self.children.append(p)
        self.labels.append(label)
        return p

    def _errors(self) -> None:
        """A process that ended while it should run: its standard error in the exception."""
        for i, p in enumerate(self.children):
            if p.poll() is not None:
                err = (self.work / f"{self.labels[i]}-{i}.err").read_text(errors="replace")
                raise BenchError(f"{p.args!r} ended with status {p.returncode}: {err[-1500:]}")

    def coordinated(self) -> tuple[float, int]:
        """Seconds, and the generation the job's processes wrote."""
        t0 = time.perf_counter()
        reply = request(self.port, "bcheckpoint")
        elapsed = time.perf_counter() - t0
        if not reply.get("ok"):
            raise BenchError(f"coordinated checkpoint failed: {reply.get('error')}")
        return elapsed, int(reply["generation"])

    def pauses(self, label: str) -> dict[int, list[float]]:
        """Per generation: the pause (ms) of each process of LABEL ("j": the job, "s": solo)."""
        out: dict[int, list[float]] = {}
        for i, lab in enumerate(self.labels):
            if lab != label:
                continue
            text = (self.work / f"{lab}-{i}.err").read_text(errors="replace")
            for m in TIMING_RE.finditer(text):
                out.setdefault(int(m.group(1)), []).append(float(m.group(2)))
        return out

    def coordinated_cli(self) -> float:
        t0 = time.perf_counter()
        cp = subprocess.run(
            [*crac_cmd(), "command", "-p", str(self.port), "-bc"],
            capture_output=True,
            env=self.env,
            timeout=TIMEOUT,
        )
        elapsed = time.perf_counter() - t0
        if cp.returncode != 0:
            raise BenchError(f"crac command -bc failed: {cp.stderr.decode(errors='replace')}")
        return elapsed

    def independent(self) -> tuple[float, int]:
        """Seconds, and the generation the processes wrote."""
        before = latest_gens(self.solo_dir)
        if len(before) not in (0, len(self.solo)):
            raise BenchError("the independent processes' images are out of step")
        t0 = time.perf_counter()
        for p in self.solo:
            os.kill(p.pid, signal.SIGUSR2)

        def done() -> bool:
            now = latest_gens(self.solo_dir)
            return len(now) == len(self.solo) and all(g > before.get(d, 0) for d, g in now.items())

        wait_for(done, "every independent checkpoint")
        return time.perf_counter() - t0, max(latest_gens(self.solo_dir).values())

    def stop(self) -> None:
        for p in self.children:
            if p.poll() is None:
                p.kill()
        for p in self.children:
            p.wait(timeout=TIMEOUT)


def status_latency(port: int, reps: int) -> tuple[list[float], list[float]]:
    env = _env()
    cli, sock = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        cp = subprocess.run(
            [*crac_cmd(), "command", "-p", str(port), "-s"],
            capture_output=True,
            env=env,
            timeout=TIMEOUT,
        )
        cli.append(time.perf_counter() - t0)
        if cp.returncode != 0 or b"NUM_PEERS=" not in cp.stdout:
            raise BenchError(f"crac command -s failed: {cp.stderr.decode(errors='replace')}")
        t0 = time.perf_counter()
        request(port, "status")
        sock.append(time.perf_counter() - t0)
    return cli, sock


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=10, help="checkpoints per variant")
    ap.add_argument("-p", "--procs", type=int, default=16, help="processes per set")
    ap.add_argument("--status-reps", type=int, default=50, help="crac command -s runs")
    ap.add_argument("--mib", type=int, default=0, help="MiB per process (bench/apps/dirty.c)")
    ap.add_argument(
        "--no-fork-writer", action="store_true", help="the job's processes write paused"
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    opts = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        raise BenchError(missing)

    with tempfile.TemporaryDirectory(prefix="crac-bench-coord-") as tmp:
        work = Path(tmp)
        if opts.mib > 0:
            app = build_dirty(work)
            args = [str(opts.mib), "20"]
        else:
            app = build_apps(["ckpt_counter"], work)["ckpt_counter"]
            args = ["10000000", "50"]
        sets = Sets(work, app, opts.procs, args, fork=not opts.no_fork_writer)
        gens: dict[str, list[int]] = {"coordinated": [], "independent": []}
        try:
            samples: dict[str, list[float]] = {
                "coordinated": [],
                "independent": [],
                "coordinated (crac command -bc)": [],
            }
            sets.coordinated()  # warm-up
            sets.independent()
            for _ in range(opts.reps):
                for name, run in (
                    ("coordinated", sets.coordinated),
                    ("independent", sets.independent),
                ):
                    seconds, gen = run()
                    samples[name].append(seconds)
                    gens[name].append(gen)
                samples["coordinated (crac command -bc)"].append(sets.coordinated_cli())
            cli, sock = status_latency(sets.port, opts.status_reps)
            job_pauses, solo_pauses = sets.pauses("j"), sets.pauses("s")
        finally:
            sets.stop()
    pause = {
        "coordinated": [p for g in gens["coordinated"] for p in job_pauses.get(g, [])],
        "independent": [p for g in gens["independent"] for p in solo_pauses.get(g, [])],
    }

    med = {k: statistics.median(v) for k, v in samples.items()}
    ratio = med["coordinated"] / med["independent"]
    result = {
        "command": command_line(),
        "procs": opts.procs,
        "reps": opts.reps,
        "checkpoint_ms": {
            k: {"median": med[k] * 1e3, "min": min(v) * 1e3} for k, v in samples.items()
        },
        "ratio_coordinated_vs_independent": ratio,
        "mib": opts.mib,
        "fork_writer": not opts.no_fork_writer,
        "pause_ms": pause,
        "loadavg": os.getloadavg(),
        "status_ms": {
            "crac command -s (median)": statistics.median(cli) * 1e3,
            "socket status request (median)": statistics.median(sock) * 1e3,
            "reps": opts.status_reps,
        },
    }
    if opts.json:
        print(json.dumps(result, indent=2))
        return 0
    rows = [
        [
            k,
            f"{med[k] * 1e3:.1f}",
            f"{min(v) * 1e3:.1f}",
            f"{med[k] / med['independent']:.2f}",
            f"{statistics.median(pause[k]):.1f}" if pause.get(k) else "",
            f"{max(pause[k]):.1f}" if pause.get(k) else "",
        ]
        for k, v in samples.items()
    ]
    what = (
        f"bench/apps/dirty.c, {opts.mib} MiB each" if opts.mib else "small processes (ckpt_counter)"
    )
    writer = "paused writers (--no-fork-writer)" if opts.no_fork_writer else "forked writers"
    print(
        f"Checkpoint of {opts.procs} processes ({what}; the job's: {writer}), {opts.reps} "
        "interleaved repetitions\n"
    )
    head = ["variant", "median ms", "min ms", "vs independent", "pause median ms", "pause max ms"]
    print(markdown_table(head, rows))
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"\nratio coordinated / independent: {ratio:.2f} (target <= 1.5)\n")
    print(
        markdown_table(
            ["status", "median ms"],
            [
                ["`crac command -s` (a CLI process)", f"{statistics.median(cli) * 1e3:.1f}"],
                ["status request on the socket", f"{statistics.median(sock) * 1e3:.2f}"],
            ],
        )
    )
    print(f"\n{opts.status_reps} runs each; command: `{command_line()}`")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/coord.py: error: {exc}", file=sys.stderr)
        sys.exit(1)
