"""Checkpoint and restart of a large address space vs plain disk I/O of the same bytes.

    python bench/ckpt.py [--size-mib 2048] [--reps 3] [--dir DIR] [--tick-ms 10]
                         [--memory prefault|settle|none] [--settle-s 5] [--device sim]
                         [--no-cold] [--timeout 300] [--json]

Builds bench/apps/dirty.c (gcc -O2) into a temporary directory; it fills SIZE MiB with
pseudo-random (incompressible) data, prints `ready`, then prints `tick N` every TICK_MS ms. Each
repetition, in this order, in a fresh directory under DIR (default: the system temp dir):

1. `crac launch -c IMAGES -- dirty SIZE TICK_MS` (with CRAC_TIMING=1), until it ticks;
2. plain write: SIZE MiB of random bytes written sequentially to a new file, then fsync; the file
   is removed;
3. checkpoint: the program's VmRSS is read and SIGUSR2 sent; timed until
   `ckpt_*/latest/MANIFEST.json` exists (crac's publish includes fsync); pause, suspend, write and
   publish come from crac's timing line; the program is SIGKILLed once it ticks again;
4. read, warm cache: upper.core read sequentially (it is still in the page cache); then its
   SHA-256 computed (hashlib), for comparison with crac's publish, which hashes it;
5. restart, warm cache: `crac restart IMAGES/ckpt_...` timed until the program's first `tick`
   line (at most TICK_MS late: the program resumes inside its sleep); then SIGKILLed; then
   `crac --version` timed (the Python start-up part of a restart);
6. read, warm cache, into fresh memory: upper.core read into a new anonymous mapping of its size
   (faulting in every page, as the restart must for the program's memory);
7. unless --no-cold, and only when /proc/sys/vm/drop_caches is writable: caches dropped, read
   again; caches dropped, restart again (cold cache; this includes loading crac's Python and
   loader from disk);
8. the images are removed, then `sync`.

Before each timed step (2, 3, 5, 6 and both of 7) the bench syncs and puts free memory in the
same state, because on a VM the cost of filling fresh memory depends on its history. On the
machine of docs/PERFORMANCE.md (a Firecracker guest whose balloon reports free pages to the
hypervisor; ext4 page cache in large folios), writing 2 GiB into the page cache took 4.5-6 s after
idling, the same after touching and freeing 4.3 GiB of ordinary anonymous memory, and 0.5-0.6 s
after touching and freeing 4.3 GiB of MADV_HUGEPAGE memory; crac's own write varied the same way.
--memory prefault (default) does the last: touches and frees 2*SIZE+256 MiB of anonymous memory
advised MADV_HUGEPAGE right before the step (close to bare metal, and reproducible);
--memory settle idles --settle-s seconds instead (the VM's slow case, noisier);
--memory none only syncs (then each step depends on what the one before it freed).

A repetition whose program is killed by a signal the benchmark did not send (another user's
`pkill`) is run again, up to 3 times.

Reports medians, ratio plain/checkpoint (target >= 0.8) and restart/read (target <= 1.5), pause
time, and image size on disk vs the program's VmRSS. Every wait has a timeout; a failure prints a
clear message and exits 1. Never asserts on time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import platform
import re
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

from _common import (
    CFLAGS,
    REPO,
    BenchError,
    command_line,
    crac_cmd,
    disk_bytes,
    drop_caches,
    loader_path,
    markdown_table,
    missing_loader_message,
    native_dir,
    prefault_and_free,
)

PROG = "bench/ckpt.py"
APP_SRC = REPO / "bench" / "apps" / "dirty.c"
MIB = 1 << 20
CHUNK = 8 * MIB
RANDOM_POOL = 64 * MIB  # random bytes written over and over by the plain-write baseline
PAGE = 4096
PREFAULT_EXTRA = 256 * MIB
POLL_S = 0.001
MAX_ATTEMPTS = 3  # per repetition, when something outside kills our program
TIMING_RE = re.compile(
    r"crac: timing: generation (\d+): suspend ([\d.]+) ms, write ([\d.]+) ms, "
    r"pause ([\d.]+) ms, publish ([\d.]+) ms, threads (\d+), core (\d+) bytes"
)
TICK_RE = re.compile(r"^(ready|tick) (\d+)$")
# Variables that would change where or how the launched program is checkpointed.
_CKPT_ENV_PREFIXES = ("CRAC_CHECKPOINT", "DMTCP_CHECKPOINT", "CRAC_SIGCKPT", "DMTCP_SIGCKPT")


class ExternalKill(BenchError):
    """A program of this benchmark was killed by a signal the benchmark did not send."""


class Proc:
    """A child whose stdout and stderr lines are collected (with their arrival time) by threads."""

    def __init__(self, argv: list[str], env: dict[str, str], what: str):
        self.what = what
        self.argv = argv
        self.killed = False  # SIGKILL sent by this benchmark
        self.cond = threading.Condition()
        self.lines: dict[str, list[tuple[float, str]]] = {"out": [], "err": []}
        self.eof = {"out": False, "err": False}
        try:
            self.p = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise BenchError(f"cannot start {what} ({shlex.join(argv)}): {exc}") from exc
        self.threads = [
            threading.Thread(target=self._pump, args=(name, stream), daemon=True)
            for name, stream in (("out", self.p.stdout), ("err", self.p.stderr))
        ]
        for t in self.threads:
            t.start()

    @property
    def pid(self) -> int:
        return self.p.pid

    def _pump(self, name: str, stream) -> None:
        for raw in stream:
            t = time.perf_counter()
            with self.cond:
                self.lines[name].append((t, raw.decode(errors="replace").rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.eof[name] = True
            self.cond.notify_all()

    def stderr_tail(self, n: int = 6) -> str:
        with self.cond:
            tail = [line for _, line in self.lines["err"][-n:]]
        return " | ".join(tail) if tail else "(nothing on stderr)"

    def wait_line(
        self, name: str, regex: re.Pattern, start: int, timeout: float, doing: str
    ) -> tuple[int, float, re.Match]:
        """The first line of stream NAME from index START on that matches REGEX."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                lines = self.lines[name]
                for i in range(start, len(lines)):
                    m = regex.search(lines[i][1])
                    if m:
                        return i, lines[i][0], m
                start = len(lines)
                if self.eof[name]:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(
                        f"{self.what}: timed out after {timeout:.0f} s while {doing}; "
                        f"stderr: {self.stderr_tail()}"
                    )
                self.cond.wait(min(left, 0.5))
        try:
            status = self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            status = "none yet"
        for t in self.threads:
            t.join(timeout=5)
        raise BenchError(
            f"{self.what} closed its std{name} ({describe_status(status)}) while {doing}; "
            f"stderr: {self.stderr_tail()}"
        )

    def count(self, name: str) -> int:
        with self.cond:
            return len(self.lines[name])

    def killed_from_outside(self) -> bool:
        status = self.p.poll()
        return status is not None and status < 0 and not self.killed

    def kill(self) -> None:
        if self.p.poll() is None:
            self.killed = True
            try:
                os.kill(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"{self.what} (pid {self.p.pid}) survives SIGKILL for 60 s") from exc
        for t in self.threads:
            t.join(timeout=10)


def describe_status(status) -> str:
    if isinstance(status, int) and status < 0:
        return f"was killed by signal {-status}, not sent by this benchmark"
    return f"exited with status {status}"


def bench_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CKPT_ENV_PREFIXES)}
    env["CRAC_TIMING"] = "1"
    return env


def build_dirty(out_dir: Path) -> Path:
    out = out_dir / "dirty"
    cmd = ["gcc", *CFLAGS, "-o", str(out), str(APP_SRC)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchError(f"cannot build {APP_SRC}: {shlex.join(cmd)}: {exc}") from exc
    if res.returncode != 0:
        raise BenchError(f"cannot build {APP_SRC}: {shlex.join(cmd)}\n{res.stderr}")
    return out


def vm_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no VmRSS in /proc/{pid}/status")


def filesystem_of(path: Path) -> str:
    """`SOURCE on MOUNTPOINT type FSTYPE` of the mount holding PATH."""
    real = os.path.realpath(path)
    best = ("?", "/", "?")
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                src, mnt, fstype = line.split()[:3]
                inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best[1]):
                    best = (src, mnt, fstype)
    except OSError:
        pass
    return f"{best[0]} on {best[1]} type {best[2]}"


def plain_write(path: Path, nbytes: int, pool: bytes) -> tuple[float, float]:
    """Seconds to write NBYTES (cycling through POOL) sequentially to a new file and fsync it,
    and the seconds of that spent before the fsync."""
    view = memoryview(pool)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        done = 0
        while done < nbytes:
            off = done % len(pool)
            n = os.write(fd, view[off : off + min(CHUNK, nbytes - done, len(pool) - off)])
            done += n
        t1 = time.perf_counter()
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0, t1 - t0


def read_file(path: Path) -> tuple[float, int]:
    """Seconds to read PATH sequentially to its end, and the bytes read."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(view)
            if not n:
                break
            total += n
    return time.perf_counter() - t0, total


def prepare(opts) -> None:
    """Puts free memory in the same state before every timed step (see the docstring)."""
    if opts.memory == "settle":
        os.sync()
        time.sleep(opts.settle_s)
    elif opts.memory == "prefault":
        prefault_and_free(2 * opts.size_mib * MIB + PREFAULT_EXTRA)
    else:
        os.sync()


def sha256_file(path: Path) -> float:
    """Seconds to compute the SHA-256 of PATH (hashlib, i.e. OpenSSL, like crac's publish)."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    h = hashlib.sha256()
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(view):
            h.update(view[:n])
    return time.perf_counter() - t0


def read_into_fresh_memory(path: Path) -> float:
    """Seconds to read PATH into a fresh anonymous mapping of its size (faults in every page, as
    a restart must), then unmaps it."""
    size = path.stat().st_size
    t0 = time.perf_counter()
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        view = memoryview(mm)
        try:
            with open(path, "rb", buffering=0) as f:
                done = 0
                while done < size:
                    n = f.readinto(view[done : done + CHUNK])
                    if not n:
                        raise BenchError(f"{path} ended at {done} of {size} bytes")
                    done += n
            return time.perf_counter() - t0
        finally:
            view.release()
    finally:
        mm.close()


def checkpoint(dirty: Path, images: Path, plain: Path, pool: bytes, opts, procs: list) -> dict:
    """Launches dirty under crac; once it holds its memory, times the plain write, then one
    checkpoint; kills it; returns the measurements."""
    argv = [
        *crac_cmd(),
        "launch",
        "--device",
        opts.device,
        "-c",
        str(images),
        "--",
        str(dirty),
        str(opts.size_mib),
        str(opts.tick_ms),
    ]
    proc = Proc(argv, bench_env(), "the launched program (crac launch dirty)")
    procs.append(proc)
    try:
        proc.wait_line("out", re.compile(r"^ready "), 0, opts.timeout, "filling its memory")
        proc.wait_line("out", TICK_RE, 0, opts.timeout, "starting to tick")
        prepare(opts)
        plain_s, plain_nosync_s = plain_write(plain, opts.size_mib * MIB, pool)
        plain.unlink()
        prepare(opts)
        rss = vm_rss(proc.pid)
        pattern = f"ckpt_*-{proc.pid}/latest/MANIFEST.json"
        err_start = proc.count("err")
        out_start = proc.count("out")
        deadline = time.monotonic() + opts.timeout
        t0 = time.perf_counter()
        os.kill(proc.pid, signal.SIGUSR2)
        while True:
            found = list(images.glob(pattern))
            if found:
                break
            if proc.p.poll() is not None:
                raise BenchError(
                    f"the program {describe_status(proc.p.returncode)} during its checkpoint; "
                    f"stderr: {proc.stderr_tail()}"
                )
            if time.monotonic() > deadline:
                raise BenchError(
                    f"no complete checkpoint ({images}/{pattern}) {opts.timeout:.0f} s after "
                    f"SIGUSR2; stderr: {proc.stderr_tail()}"
                )
            time.sleep(POLL_S)
        t1 = time.perf_counter()
        _, _, m = proc.wait_line("err", TIMING_RE, err_start, opts.timeout, "printing its timing")
        # The program runs on after its checkpoint.
        proc.wait_line("out", TICK_RE, out_start + 1, opts.timeout, "ticking after its checkpoint")
    finally:
        proc.kill()
    gen = found[0].parent.resolve()
    core = gen / "upper.core"
    return {
        "plain_write_s": plain_s,
        "plain_write_nosync_s": plain_nosync_s,
        "ckpt_s": t1 - t0,
        "generation": int(m.group(1)),
        "suspend_ms": float(m.group(2)),
        "write_ms": float(m.group(3)),
        "pause_ms": float(m.group(4)),
        "publish_ms": float(m.group(5)),
        "threads": int(m.group(6)),
        "core_bytes": int(m.group(7)),
        "core_apparent_bytes": core.stat().st_size,
        "core_disk_bytes": disk_bytes(core),
        "gen_disk_bytes": disk_bytes(gen),
        "vmrss_bytes": rss,
        "proc_dir": str(gen.parent),
        "core": str(core),
    }


def restart(proc_dir: str, opts, procs: list[Proc]) -> float:
    """Seconds from starting `crac restart` to the restarted program's first tick; kills it."""
    argv = [*crac_cmd(), "restart", proc_dir]
    t0 = time.perf_counter()
    proc = Proc(argv, bench_env(), "the restarted program (crac restart)")
    procs.append(proc)
    try:
        _, t1, m = proc.wait_line("out", TICK_RE, 0, opts.timeout, "restarting")
        if m.group(1) != "tick":
            raise BenchError("the restarted program started from scratch (printed `ready`)")
    finally:
        proc.kill()
    return t1 - t0


def cli_startup(opts) -> float:
    """Seconds for `crac --version`: the Python start-up part of `crac restart`."""
    cmd = [*crac_cmd(), "--version"]
    t0 = time.perf_counter()
    try:
        res = subprocess.run(cmd, capture_output=True, timeout=opts.timeout)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{shlex.join(cmd)} timed out") from exc
    if res.returncode != 0:
        raise BenchError(f"{shlex.join(cmd)} failed: {res.stderr.decode(errors='replace')}")
    return time.perf_counter() - t0


def one_rep(rep: int, work: Path, dirty: Path, pool: bytes, opts, cold: bool) -> dict:
    rec: dict = {"rep": rep}
    procs: list[Proc] = []
    plain = work / f"plain-{rep}.bin"
    images = work / f"images-{rep}"
    try:
        images.mkdir()
        rec.update(checkpoint(dirty, images, plain, pool, opts, procs))
        core = Path(rec["core"])
        rec["read_warm_s"], rec["read_bytes"] = read_file(core)
        rec["sha256_warm_s"] = sha256_file(core)
        prepare(opts)
        rec["restart_warm_s"] = restart(rec["proc_dir"], opts, procs)
        rec["cli_s"] = cli_startup(opts)
        prepare(opts)
        rec["read_fresh_warm_s"] = read_into_fresh_memory(core)
        if cold:
            drop_caches()
            prepare(opts)
            rec["read_cold_s"], _ = read_file(core)
            drop_caches()
            prepare(opts)
            rec["restart_cold_s"] = restart(rec["proc_dir"], opts, procs)
    except (BenchError, OSError) as exc:
        time.sleep(0.2)
        if any(p.killed_from_outside() for p in procs):
            raise ExternalKill(str(exc)) from exc
        if isinstance(exc, OSError):
            raise BenchError(f"repetition {rep + 1}: {exc}") from exc
        raise
    finally:
        for p in procs:
            if p.p.poll() is None:
                p.kill()
        plain.unlink(missing_ok=True)
        shutil.rmtree(images, ignore_errors=True)
        os.sync()
    del rec["core"], rec["proc_dir"]
    return rec


def git_commit() -> str:
    try:
        res = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return res.stdout.strip() if res.returncode == 0 else "unknown"


def memory_note(opts) -> str:
    if opts.memory == "prefault":
        mib = 2 * opts.size_mib + PREFAULT_EXTRA // MIB
        return f"{mib} MiB of MADV_HUGEPAGE memory touched and freed (--memory prefault)"
    if opts.memory == "settle":
        return f"sync and {opts.settle_s:g} s idle (--memory settle)"
    return "sync only (--memory none)"


def med(recs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in recs if key in r]
    return statistics.median(vals) if vals else None


def fmt_s(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f} s"


def fmt_mib(v: float | None) -> str:
    return "n/a" if v is None else f"{v / MIB:.1f} MiB"


def per_rep(recs: list[dict], key: str, scale: float = 1.0, digits: int = 3) -> str:
    return ", ".join(f"{r[key] * scale:.{digits}f}" for r in recs if key in r)


def report(doc: dict) -> str:
    recs = doc["reps_data"]
    size = doc["size_mib"]
    m = doc["medians"]
    r = doc["ratios"]
    out = [
        f"Checkpoint and restart of {size} MiB of random data, {doc['reps']} interleaved "
        f"repetitions (plain write, checkpoint, read, restart), medians; "
        f"before each timed step: {doc['memory_prep']}; "
        f"filesystem: {doc['filesystem']}; {doc['cpus']} CPUs, kernel {doc['kernel']}; "
        f"commit {doc['commit']}\n"
    ]
    rows = [
        [
            f"checkpoint (SIGUSR2 to `latest/MANIFEST.json`) vs plain write of {size} MiB + fsync",
            fmt_s(m["ckpt_s"]),
            fmt_s(m["plain_write_s"]),
            f"{r['plain_over_ckpt']:.2f} (plain/ckpt)",
            ">= 0.8",
        ],
        [
            "restart (`crac restart` to first tick) vs read of upper.core, warm cache",
            fmt_s(m["restart_warm_s"]),
            fmt_s(m["read_warm_s"]),
            f"{r['restart_over_read_warm']:.2f} (restart/read)",
            "<= 1.5",
        ],
    ]
    rows.append(
        [
            "restart vs read of upper.core into fresh anonymous memory, warm cache",
            fmt_s(m["restart_warm_s"]),
            fmt_s(m["read_fresh_warm_s"]),
            f"{r['restart_over_read_fresh_warm']:.2f} (restart/read)",
            "",
        ]
    )
    if m.get("restart_cold_s") is not None:
        rows.append(
            [
                "restart vs read of upper.core, cold cache (caches dropped before each)",
                fmt_s(m["restart_cold_s"]),
                fmt_s(m["read_cold_s"]),
                f"{r['restart_over_read_cold']:.2f} (restart/read)",
                "<= 1.5",
            ]
        )
    out.append(markdown_table(["comparison", "crac", "baseline", "ratio", "target"], rows))
    out.append("")

    def mibs(key: str, nbytes_key: str | None = None) -> str:
        vals = [
            (r[nbytes_key] if nbytes_key else size * MIB) / MIB / r[key] for r in recs if key in r
        ]
        return f"{statistics.median(vals):.0f} MiB/s" if vals else "n/a"

    details = [
        [
            "pause (program stopped: suspend + write to page cache)",
            f"{m['pause_ms']:.0f} ms",
            per_rep(recs, "pause_ms", digits=0),
        ],
        ["  suspend", f"{m['suspend_ms']:.1f} ms", per_rep(recs, "suspend_ms", digits=1)],
        ["  write upper.core", f"{m['write_ms']:.0f} ms", per_rep(recs, "write_ms", digits=0)],
        [
            "publish (after resume: fsync, SHA-256, manifest, rename)",
            f"{m['publish_ms']:.0f} ms",
            per_rep(recs, "publish_ms", digits=0),
        ],
        ["checkpoint total", fmt_s(m["ckpt_s"]), per_rep(recs, "ckpt_s")],
        [
            "SHA-256 of upper.core, warm cache (hashlib: what publish hashes)",
            fmt_s(m["sha256_warm_s"]),
            per_rep(recs, "sha256_warm_s"),
        ],
        ["plain write + fsync", fmt_s(m["plain_write_s"]), per_rep(recs, "plain_write_s")],
        [
            "  of which write to page cache",
            fmt_s(m["plain_write_nosync_s"]),
            per_rep(recs, "plain_write_nosync_s"),
        ],
        ["read upper.core, warm", fmt_s(m["read_warm_s"]), per_rep(recs, "read_warm_s")],
        ["restart, warm", fmt_s(m["restart_warm_s"]), per_rep(recs, "restart_warm_s")],
    ]
    if m.get("restart_cold_s") is not None:
        details += [
            ["read upper.core, cold", fmt_s(m["read_cold_s"]), per_rep(recs, "read_cold_s")],
            ["restart, cold", fmt_s(m["restart_cold_s"]), per_rep(recs, "restart_cold_s")],
        ]
    restart_less_cli = [r["restart_warm_s"] - r["cli_s"] for r in recs]
    details += [
        [
            "restart, warm, minus `crac --version`",
            fmt_s(statistics.median(restart_less_cli)),
            ", ".join(f"{v:.3f}" for v in restart_less_cli),
        ],
        [
            "read upper.core into fresh memory (mmap), warm",
            fmt_s(m["read_fresh_warm_s"]),
            per_rep(recs, "read_fresh_warm_s"),
        ],
    ]
    details += [
        [
            "`crac --version` (Python start-up inside restart)",
            fmt_s(m["cli_s"]),
            per_rep(recs, "cli_s"),
        ],
        ["throughput: checkpoint / plain write", f"{mibs('ckpt_s')} / {mibs('plain_write_s')}", ""],
        [
            "throughput: restart / read, warm",
            f"{mibs('restart_warm_s')} / {mibs('read_warm_s', 'read_bytes')}",
            "",
        ],
        [
            "VmRSS just before the checkpoint",
            fmt_mib(m["vmrss_bytes"]),
            per_rep(recs, "vmrss_bytes", 1 / MIB, 1),
        ],
        [
            "upper.core on disk (st_blocks * 512)",
            fmt_mib(m["core_disk_bytes"]),
            per_rep(recs, "core_disk_bytes", 1 / MIB, 1),
        ],
        ["upper.core apparent size (sparse)", fmt_mib(m["core_apparent_bytes"]), ""],
        ["generation directory on disk", fmt_mib(m["gen_disk_bytes"]), ""],
        ["image on disk / VmRSS", f"{r['image_over_rss']:.3f}", ""],
    ]
    out.append(markdown_table(["detail", "median", "per repetition"], details))
    out.append("")
    out.append(
        "Warm cache: the read and the warm restart find upper.core in the page cache (it was just "
        "written). " + doc["cold_note"]
    )
    if doc["retried"]:
        out.append(
            f"{doc['retried']} repetition(s) were run again after something outside the benchmark "
            "killed its program."
        )
    out.append(f"\ncommand: `{doc['command']}`")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048, help="memory the program fills (MiB)")
    ap.add_argument("--reps", "-n", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--dir", type=Path, default=None, help="where images and files go")
    ap.add_argument("--tick-ms", type=int, default=10, help="the program's tick interval")
    ap.add_argument("--device", default="sim", help="backend for crac launch (default sim)")
    ap.add_argument(
        "--memory",
        choices=["prefault", "settle", "none"],
        default="prefault",
        help="state of free memory before each timed step (default prefault; see above)",
    )
    ap.add_argument(
        "--settle-s", type=float, default=5, help="idle seconds for --memory settle (default 5)"
    )
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-cache pair")
    ap.add_argument("--timeout", type=float, default=300, help="seconds for any one wait")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    opts = ap.parse_args()
    if opts.size_mib < 1 or opts.reps < 1 or opts.tick_ms < 1 or opts.settle_s < 0:
        raise BenchError("--size-mib, --reps and --tick-ms must be at least 1, --settle-s >= 0")
    if missing_loader_message():
        raise BenchError(
            f"crac's native loader is not built ({loader_path()} is missing): run `pip install .` "
            "(or `python build_native.py`) first"
        )
    if opts.dir is not None and not opts.dir.is_dir():
        raise BenchError(f"--dir {opts.dir} is not a directory")

    nbytes = opts.size_mib * MIB
    work = Path(tempfile.mkdtemp(prefix="crac-bench-ckpt-", dir=opts.dir))
    try:
        free = shutil.disk_usage(work).free
        if free < 2 * nbytes + 1024 * MIB:
            raise BenchError(
                f"{work} has {free / MIB:.0f} MiB free; {2 * opts.size_mib + 1024} MiB needed "
                "(the image, the plain file, 1 GiB margin): use --dir or a smaller --size-mib"
            )
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) * 1024 for line in f if "MemAvailable" in line)
        need = 2 * nbytes + RANDOM_POOL + 512 * MIB
        if opts.memory == "prefault":
            need += 2 * nbytes + PREFAULT_EXTRA
        if avail < need:
            raise BenchError(
                f"only {avail / MIB:.0f} MiB of memory available; use a smaller --size-mib"
            )
        cold = not opts.no_cold and drop_caches()
        if opts.no_cold:
            cold_note = "Cold cache: not measured (--no-cold)."
        elif cold:
            cold_note = (
                "Cold cache: `sync; echo 3 > /proc/sys/vm/drop_caches` before each cold run (the "
                "cold restart also loads crac's Python and loader from disk)."
            )
        else:
            cold_note = "Cold cache: not measured (/proc/sys/vm/drop_caches is not writable)."
        # A snapshot of the native parts: a rebuild by someone else between a checkpoint and its
        # restart would make the restart refuse the image.
        snap = work / "native"
        shutil.copytree(native_dir(), snap, symlinks=True)
        os.environ["CRAC_NATIVE_DIR"] = str(snap)
        dirty = build_dirty(work)
        pool = os.urandom(min(RANDOM_POOL, nbytes))
        recs = []
        retried = 0
        for rep in range(opts.reps):
            print(f"{PROG}: repetition {rep + 1}/{opts.reps}...", file=sys.stderr, flush=True)
            for attempt in range(1, MAX_ATTEMPTS + 1):
                try:
                    recs.append(one_rep(rep, work, dirty, pool, opts, cold))
                    break
                except ExternalKill as exc:
                    if attempt == MAX_ATTEMPTS:
                        raise BenchError(f"{exc} ({MAX_ATTEMPTS} attempts)") from exc
                    retried += 1
                    print(f"{PROG}: repeating this repetition: {exc}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    keys = [k for k in recs[0] if isinstance(recs[0][k], (int, float)) and k != "rep"]
    medians = {k: med(recs, k) for k in keys}
    for k in ("read_cold_s", "restart_cold_s"):
        medians.setdefault(k, None)
    ratios = {
        "plain_over_ckpt": medians["plain_write_s"] / medians["ckpt_s"],
        "restart_over_read_warm": medians["restart_warm_s"] / medians["read_warm_s"],
        "restart_over_read_fresh_warm": medians["restart_warm_s"] / medians["read_fresh_warm_s"],
        "image_over_rss": medians["gen_disk_bytes"] / medians["vmrss_bytes"],
    }
    if cold:
        ratios["restart_over_read_cold"] = medians["restart_cold_s"] / medians["read_cold_s"]
    doc = {
        "command": command_line(),
        "size_mib": opts.size_mib,
        "reps": opts.reps,
        "tick_ms": opts.tick_ms,
        "memory_prep": memory_note(opts),
        "retried": retried,
        "filesystem": filesystem_of(opts.dir or Path(tempfile.gettempdir())),
        "kernel": platform.release(),
        "commit": git_commit(),
        "cpus": os.cpu_count(),
        "cold_cache": cold,
        "cold_note": cold_note,
        "medians": medians,
        "ratios": ratios,
        "reps_data": recs,
    }
    print(json.dumps(doc, indent=2) if opts.json else report(doc))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
