"""Checkpoint and restart of a process tree vs the same number of independent processes.

    python bench/tree.py [-n 3] [--sizes 1,4,16] [--mib 8] [--json]

For each size N, side by side in one run (repetitions interleaved, medians reported):

* tree: one `crac launch --join-coordinator` of `bench/apps/tree_fill N MIB` (the root forks N-1
  children, each a split process of the job: docs/DECISIONS.md "Process trees");
* independent: N `crac launch --join-coordinator` of `tree_fill 1 MIB` in one job.

Each process fills MIB MiB with its own incompressible bytes. Checkpoint: a blocking checkpoint
on the coordinator's socket (every image and the restart script written). Restart: every process
SIGKILLed, then the job's restart script (it starts a coordinator) until all N processes have
joined it again. Nothing is asserted. Exits 1 when crac's loader is not built.
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

from _common import BenchError, command_line, crac_cmd, markdown_table, missing_loader_message
from coord import TIMEOUT, _env, free_port, request, wait_for

BENCH_APPS = Path(__file__).resolve().parent / "apps"


def build(out_dir: Path) -> Path:
    out = out_dir / "tree_fill"
    src = BENCH_APPS / "tree_fill.c"
    cp = subprocess.run(["gcc", "-O2", "-o", str(out), str(src)], capture_output=True, text=True)
    if cp.returncode != 0:
        raise BenchError(f"cannot build {src}: {cp.stderr}")
    return out


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    """In a session of its own: everything it starts (a tree's children, a restart script's
    processes and coordinator) is SIGKILLed with its process group."""
    with open(log, "ab") as fh:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=fh,
            env=_env(),
            start_new_session=True,
        )


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        p.wait(timeout=TIMEOUT)


def _pids_of(job: Path) -> list[int]:
    """The processes of the job's images (a tree's children are no children of ours)."""
    return [int(d.name.rsplit("-", 1)[1]) for d in job.glob("ckpt_*")]


def _kill_app(app: Path) -> None:
    """Every process still running APP (this run's own build, in its temporary directory): a
    restarted tree's processes are no children of ours, and may have left our process groups."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
                if argv0 == str(app).encode():
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def one_rep(work: Path, app: Path, n: int, mib: int, tree: bool) -> tuple[float, float]:
    """Launch, checkpoint (timed), SIGKILL, restart (timed), SIGKILL. Seconds."""
    work.mkdir(parents=True)
    port_file, job, log = work / "coord.port", work / "job", work / "log"
    coord_argv = [*crac_cmd(), "coordinator", "-p", "0", "--port-file", str(port_file), "-q"]
    coord = _spawn(coord_argv, log)
    procs = [coord]
    try:
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(), "the coordinator")
        port = int(port_file.read_text())
        launch = [*crac_cmd(), "launch", "--join-coordinator", "-p", str(port), "-c", str(job)]
        out = work / "out"
        if tree:
            procs.append(_spawn([*launch, "--", str(app), str(n), str(mib)], out))
        else:
            procs += [_spawn([*launch, "--", str(app), "1", str(mib)], out) for _ in range(n)]
        wait_for(lambda: out.exists() and out.read_text().count("ready") == n, "every process")
        wait_for(lambda: request(port, "status")["num_peers"] == n, "every process joined")
        t0 = time.perf_counter()
        reply = request(port, "bcheckpoint")
        ckpt = time.perf_counter() - t0
        if not reply.get("ok"):
            raise BenchError(f"the checkpoint failed: {reply.get('error')}")
        for pid in _pids_of(job):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _kill(procs)
        procs = []
        port2 = free_port()
        t0 = time.perf_counter()
        procs.append(_spawn(["sh", str(job / "crac_restart_script.sh"), "-p", str(port2)], log))

        def joined() -> bool:
            try:
                return request(port2, "status", timeout=5)["num_peers"] == n
            except OSError:
                return False

        wait_for(joined, "every restarted process")
        restart = time.perf_counter() - t0
        return ckpt, restart
    finally:
        for pid in _pids_of(job) if job.exists() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _kill(procs)
        _kill_app(app)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--reps", type=int, default=3, help="repetitions per variant and size")
    ap.add_argument("--sizes", default="1,4,16", help="processes per tree, comma-separated")
    ap.add_argument("--mib", type=int, default=8, help="MiB each process fills")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    msg = missing_loader_message()
    if msg:
        print(f"bench/tree.py: {msg}", file=sys.stderr)
        return 1
    sizes = [int(s) for s in args.sizes.split(",")]
    load_before = os.getloadavg()
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="crac_bench_tree_") as tmp:
        app = build(Path(tmp))
        k = 0
        for rep in range(args.reps):
            for n in sizes:
                for tree in (True, False) if rep % 2 == 0 else (False, True):
                    k += 1
                    c, r = one_rep(Path(tmp) / f"run{k}", app, n, args.mib, tree)
                    res = results.setdefault(f"{n}/{'tree' if tree else 'indep'}", {})
                    res.setdefault("ckpt", []).append(c)
                    res.setdefault("restart", []).append(r)
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"results": results, "load": [load_before, load_after]}, indent=2))
        return 0
    rows = []
    for n in sizes:
        t, i = results[f"{n}/tree"], results[f"{n}/indep"]
        med = {k: statistics.median(v) for k, v in t.items()}
        imed = {k: statistics.median(v) for k, v in i.items()}
        rows.append(
            [
                str(n),
                f"{med['ckpt']:.3f}",
                f"{imed['ckpt']:.3f}",
                f"{med['ckpt'] / imed['ckpt']:.2f}",
                f"{med['restart']:.3f}",
                f"{imed['restart']:.3f}",
                f"{med['restart'] / imed['restart']:.2f}",
            ]
        )
    header = [
        "processes",
        "tree ckpt s",
        "independent ckpt s",
        "ratio",
        "tree restart s",
        "independent restart s",
        "ratio",
    ]
    print(markdown_table(header, rows))
    print(
        f"\n{args.mib} MiB per process, medians of {args.reps}; load average before "
        f"{load_before[0]:.2f} / after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    print(f"command: {command_line()}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench/tree.py: {exc}", file=sys.stderr)
        sys.exit(1)
