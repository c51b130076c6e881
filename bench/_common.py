"""Shared helpers for the benchmarks: find crac and its loader, build tests/apps, time commands.

Benchmarks measure side by side in one run (interleaved repetitions, medians) and print ratios;
they never assert on time (docs/ARCHITECTURE.md "Testing").
"""

from __future__ import annotations

import mmap
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APPS_DIR = REPO / "tests" / "apps"
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]


class BenchError(RuntimeError):
    """A benchmark cannot run; the message says why and what to do."""


def _import_crac_py():
    try:
        import crac_py
    except ImportError:
        sys.path.insert(0, str(REPO))  # running from a source tree without `pip install .`
        import crac_py
    return crac_py


def native_dir() -> Path:
    override = os.environ.get("CRAC_NATIVE_DIR")
    if override:
        return Path(override)
    return Path(_import_crac_py().__file__).resolve().parent / "_native"


def loader_path() -> Path:
    return native_dir() / "crac-loader"


def missing_loader_message() -> str | None:
    """None when the loader is built, else a clear message."""
    path = loader_path()
    if path.is_file() and os.access(path, os.X_OK):
        return None
    return (
        f"crac's native loader is not built ({path} is missing): run `pip install .` "
        "(or `python build_native.py`) first; only the native baselines were measured"
    )


def loader_cmd(program: str, *args: str, device: str = "sim") -> list[str]:
    """The loader invoked directly, with the argument convention `crac launch` uses when it
    execs the loader (crac_py/cli/main.py)."""
    return [str(loader_path()), "--device", device, "--argv0", program, "--", program, *args]


def crac_cmd() -> list[str]:
    """The `crac` CLI of this Python: its console script if installed next to the interpreter,
    else `python -m crac_py` (with the source tree on sys.path when it is not installed)."""
    script = Path(sys.executable).parent / "crac"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    probe = subprocess.run(
        [sys.executable, "-c", "import crac_py"], cwd="/", capture_output=True, timeout=60
    )
    if probe.returncode == 0:
        return [sys.executable, "-m", "crac_py"]
    root = str(Path(_import_crac_py().__file__).resolve().parent.parent)
    boot = f"import sys; sys.path.insert(0, {root!r}); from crac_py.cli.main import main; main()"
    return [sys.executable, "-c", boot]


def crac_launch_cmd(program: str, *args: str, device: str = "sim") -> list[str]:
    return [*crac_cmd(), "launch", "--device", device, "--", program, *args]


def build_apps(names: list[str], out_dir: Path) -> dict[str, Path]:
    """Compiles tests/apps/NAME.c for each name into out_dir."""
    built = {}
    for name in names:
        out = out_dir / name
        cmd = ["gcc", *CFLAGS, "-o", str(out), str(APPS_DIR / f"{name}.c"), "-ldl"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise BenchError(f"cannot build {name}: {shlex.join(cmd)}\n{res.stderr}")
        built[name] = out
    return built


def build_program(src: Path, out_dir: Path) -> Path:
    """Compiles SRC (a benchmark's own program, bench/apps/*.c) into OUT_DIR/<its stem>."""
    exe = out_dir / src.stem
    cmd = ["gcc", *CFLAGS, "-o", str(exe), str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise BenchError(f"cannot build {src.name}:\n{res.stderr}")
    return exe


def clean_env() -> dict[str, str]:
    """This environment without crac's and DMTCP's settings: the benchmark chooses them."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CRAC_", "DMTCP_"))}


def wait_line(p: subprocess.Popen, prefix: bytes, timeout: float = 600.0) -> None:
    """Reads P's stdout (a pipe) until a line starts with PREFIX."""
    assert p.stdout is not None
    deadline = time.monotonic() + timeout
    for line in p.stdout:
        if line.startswith(prefix):
            return
        if time.monotonic() > deadline:
            break
    raise BenchError(f"the program never printed {prefix!r} (exit {p.poll()})")


def timed_restart(
    ckdir: Path, what: str, timeout: float = 600.0, native_dir: str | None = None
) -> float:
    """Seconds from `crac restart CKDIR` to the restarted program's first `tick` line (all its
    memory is back by then); the restarted program is killed. WHAT names the image in errors.
    NATIVE_DIR: restarted by that build's loader instead (CRAC_NATIVE_DIR; `--force`, as the image
    was written by another build)."""
    env, force = clean_env(), []
    if native_dir:
        env["CRAC_NATIVE_DIR"], force = native_dir, ["--force"]
    t0 = time.perf_counter()
    r = subprocess.Popen(
        [*crac_cmd(), "restart", *force, str(ckdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        wait_line(r, b"tick", timeout)
        return time.perf_counter() - t0
    except BenchError as exc:
        r.kill()
        err = r.communicate(timeout=60)[1].decode(errors="replace").replace("\r", "\n")
        last = [ln.strip() for ln in err.splitlines() if ln.strip()][-3:]
        raise BenchError(f"restart of {what}: {exc}: {' | '.join(last)}") from None
    finally:
        r.kill()
        r.wait(timeout=60)


def run_header(medians_of: int) -> str:
    """The line a benchmark's report starts with: its command, the commit, the machine's load."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"`{command_line()}` — commit {commit}, load average {os.getloadavg()[0]:.1f}, "
        f"{os.cpu_count()} CPUs, {platform.release()}, medians of {medians_of}\n"
    )


@dataclass
class Variant:
    """One command timed repeatedly."""

    name: str
    cmd: list[str]
    samples: list[float] = field(default_factory=list)  # seconds
    stdout: bytes | None = None
    error: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)


def run_once(v: Variant, timeout: float) -> None:
    """Times one run of v; on failure records v.error and stops timing it."""
    t0 = time.perf_counter()
    try:
        res = subprocess.run(v.cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        v.error = f"timed out after {timeout:.0f} s"
        return
    except OSError as exc:
        v.error = f"cannot run: {exc}"
        return
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        tail = res.stderr.decode(errors="replace").strip().splitlines()[-3:]
        v.error = f"exit status {res.returncode}: " + " | ".join(tail)
        return
    if v.stdout is not None and res.stdout != v.stdout:
        v.error = "output differs between repetitions or from the native run"
        return
    v.stdout = res.stdout
    v.samples.append(elapsed)


def measure(variants: list[Variant], reps: int, timeout: float, warmup: int = 1) -> None:
    """Interleaves the variants (round-robin) so they see the same machine conditions."""
    for i in range(warmup + reps):
        for v in variants:
            if v.error is None:
                samples = len(v.samples)
                run_once(v, timeout)
                if i < warmup and v.error is None:
                    del v.samples[samples:]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def command_line() -> str:
    return shlex.join([Path(sys.executable).name, *sys.argv])


def prefault_and_free(nbytes: int) -> None:
    """Touches and frees NBYTES of MADV_HUGEPAGE memory, after a sync: on the development VM,
    filling the page cache ran at 300-450 MiB/s or at 2-4 GiB/s depending on what had been freed
    just before, for crac and for the baselines alike (bench/ckpt.py's docstring). Call it before
    every timed step so each starts from the same state."""
    os.sync()
    mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                mm.madvise(mmap.MADV_HUGEPAGE)  # frees whole 2 MiB blocks
            except OSError:
                pass
        for off in range(0, nbytes, mmap.PAGESIZE):
            mm[off] = 1
    finally:
        mm.close()


def disk_bytes(path: Path) -> int:
    """Allocated bytes (st_blocks * 512) of a file, or of every file under a directory."""
    if path.is_file():
        return path.stat().st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def drop_caches() -> bool:
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    return True


class Hog:
    """`yes > /dev/null` processes beside the measured run (the "CPU hog beside" mode): COUNT of
    them, or one per CPU when COUNT is None; none when ON is false."""

    def __init__(self, on: bool = True, count: int | None = None):
        self.n = ((os.cpu_count() or 1) if count is None else count) if on else 0
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Hog:
        for _ in range(self.n):
            self.procs.append(
                subprocess.Popen(
                    ["yes"],
                    stdout=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=60)
