"""crac beside CRIU and DMTCP: the same program checkpointed and restarted by each, in the same run.

    python bench/peers.py [--sizes 256,2048] [--data random,text,threads8] [--reps 3]
                          [--tools crac,criu,dmtcp] [--criu PATH] [--dmtcp DIR]
                          [--build-peers DIR] [--dir DIR] [--tick-ms 10] [--cold] [--json FILE]
                          [--hog N] [--crac-buffered] [--baseline-crac NATIVE_DIR] [--no-restart]

The program is bench/apps/peer_data.c (built here with gcc): it fills SIZE MiB with random or
text data (`threads8`: random data filled by 8 threads, which then stay alive), then appends
`tick N NS` to a file every TICK_MS ms. Every tool reopens that file at restore, so the tick times
measure every tool the same way:

* checkpoint: from the request to the tool saying it is done (crac: its `latest` link moves, which
  it publishes after fsync; CRIU: `criu dump --leave-running` returns; DMTCP: `dmtcp_command -bc`
  returns);
* durable: checkpoint plus `sync -f` of the image directory (crac's already includes its fsync,
  so its sync finds nothing left to write);
* pause: the longest gap between two ticks around the checkpoint, less TICK_MS;
* restart: from starting the restore command to the first tick the restored program writes
  (warm page cache: the image is read once first, as a writer past the page cache leaves it on
  disk only; `--cold` adds a run after dropping caches where /proc/sys/vm/drop_caches is
  writable);
* CPU: user+system seconds of the program (with its children, reaped or not: crac's forked
  writer) and of the tool's commands
  during the checkpoint;
* machine CPU: busy time of every CPU (/proc/stat) from the request to durable, less the
  machine's busy rate over the 0.5 s before it: what the checkpoint cost the machine, the
  writeback the kernel's flusher threads do for `sync` included (a peer's image reaches the disk
  there, crac's mostly in its own writer, so "ckpt CPU" alone flatters the peers); only on a
  machine with nothing else running (not shown with `--hog`);
* image: bytes allocated on disk;
* writer CPU (crac): its forked writer's user+system time, from its CRAC_TIMING line;
* ticks during/before: the program's tick rate from the request to durable over its rate in as
  long a span before (1 = the program ran undisturbed).

Variants and load: `--crac-buffered` adds crac with CRAC_DIRECT_WRITE=0 (its writer through the
page cache instead of O_DIRECT by reference), `--baseline-crac NATIVE_DIR` crac with another
build's loader (CRAC_NATIVE_DIR, e.g. main's `crac_py/_native`; with `--crac-buffered` also that
build with CRAC_DIRECT_WRITE=0), `--hog N`
runs N `yes` processes beside everything, `--no-restart` measures checkpoints only.

Floors measured in the same repetition: `dd` of SIZE MiB of the same data (the program writes
its filled buffer to a file when TICK_MS is 0) plus fsync
(write floor), `dd if=/dev/zero oflag=direct conv=fsync` of as many bytes (the disk's floor
without the page cache), each with its CPU time, a sequential read of the tool's image (read
floor, after each restart), and `zstd -1` of the text data (compression floor) when zstd is
installed.

Peers: CRIU >= 4.1 (Debian 12's 3.17 fails on kernels whose vDSO has a separate vvar_vclock
mapping) from --criu, $CRIU, `criu` on PATH, or DIR/criu-*/criu/criu after --build-peers DIR,
which builds it from Debian trixie's source tarball with a private apt configuration (nothing is
added to /etc/apt; needs root for the build dependencies). DMTCP from --dmtcp DIR (its build
tree or install prefix with bin/dmtcp_launch), $DMTCP_ROOT, or PATH; Debian has no package, so
it is never built here: build it from its git sources with `./configure && make`. A peer that
cannot be found or fails its own check is skipped with the reason printed; the table says so.

Variants are interleaved (tool order rotated every repetition); medians and every repetition
are printed. Never asserts on time.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    CFLAGS,
    REPO,
    BenchError,
    Hog,
    command_line,
    crac_cmd,
    disk_bytes,
    drop_caches,
    markdown_table,
    missing_loader_message,
    prefault_and_free,
)

APP_SRC = REPO / "bench" / "apps" / "peer_data.c"
MIB = 1 << 20
PREFAULT_EXTRA = 256 * MIB
POLL_S = 0.002
IDLE_SPAN_S = 0.5  # the machine's busy rate before a checkpoint, taken off its machine CPU
TICK_RE = re.compile(rb"^(ready|tick) (\d+) (\d+)$", re.M)
PR_SET_CHILD_SUBREAPER = 36
DATA_KINDS = {"random": ("random", 1), "text": ("text", 1), "threads8": ("random", 8)}
_CKPT_ENV_PREFIXES = ("CRAC_", "DMTCP_")
WRITER_CPU_RE = re.compile(
    r"crac: timing: generation \d+: .*, writer cpu (\d+) ms, .*writer forked"
)


def run(cmd: list[str], timeout: float, what: str, **kw) -> subprocess.CompletedProcess:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{what}: timed out after {timeout:.0f} s ({shlex.join(cmd)})") from exc
    except OSError as exc:
        raise BenchError(f"{what}: cannot run {shlex.join(cmd)}: {exc}") from exc
    if res.returncode != 0:
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-4:])
        raise BenchError(f"{what}: {shlex.join(cmd)} exited {res.returncode}: {tail}")
    return res


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of PID in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """Seconds every CPU has spent busy since boot (/proc/stat: all but idle and iowait; guest
    time is inside user time already)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """proc_cpu of PID and of its children still there (running or not yet reaped): crac's
    forked image writer is the program's child, and may not be reaped when the checkpoint is
    published, so cutime alone would miss its work."""
    total = proc_cpu(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return total
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        total += sum(tree_cpu(k) for k in kids)
    return total


def read_tree(path: Path) -> float:
    """Seconds to read every regular file under PATH sequentially."""
    buf = bytearray(8 * MIB)
    t0 = time.perf_counter()
    for root, _dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(root, name)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass
    return time.perf_counter() - t0


def ticks(tickfile: Path) -> list[int]:
    """The times (ns) of every `ready`/`tick` line so far."""
    try:
        data = tickfile.read_bytes()
    except FileNotFoundError:
        return []
    return [int(m.group(3)) for m in TICK_RE.finditer(data)]


def wait_tick_after(tickfile: Path, after_ns: int, timeout: float, what: str, alive) -> int:
    deadline = time.monotonic() + timeout
    while True:
        later = [t for t in ticks(tickfile) if t > after_ns]
        if later:
            return later[0]
        if not alive():
            raise BenchError(f"{what}: the program ended before it ticked")
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: no tick within {timeout:.0f} s")
        time.sleep(POLL_S)


def pause_ms(tickfile: Path, start_ns: int, end_ns: int, tick_ms: int) -> float:
    """The longest gap between consecutive ticks that overlaps [start, end], less one period."""
    times = ticks(tickfile)
    gaps = [b - a for a, b in zip(times, times[1:]) if b >= start_ns and a <= end_ns]
    return max(0.0, (max(gaps) / 1e6 - tick_ms)) if gaps else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(_CKPT_ENV_PREFIXES)}


class Running:
    """A process the benchmark started (or adopted as subreaper): killed and reaped at the end."""

    def __init__(self, pid: int, popen: subprocess.Popen | None = None):
        self.pid = pid
        self.popen = popen

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            got, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return os.path.exists(f"/proc/{self.pid}")
        return got == 0

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.popen is not None:
            self.popen.wait(timeout=60)
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                got, _ = os.waitpid(self.pid, os.WNOHANG)
                if got:
                    return
            except ChildProcessError:
                if not os.path.exists(f"/proc/{self.pid}"):
                    return
            time.sleep(0.01)
        raise BenchError(f"pid {self.pid} survives SIGKILL for 60 s")


@dataclass
class Tool:
    """One checkpointer: how it launches, checkpoints and restores the program."""

    name: str
    skip: str | None = None

    def launch(self, work: Path, argv: list[str]) -> Running:
        raise NotImplementedError

    def checkpoint(self, work: Path, prog: Running) -> None:
        raise NotImplementedError

    def restore(self, work: Path) -> Running:
        raise NotImplementedError

    def images(self, work: Path) -> Path:
        return work / "images"

    def finish(self, work: Path) -> None:
        pass


def popen(argv: list[str], work: Path, log: str, env: dict[str, str] | None = None):
    with open(work / log, "ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work,
            env=env or clean_env(),
            start_new_session=True,
        )


class Crac(Tool):
    """crac; NAME and ENV_EXTRA make variants side by side: CRAC_DIRECT_WRITE=0 (--crac-buffered),
    another build's loader via CRAC_NATIVE_DIR (--baseline-crac)."""

    def __init__(self, name: str = "crac", env_extra: dict[str, str] | None = None):
        super().__init__(name, missing_loader_message())
        self.cmd = crac_cmd()
        self.env = {**clean_env(), "CRAC_TIMING": "1", **(env_extra or {})}

    def launch(self, work, argv):
        p = popen(
            [*self.cmd, "launch", "-c", str(self.images(work)), "--", *argv],
            work,
            "crac.log",
            self.env,
        )
        return Running(p.pid, p)

    def writer_cpu_ms(self, work: Path) -> float | None:
        """The forked writer's CPU time of the last checkpoint (its CRAC_TIMING line)."""
        try:
            found = WRITER_CPU_RE.findall((work / "crac.log").read_text(errors="replace"))
        except OSError:
            return None
        return float(found[-1]) if found else None

    def _latest(self, work: Path) -> str | None:
        links = glob.glob(str(self.images(work) / "ckpt_*" / "latest"))
        return os.readlink(links[0]) if links else None

    def checkpoint(self, work, prog):
        before = self._latest(work)
        os.kill(prog.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 600
        while self._latest(work) == before:
            if not prog.alive():
                raise BenchError(f"crac: the program ended during the checkpoint ({work}/crac.log)")
            if time.monotonic() > deadline:
                raise BenchError("crac: checkpoint not published within 600 s")
            time.sleep(POLL_S)

    def restore(self, work):
        p = popen([*self.cmd, "restart", str(self.images(work))], work, "crac.log", self.env)
        return Running(p.pid, p)


class Criu(Tool):
    def __init__(self, path: str | None):
        super().__init__("CRIU")
        self.path = path
        if path is None:
            self.skip = "not found (--criu, $CRIU, PATH, or --build-peers DIR)"
            return
        ver = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"Version: (\d+)\.(\d+)", ver)
        if not m or (int(m.group(1)), int(m.group(2))) < (4, 1):
            self.skip = f"{path} is not CRIU >= 4.1 ({ver.strip() or 'no version'})"
            return
        check = subprocess.run([path, "check"], capture_output=True, text=True)
        if check.returncode != 0:
            tail = " | ".join(check.stderr.strip().splitlines()[-2:])
            self.skip = f"`{path} check` fails here: {tail}"
        self.name = f"CRIU {m.group(1)}.{m.group(2)}"

    def launch(self, work, argv):
        p = popen(argv, work, "criu-prog.log")
        return Running(p.pid, p)

    def checkpoint(self, work, prog):
        self.images(work).mkdir(exist_ok=True)
        d = str(self.images(work))
        run(
            [self.path, "dump", "-t", str(prog.pid), "-D", d, "-o", "dump.log", "--leave-running"],
            600,
            "criu dump",
        )

    def restore(self, work):
        d = str(self.images(work))
        run(
            [
                self.path,
                "restore",
                "-D",
                d,
                "-o",
                "restore.log",
                "-d",
                "--pidfile",
                str(work / "restored.pid"),
            ],
            600,
            "criu restore",
        )
        return Running(int((work / "restored.pid").read_text().strip()))


class Dmtcp(Tool):
    def __init__(self, root: str | None):
        super().__init__("DMTCP")
        self.bin = None
        if root is None:
            self.skip = "not found (--dmtcp DIR, $DMTCP_ROOT, or dmtcp_launch on PATH)"
            return
        self.bin = Path(root) / "bin"
        if not (self.bin / "dmtcp_launch").is_file():
            self.skip = f"{self.bin}/dmtcp_launch is missing"

    def _port(self, work: Path) -> str:
        return (work / "dmtcp.port").read_text().strip()

    def launch(self, work, argv):
        port = str(free_port())
        (work / "dmtcp.port").write_text(port)
        self.images(work).mkdir(exist_ok=True)
        run(
            [
                str(self.bin / "dmtcp_coordinator"),
                "--daemon",
                "-p",
                port,
                "--ckptdir",
                str(self.images(work)),
            ],
            60,
            "dmtcp_coordinator",
            cwd=work,
        )
        p = popen(
            [
                str(self.bin / "dmtcp_launch"),
                "-p",
                port,
                "--no-gzip",
                "--ckptdir",
                str(self.images(work)),
                *argv,
            ],
            work,
            "dmtcp.log",
        )
        return Running(p.pid, p)

    def checkpoint(self, work, prog):
        run([str(self.bin / "dmtcp_command"), "-p", self._port(work), "-bc"], 600, "dmtcp -bc")

    def restore(self, work):
        images = sorted(glob.glob(str(self.images(work) / "ckpt_*.dmtcp")))
        if not images:
            raise BenchError(f"DMTCP wrote no ckpt_*.dmtcp in {self.images(work)}")
        p = popen(
            [str(self.bin / "dmtcp_restart"), "-p", self._port(work), images[-1]], work, "dmtcp.log"
        )
        return Running(p.pid, p)

    def finish(self, work):
        if (work / "dmtcp.port").exists():
            subprocess.run(
                [str(self.bin / "dmtcp_command"), "-p", self._port(work), "--quit"],
                capture_output=True,
                timeout=60,
            )


@dataclass
class Sample:
    values: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    def add(self, key: str, v: float) -> None:
        self.values.setdefault(key, []).append(v)


def cycle(tool: Tool, exe: Path, size: int, kind: str, opts, base: Path, s: Sample) -> None:
    data, threads = DATA_KINDS[kind]
    work = Path(tempfile.mkdtemp(prefix=f"{tool.name.split()[0].lower()}-", dir=base))
    tickfile = work / "ticks"
    argv = [str(exe), str(size), data, str(threads), str(opts.tick_ms), str(tickfile)]
    prog = restored = None
    try:
        prog = tool.launch(work, argv)
        wait_tick_after(tickfile, 0, 600, f"{tool.name}: launch", prog.alive)
        prefault_and_free(2 * size * MIB + PREFAULT_EXTRA)
        idle0 = machine_busy()
        time.sleep(IDLE_SPAN_S)
        idle1 = machine_busy()
        cpu0, ccpu0 = tree_cpu(prog.pid), children_cpu()
        t0 = time.time_ns()
        tool.checkpoint(work, prog)
        t1 = time.time_ns()
        cpu = tree_cpu(prog.pid) - cpu0 + children_cpu() - ccpu0
        run(["sync", "-f", str(tool.images(work))], 600, "sync")
        t2 = time.time_ns()
        busy = machine_busy() - idle1 - (idle1 - idle0) / IDLE_SPAN_S * (t2 - t0) / 1e9
        wait_tick_after(tickfile, t1, 600, f"{tool.name}: after checkpoint", prog.alive)
        s.add("checkpoint_s", (t1 - t0) / 1e9)
        s.add("durable_s", (t2 - t0) / 1e9)
        s.add("pause_ms", pause_ms(tickfile, t0, t1, opts.tick_ms))
        s.add("cpu_s", cpu)
        if not opts.hog:
            s.add("machine_cpu_s", busy)
        s.add("image_mib", disk_bytes(tool.images(work)) / MIB)
        s.add("tick_ratio", tick_ratio(tickfile, t0, t2))
        if isinstance(tool, Crac):
            deadline = time.monotonic() + 60  # the timing line follows the publish
            while (ms := tool.writer_cpu_ms(work)) is None and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if ms is not None:
                s.add("writer_cpu_ms", ms)
        prog.kill()
        prog = None
        runs = [("restart_s", False)] + ([("restart_cold_s", True)] if opts.cold else [])
        if opts.no_restart:
            runs = []
        for key, cold in runs:
            if cold and not drop_caches():
                continue
            if not cold:
                prefault_and_free(2 * size * MIB + PREFAULT_EXTRA)
                read_tree(tool.images(work))  # warm: whatever way the tool wrote its image
            t3 = time.time_ns()
            restored = tool.restore(work)
            first = wait_tick_after(tickfile, t3, 600, f"{tool.name}: restart", restored.alive)
            s.add(key, (first - t3) / 1e9)
            restored.kill()
            restored = None
        s.add("read_image_s", read_tree(tool.images(work)))
    except BenchError as exc:
        s.error = str(exc)
    finally:
        for p in (prog, restored):
            if p is not None:
                try:
                    p.kill()
                except BenchError:
                    pass
        tool.finish(work)
        shutil.rmtree(work, ignore_errors=True)


def tick_ratio(tickfile: Path, start_ns: int, end_ns: int) -> float:
    """The program's tick rate while the checkpoint ran (request to durable) over its rate in as
    long a span just before (from its first tick at the earliest): 1 = undisturbed."""
    times = ticks(tickfile)
    span = end_ns - start_ns
    lo = max(times[0] if times else start_ns, start_ns - span)
    during = sum(start_ns <= t <= end_ns for t in times) / max(span, 1)
    before = sum(lo <= t < start_ns for t in times) / max(start_ns - lo, 1)
    return during / before if before else float("nan")


def dd_timed(argv: list[str]) -> tuple[float, float]:
    """(seconds, CPU seconds) of one dd."""
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    run(argv, 600, "dd")
    return time.perf_counter() - t0, children_cpu() - cpu0


def direct_floor(size: int, base: Path) -> tuple[float, float]:
    """dd of SIZE MiB of zeros with O_DIRECT, then fsync: the disk's own speed, no page cache."""
    dst = base / "floor-direct.dst"
    prefault_and_free(2 * size * MIB + PREFAULT_EXTRA)
    argv = ["dd", "if=/dev/zero", f"of={dst}", "bs=8M", f"count={max(1, size // 8)}"]
    out = dd_timed([*argv, "oflag=direct", "conv=fsync", "status=none"])
    dst.unlink()
    return out


def write_floor(exe: Path, size: int, kind: str, base: Path) -> tuple[float, float]:
    """dd + fsync of SIZE MiB of the same kind of data (made by the program itself, untimed):
    (seconds, CPU seconds)."""
    data, _ = DATA_KINDS[kind]
    src = base / f"floor-{kind}.src"
    if not src.exists():
        make_sample(exe, src, size, data)
    dst = base / "floor.dst"
    prefault_and_free(2 * size * MIB + PREFAULT_EXTRA)
    out = dd_timed(["dd", f"if={src}", f"of={dst}", "bs=8M", "conv=fsync", "status=none"])
    dst.unlink()
    return out


def make_sample(exe: Path, path: Path, size: int, data: str) -> None:
    """SIZE MiB of the data the program holds, written by the program itself (TICK_MS 0)."""
    run([str(exe), str(size), data, "1", "0", str(path)], 600, "peer_data (sample)")


def zstd_floor(base: Path, size: int) -> tuple[float, float] | None:
    """Seconds and output MiB of `zstd -1 -T0` on the text sample, when zstd is installed."""
    zstd = shutil.which("zstd")
    src = base / "floor-text.src"
    if not zstd or not src.exists():
        return None
    out = base / "floor.zst"
    t0 = time.perf_counter()
    run([zstd, "-1", "-T0", "-q", "-f", str(src), "-o", str(out)], 600, "zstd")
    dt = time.perf_counter() - t0
    mib = out.stat().st_size / MIB
    out.unlink()
    return dt, mib


def find_criu(opts) -> str | None:
    for cand in (opts.criu, os.environ.get("CRIU")):
        if cand:
            return cand
    if opts.build_peers:
        built = sorted(glob.glob(str(Path(opts.build_peers) / "criu-*" / "criu" / "criu")))
        if built:
            return built[-1]
    return shutil.which("criu")


def find_dmtcp(opts) -> str | None:
    for cand in (opts.dmtcp, os.environ.get("DMTCP_ROOT")):
        if cand:
            return cand
    launch = shutil.which("dmtcp_launch")
    return str(Path(launch).resolve().parent.parent) if launch else None


def build_criu(dest: Path) -> None:
    """CRIU 4.1.1 from Debian trixie's source tarball, with a private apt configuration."""
    if glob.glob(str(dest / "criu-*" / "criu" / "criu")):
        return
    dest.mkdir(parents=True, exist_ok=True)
    apt = dest / "aptlocal"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    mirror = "http://deb.debian.org/debian"
    for src in glob.glob("/etc/apt/sources.list.d/*.sources") + ["/etc/apt/sources.list"]:
        try:
            m = re.search(r"(?:URIs:\s*|deb\s+)(\S+/debian)\b", Path(src).read_text())
        except OSError:
            continue
        if m:
            mirror = m.group(1)
            break
    (apt / "sources.list").write_text(f"deb-src {mirror} trixie main\n")
    aptopt = [
        f"-oDir::Etc::SourceList={apt}/sources.list",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={apt}/lists",
        f"-oDir::Cache={apt}/cache",
    ]
    run(["apt-get", *aptopt, "update"], 600, "apt-get update (trixie sources)")
    # The .dsc may be gone from the mirror while the upstream tarball is still there.
    subprocess.run(
        ["apt-get", *aptopt, "source", "--download-only", "criu=4.1.1-1"],
        cwd=dest,
        capture_output=True,
        timeout=600,
    )
    tarballs = sorted(dest.glob("criu_4.1*.orig.tar.*"))
    if not tarballs:
        raise BenchError("CRIU: the criu 4.1 source tarball could not be downloaded")
    deps = (
        "libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev protobuf-compiler libnl-3-dev "
        "libnet1-dev libcap-dev libbsd-dev pkg-config uuid-dev python3-protobuf "
        "libgnutls28-dev libnftables-dev"
    ).split()
    run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *deps],
        1200,
        "CRIU build dependencies",
    )
    run(["tar", "xf", str(tarballs[-1])], 600, "untar CRIU", cwd=dest)
    tree = sorted(p for p in dest.glob("criu-4.1*") if p.is_dir())[-1]
    run(["make", "-C", str(tree), f"-j{os.cpu_count() or 2}", "criu"], 3600, "make criu")


def build_app(out_dir: Path) -> Path:
    out = out_dir / "peer_data"
    run(["gcc", *CFLAGS, "-o", str(out), str(APP_SRC)], 120, f"build {APP_SRC.name}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,2048", help="MiB, comma-separated")
    ap.add_argument("--data", default="random,text,threads8", help=",".join(DATA_KINDS))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tools", default="crac,criu,dmtcp")
    ap.add_argument("--criu")
    ap.add_argument("--dmtcp")
    ap.add_argument("--build-peers", metavar="DIR", help="build CRIU 4.1.1 into DIR if missing")
    ap.add_argument("--dir", help="where images go (a real disk, not tmpfs)")
    ap.add_argument("--tick-ms", type=int, default=10)
    ap.add_argument("--cold", action="store_true", help="also restart after dropping caches")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--hog", type=int, default=0, metavar="N", help="N `yes` CPU hogs beside")
    ap.add_argument(
        "--crac-buffered", action="store_true", help="also crac with CRAC_DIRECT_WRITE=0"
    )
    ap.add_argument(
        "--baseline-crac",
        metavar="DIR",
        help="also crac with another build's loader (CRAC_NATIVE_DIR=DIR), e.g. main's",
    )
    ap.add_argument("--no-restart", action="store_true", help="measure checkpoints only")
    opts = ap.parse_args()
    try:
        sizes = [int(x) for x in opts.sizes.split(",")]
        kinds = opts.data.split(",")
        bad = [k for k in kinds if k not in DATA_KINDS]
        if bad or any(s < 1 for s in sizes):
            raise ValueError
    except ValueError:
        print(
            f"peers.py: bad --sizes/--data (data kinds: {', '.join(DATA_KINDS)})", file=sys.stderr
        )
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # CRIU's detached restores become ours to reap
    try:
        if opts.build_peers:
            try:
                build_criu(Path(opts.build_peers).resolve())
            except BenchError as exc:
                print(f"peers.py: {exc}", file=sys.stderr)
        tools: list[Tool] = []
        wanted = opts.tools.split(",")
        if opts.baseline_crac:
            native = str(Path(opts.baseline_crac).resolve())
            tools.append(Crac("crac base", {"CRAC_NATIVE_DIR": native}))
            if opts.crac_buffered:  # another build's page-cache writer beside this one's
                buffered = {"CRAC_NATIVE_DIR": native, "CRAC_DIRECT_WRITE": "0"}
                tools.append(Crac("crac base buffered", buffered))
        if "crac" in wanted:
            tools.append(Crac())
        if opts.crac_buffered:
            tools.append(Crac("crac buffered", {"CRAC_DIRECT_WRITE": "0"}))
        if "criu" in wanted:
            tools.append(Criu(find_criu(opts)))
        if "dmtcp" in wanted:
            tools.append(Dmtcp(find_dmtcp(opts)))
        for t in tools:
            if t.skip:
                print(f"peers.py: skipping {t.name}: {t.skip}", file=sys.stderr)
        active = [t for t in tools if not t.skip]
        base = Path(tempfile.mkdtemp(prefix="crac-peers-", dir=opts.dir))
        results: dict[str, dict] = {}
        try:
            exe = build_app(base)
            with Hog(opts.hog > 0, opts.hog):
                for size in sizes:
                    for kind in kinds:
                        key = f"{size} MiB {kind}"
                        per_tool = {t.name: Sample() for t in active}
                        floor = Sample()
                        for rep in range(opts.reps):
                            secs, cpu = write_floor(exe, size, kind, base)
                            floor.add("write_floor_s", secs)
                            floor.add("write_floor_cpu_s", cpu)
                            secs, cpu = direct_floor(size, base)
                            floor.add("direct_floor_s", secs)
                            floor.add("direct_floor_cpu_s", cpu)
                            z = zstd_floor(base, size) if kind == "text" else None
                            if z:
                                floor.add("zstd_s", z[0])
                                floor.add("zstd_mib", z[1])
                            order = active[rep % len(active) :] + active[: rep % len(active)]
                            for t in order:
                                if per_tool[t.name].error is None:
                                    cycle(t, exe, size, kind, opts, base, per_tool[t.name])
                            print(
                                f"  {key}: repetition {rep + 1}/{opts.reps} done", file=sys.stderr
                            )
                        for f in base.glob("floor-*.src"):
                            f.unlink()
                        results[key] = {"floor": floor, **per_tool}
        finally:
            shutil.rmtree(base, ignore_errors=True)
    except BenchError as exc:
        print(f"peers.py: {exc}", file=sys.stderr)
        return 1
    report(results, tools, opts)
    return 0


COLUMNS = [
    ("checkpoint_s", "checkpoint (s)"),
    ("durable_s", "durable (s)"),
    ("pause_ms", "pause (ms)"),
    ("cpu_s", "ckpt CPU (s)"),
    ("machine_cpu_s", "machine CPU (s)"),
    ("writer_cpu_ms", "writer CPU (ms)"),
    ("tick_ratio", "ticks during/before"),
    ("restart_s", "restart warm (s)"),
    ("restart_cold_s", "restart cold (s)"),
    ("image_mib", "image (MiB)"),
    ("read_image_s", "read image (s)"),
]


def fmt(vals: list[float] | None) -> str:
    if not vals:
        return "—"
    med = statistics.median(vals)
    each = "/".join(f"{v:.3g}" for v in vals)
    return f"**{med:.3g}** ({each})" if len(vals) > 1 else f"{med:.3g}"


def report(results: dict, tools: list[Tool], opts) -> None:
    load = os.getloadavg()
    commit = (
        subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or "?"
    )
    print(
        f"\n`{command_line()}` — commit {commit}, {platform.node()}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; "
        f"medians in bold, then each repetition\n"
    )
    for key, per in results.items():
        floor = per["floor"]
        extra = ""
        if floor.values.get("zstd_s"):
            extra = (
                f"; `zstd -1 -T0` {fmt(floor.values['zstd_s'])} s → "
                f"{fmt(floor.values['zstd_mib'])} MiB"
            )
        fv = floor.values
        print(
            f"### {key}: `dd`+fsync {fmt(fv.get('write_floor_s'))} s, CPU "
            f"{fmt(fv.get('write_floor_cpu_s'))} s; `dd oflag=direct` of zeros "
            f"{fmt(fv.get('direct_floor_s'))} s, CPU {fmt(fv.get('direct_floor_cpu_s'))} s"
            f"{extra}\n"
        )
        rows = []
        for name, s in per.items():
            if name == "floor":
                continue
            if s.error:
                rows.append([name, f"failed: {s.error}"] + [""] * (len(COLUMNS) - 1))
            else:
                rows.append([name] + [fmt(s.values.get(k)) for k, _ in COLUMNS])
        for t in tools:
            if t.skip:
                rows.append([t.name, f"skipped: {t.skip}"] + [""] * (len(COLUMNS) - 1))
        print(markdown_table(["tool"] + [h for _, h in COLUMNS], rows) + "\n")
    if opts.json:
        out = {
            key: {name: {"error": s.error, **s.values} for name, s in per.items()}
            for key, per in results.items()
        }
        Path(opts.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    sys.exit(main())
