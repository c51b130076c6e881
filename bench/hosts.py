"""A job over several hosts: the coordinated checkpoint of P processes spread over H network
namespaces (each its own host, bench/_netns.py) against the same P processes on one host, and
the coordinator's messages per checkpoint against P.

    python bench/hosts.py [-n 5] [-p 16] [--hosts 4] [--mib 4] [--json]      (root: namespaces)

Both jobs run side by side for the whole benchmark, each with its own coordinator on host 1
(listening on host 1's address, with a secret, as a multi-host job must); repetitions alternate
between them. A checkpoint's time and message count are the coordinator's own (its log line
"checkpoint N complete in S s ... M messages"), so the `crac command` process that asks for it
is not counted. Then jobs of 1 and 4 processes give the messages-per-process line. Medians;
nothing asserted. Exits 1 when crac's loader is not built or namespaces cannot be made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
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
from _netns import Hosts, NetnsUnavailable

TIMEOUT = 180.0
COMPLETE_RE = re.compile(r"checkpoint \d+ complete in ([0-9.]+) s: .* (\d+) messages;")


class NetJob:
    """P coord_counter processes on hosts HOST_OF[i], one coordinator on host 1 at PORT."""

    def __init__(
        self, hosts: Hosts, app: Path, work: Path, port: int, host_of: list[int], mib: int
    ):
        self.hosts, self.port = hosts, port
        self.env = dict(os.environ, CRAC_COORD_TOKEN=secrets.token_hex(16))
        self.log = work / f"coord-{port}.log"
        self.procs: list[subprocess.Popen] = []
        coord = [*crac_cmd(), "coordinator", "--host", hosts.addr(1), "-p", str(port)]
        coord += ["--log-file", str(self.log), "--daemon", "--exit-on-last"]
        subprocess.run(hosts.argv(1, coord), env=self.env, check=True, capture_output=True)
        for n, h in enumerate(host_of):
            argv = [*crac_cmd(), "launch", "--join-coordinator", "--coord-host", hosts.addr(1)]
            argv += ["-p", str(port), "-c", str(work / f"ckpt-{port}-h{h}"), "--"]
            argv += [str(app), f"t{n}", "1000000", "50", str(mib)]
            self.procs.append(
                subprocess.Popen(
                    hosts.argv(h, argv),
                    env=self.env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + TIMEOUT
        while self.peers() != len(host_of):
            if time.monotonic() > deadline:
                raise BenchError(f"the job on port {port} did not connect")
            time.sleep(0.2)

    def command(self, *args: str) -> subprocess.CompletedProcess:
        argv = [*crac_cmd(), "command", "-h", self.hosts.addr(1), "-p", str(self.port), *args]
        return subprocess.run(
            self.hosts.argv(1, argv), env=self.env, capture_output=True, text=True, timeout=TIMEOUT
        )

    def peers(self) -> int:
        for line in self.command("-s").stdout.splitlines():
            if line.startswith("NUM_PEERS="):
                return int(line.split("=")[1])
        return -1

    def checkpoint(self) -> tuple[float, int]:
        """One blocking job checkpoint: the coordinator's seconds and message count."""
        done = len(COMPLETE_RE.findall(self.log.read_text()))
        cp = self.command("-bc")
        if cp.returncode != 0:
            raise BenchError(f"checkpoint failed: {cp.stdout}{cp.stderr}")
        found = COMPLETE_RE.findall(self.log.read_text())
        if len(found) <= done:
            raise BenchError(f"no completion line in {self.log}")
        seconds, messages = found[-1]
        return float(seconds), int(messages)

    def stop(self) -> None:
        self.command("quit")
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5, help="repetitions")
    ap.add_argument("-p", type=int, default=16, help="processes")
    ap.add_argument("--hosts", type=int, default=4, help="namespaces the spread job uses")
    ap.add_argument("--mib", type=int, default=4, help="MiB each process dirties")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    missing = missing_loader_message()
    if missing:
        print(f"hosts.py: {missing}", file=sys.stderr)
        return 1
    try:
        hosts = Hosts(args.hosts)
    except NetnsUnavailable as exc:
        print(f"hosts.py: {exc}", file=sys.stderr)
        return 1
    jobs: list[NetJob] = []
    try:
        with tempfile.TemporaryDirectory(prefix="crac-bench-hosts-") as tmp:
            try:
                return run(args, hosts, Path(tmp), jobs)
            finally:
                for job in jobs:
                    job.stop()
    except BenchError as exc:
        print(f"hosts.py: {exc}", file=sys.stderr)
        return 1
    finally:
        hosts.remove()


def run(args: argparse.Namespace, hosts: Hosts, work: Path, jobs: list[NetJob]) -> int:
    (work / "apps").mkdir()
    app = build_apps(["coord_counter"], work / "apps")["coord_counter"]
    spread = NetJob(hosts, app, work, 7801, [1 + i % args.hosts for i in range(args.p)], args.mib)
    jobs.append(spread)
    one = NetJob(hosts, app, work, 7802, [1] * args.p, args.mib)
    jobs.append(one)
    times: dict[str, list[float]] = {"spread": [], "one": []}
    messages: dict[int, int] = {}
    for _ in range(args.n):
        for name, job in (("spread", spread), ("one", one)):
            secs, msgs = job.checkpoint()
            times[name].append(secs)
            messages[args.p] = msgs
    for p in (1, 4):
        small = NetJob(hosts, app, work, 7803 + p, [1 + i % args.hosts for i in range(p)], 1)
        jobs.append(small)
        messages[p] = small.checkpoint()[1]
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "processes": args.p,
        "hosts": args.hosts,
        "mib_each": args.mib,
        "seconds": times,
        "median": med,
        "ratio": med["spread"] / med["one"],
        "messages": messages,
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"$ {command_line()}    (load average {result['load']:.2f})")
    rows = [
        [
            f"{args.p} processes over {args.hosts} hosts",
            f"{med['spread']:.3f}",
            " ".join(f"{t:.3f}" for t in times["spread"]),
        ],
        [
            f"{args.p} processes on one host",
            f"{med['one']:.3f}",
            " ".join(f"{t:.3f}" for t in times["one"]),
        ],
        ["ratio (spread / one host)", f"{result['ratio']:.2f}", ""],
    ]
    print(markdown_table(["coordinated checkpoint", "median s", "each"], rows))
    print()
    print(
        markdown_table(
            ["processes", "messages per checkpoint", "per process"],
            [[str(p), str(m), f"{m / p:.1f}"] for p, m in sorted(messages.items())],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
