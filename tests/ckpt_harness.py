"""Helpers for the checkpoint/restart tests (docs/ARCHITECTURE.md "Checkpoint", "Image", "Restart",
"Testing").

A test program from tests/apps/ckpt_*.c prints `step N` (N = 1, 2, ...) once per step, flushing
each line, and a deterministic last line `DONE ...`; it checks itself and exits non-zero on any
mismatch. The helpers here launch it under `crac launch -c DIR`, follow its output (stdout goes to
a file that is read as it grows), checkpoint it with its signal and wait for the new *complete*
generation (`latest` switched to it and its MANIFEST.json present), SIGKILL it, `crac restart` it,
and check that the output of every process continues exactly where the checkpoint left it.

Every wait has a timeout; nothing here asserts on timing.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import APPS_DIR, CFLAGS, crac_cmd, describe, require_native, run_native

from crac_py.image import format as image_format

STEP_RE = re.compile(r"^step (\d+)$")
GEN_RE = re.compile(r"^gen-(\d{6})$")
PROC_DIR_RE = re.compile(r"^ckpt_(.+)_(.+)-(\d+)$", re.DOTALL)  # names may hold newlines

WAIT_TIMEOUT = 60.0  # any single wait: a step, a checkpoint, a kill
RUN_TIMEOUT = 180.0  # a whole program run (native reference or the last restart)
POLL_S = 0.01

# Variables that would change where or how a launched program is checkpointed: never inherited
# from the environment the tests run in (tests set them on purpose).
_CKPT_ENV_PREFIXES = ("CRAC_CHECKPOINT", "DMTCP_CHECKPOINT", "CRAC_SIGCKPT", "DMTCP_SIGCKPT")
_CKPT_ENV_PREFIXES += ("CRAC_COMPRESS", "DMTCP_GZIP")  # the image's compression (--compress)


# The acceptance programs (DMTCP's acceptance set; docs/ARCHITECTURE.md "Testing"),
# tests/apps/<name>.c.
CKPT_PROGRAMS = (
    "ckpt_counter",
    "ckpt_busy_file",
    "ckpt_threads",
    "ckpt_signals",
    "ckpt_timers",
    "ckpt_env_cwd",
    "ckpt_tids",
    "ckpt_files",
    "ckpt_mmap",
    "ckpt_forkadvice",
    "ckpt_sparse",
    "ckpt_detached",
    "ckpt_poll",
    "ckpt_sighide",
    "ckpt_sigown",
    "ckpt_sigqueue",
    "ckpt_sigthread",
    "ckpt_closeall",
    "ckpt_procpid",
)

_BUILT: dict[str, Path] = {}


def build_ckpt_apps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CKPT_PROGRAMS compiled (once per session) with conftest's flags, by name.

    Built here rather than through conftest's `apps` fixture so that these tests do not depend
    on every other program in tests/apps/ building (some need headers these do not)."""
    if not _BUILT:
        out_dir = tmp_path_factory.mktemp("ckpt_apps")
        for name in CKPT_PROGRAMS:
            src = APPS_DIR / f"{name}.c"
            exe = out_dir / name
            cmd = ["gcc", *CFLAGS, "-o", str(exe), str(src), "-ldl"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                pytest.fail(f"cannot build {src.name}:\n{' '.join(cmd)}\n{res.stderr}")
            _BUILT[src.stem] = exe
    return dict(_BUILT)


def build_app(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    """SOURCE, a test program of its own suite (not one of CKPT_PROGRAMS), compiled alone with
    conftest's flags into a fresh directory; for a module-scoped fixture. CKPT_PROGRAMS are
    built first, as for the other suites."""
    build_ckpt_apps(tmp_path_factory)
    out = tmp_path_factory.mktemp(f"{source.stem}_app") / source.stem
    cmd = ["gcc", *CFLAGS, "-o", str(out), str(source)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        pytest.fail(f"cannot build {source.name}:\n{' '.join(cmd)}\n{res.stderr}")
    return out


def crac(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`crac ARGS` run to its end in CWD with the tests' environment (base_env), its output
    captured (for commands that end by themselves: verify, a refused restart or launch)."""
    return subprocess.run(
        [*crac_cmd(), *args], capture_output=True, env=base_env(), cwd=cwd, timeout=timeout
    )


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test runner's environment without checkpoint settings, plus EXTRA."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CKPT_ENV_PREFIXES)}
    env.update(extra or {})
    return env


def _tail(text: str, limit: int = 3000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


class Terminal:
    """A pseudo-terminal to be a process's stdin and controlling terminal (a shell's job control
    needs one); the master end stays open as long as this object, so no hang-up arrives."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()

    def popen_args(self) -> dict:
        """Popen arguments: a new session whose controlling terminal is the slave end."""

        def take_terminal() -> None:  # after the session is made, before the exec
            import fcntl
            import termios

            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        return {"stdin": self.slave, "start_new_session": True, "preexec_fn": take_terminal}

    def close(self) -> None:
        for fd in (self.slave, self.master):
            try:
                os.close(fd)
            except OSError:
                pass


class CracProc(subprocess.Popen):
    """A process whose stdout and stderr go to files (read while it runs; no pipe to fill up).

    `crac launch` execs the loader, so `pid` is the program's pid; the same holds for
    `crac restart`, whose pid is the restarted program's."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        out_dir: Path,
        label: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        terminal: Terminal | None = None,
    ):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.label = label
        self.out_path = out_dir / f"{label}.out"
        self.err_path = out_dir / f"{label}.err"
        if self.out_path.exists() or self.err_path.exists():
            raise ValueError(f"output files for {label!r} already exist in {out_dir}")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            stdin: dict = terminal.popen_args() if terminal else {"stdin": subprocess.DEVNULL}
            super().__init__(
                [str(a) for a in argv],
                stdout=out,
                stderr=err,
                env=dict(env) if env is not None else base_env(),
                cwd=cwd,
                **stdin,
            )

    def stdout_text(self) -> str:
        return self.out_path.read_bytes().decode(errors="replace")

    def stderr_text(self) -> str:
        return self.err_path.read_bytes().decode(errors="replace")

    def lines(self) -> list[str]:
        """Complete lines of stdout so far (a line still being written is left out)."""
        text = self.stdout_text()
        if not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
        return text.splitlines()

    def steps(self) -> list[int]:
        return [int(m.group(1)) for m in map(STEP_RE.match, self.lines()) if m]

    def last_step(self) -> int:
        """The highest step printed so far (0: none)."""
        steps = self.steps()
        return max(steps) if steps else 0

    def report(self) -> str:
        status = self.poll()
        state = "running" if status is None else f"returncode {status}"
        return (
            f"--- {self.label} (pid {self.pid}, {state}) ---\ncommand: {self.args!r}\n"
            f"stdout:\n{_tail(self.stdout_text())}\nstderr:\n{_tail(self.stderr_text())}"
        )

    def stop(self) -> None:
        """SIGKILL it if it still runs, and reap it (cleanup after a failure)."""
        if self.poll() is None:
            self.kill()
        try:
            self.wait(timeout=WAIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass


def fail(message: str, *procs: CracProc) -> None:
    details = "\n".join(p.report() for p in procs)
    pytest.fail(f"{message}\n{details}" if details else message, pytrace=False)


def subst(args: Iterable[str], work: Path) -> list[str]:
    """Arguments with `{work}` replaced by the run's work directory."""
    return [str(a).replace("{work}", str(work)) for a in args]


# ---------------------------------------------------------------------------------------------
# Commands


def crac_launch_argv(
    app: Path | str,
    args: Sequence[str],
    ckptdir: Path | None,
    opts: Sequence[str] = (),
) -> list[str]:
    c_flag = ["-c", str(ckptdir)] if ckptdir is not None else []
    return [*crac_cmd(), "launch", *c_flag, *opts, "--", str(app), *map(str, args)]


def launch(
    app: Path | str,
    args: Sequence[str],
    ckptdir: Path | None,
    *,
    out_dir: Path,
    label: str = "launch",
    opts: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> CracProc:
    """`crac launch -c CKPTDIR [OPTS] -- APP ARGS` (no -c when ckptdir is None: the environment
    says where). stdout/stderr go to OUT_DIR/LABEL.out/.err; the working directory is CWD, else
    OUT_DIR (never the test runner's: an image written to "." must not land in the repository)."""
    require_native()
    argv = crac_launch_argv(app, args, ckptdir, opts)
    return CracProc(argv, out_dir=out_dir, label=label, env=env, cwd=cwd or out_dir)


def restart(
    path: Path | str,
    *,
    out_dir: Path,
    label: str,
    opts: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> CracProc:
    """`crac restart PATH [OPTS]`; the restarted program runs in this process, in the foreground."""
    require_native()
    argv = [*crac_cmd(), "restart", str(path), *opts]
    return CracProc(argv, out_dir=out_dir, label=label, env=env, cwd=cwd or out_dir)


def run_restart(
    path: Path | str, *opts: str, timeout: float = WAIT_TIMEOUT, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """`crac restart PATH OPTS` run to its end, output captured (for refusals). The working
    directory is CWD, else the system's temporary directory (never the test runner's)."""
    require_native()
    return subprocess.run(
        [*crac_cmd(), "restart", str(path), *opts],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=base_env(),
        cwd=cwd or tempfile.gettempdir(),
        timeout=timeout,
    )


def assert_refused(cp: subprocess.CompletedProcess, what: str = "") -> str:
    """crac refused its input properly: exit status 2 (not a signal), exactly one non-empty line
    on stderr, starting `crac: error:`, no traceback, no crash. Returns that line."""
    ctx = f"{what}\n{describe(cp)}" if what else describe(cp)
    out = cp.stdout.decode(errors="replace") + cp.stderr.decode(errors="replace")
    assert cp.returncode >= 0, f"crac was killed by signal {-cp.returncode}\n{ctx}"
    for bad in ("Traceback", "Segmentation fault", "core dumped", "Aborted"):
        assert bad not in out, f"{bad!r} in crac's output\n{ctx}"
    assert cp.returncode == 2, f"expected exit status 2 (refused), got {cp.returncode}\n{ctx}"
    lines = [ln for ln in cp.stderr.decode(errors="replace").splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected exactly one line on stderr\n{ctx}"
    assert lines[0].startswith("crac: error: "), f"stderr does not start 'crac: error: '\n{ctx}"
    return lines[0]


# ---------------------------------------------------------------------------------------------
# Waiting


def wait_for_step(proc: CracProc, n: int, timeout: float = WAIT_TIMEOUT) -> int:
    """Waits until PROC has printed `step M` with M >= N; returns the highest step seen. Fails if
    the process ends first or after TIMEOUT seconds."""
    deadline = time.monotonic() + timeout
    while True:
        ended = proc.poll() is not None  # before reading: all output of an ended process is in
        last = proc.last_step()
        if last >= n:
            return last
        if ended:
            fail(f"{proc.label} ended before printing step {n} (last step: {last})", proc)
        if time.monotonic() > deadline:
            fail(f"{proc.label} did not reach step {n} in {timeout:.0f} s (last: {last})", proc)
        time.sleep(POLL_S)


def wait_for_step_or_success(proc: CracProc, n: int, timeout: float = WAIT_TIMEOUT) -> int:
    """As wait_for_step, but a process that ran to its end with status 0 first is no failure: the
    program goes on while its forked writer finishes the checkpoint, and on a loaded machine a
    short program can finish before the checkpoint is published."""
    deadline = time.monotonic() + timeout
    while True:
        status = proc.poll()
        last = proc.last_step()
        if last >= n or status == 0:
            return last
        if status is not None:
            fail(f"{proc.label} exited with status {status} before step {n} (last: {last})", proc)
        if time.monotonic() > deadline:
            fail(f"{proc.label} did not reach step {n} in {timeout:.0f} s (last: {last})", proc)
        time.sleep(POLL_S)


def wait_exit(proc: CracProc, timeout: float = RUN_TIMEOUT) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.stop()
        fail(f"{proc.label} did not finish in {timeout:.0f} s", proc)
        raise  # unreachable


def kill9(proc: CracProc) -> int:
    """SIGKILLs PROC and reaps it. Fails if it had already ended on its own (a test that wants to
    kill a process must catch it still running). Returns its exit status (-9)."""
    if proc.poll() is not None:
        fail(f"{proc.label} ended (status {proc.returncode}) before it could be killed", proc)
    proc.send_signal(signal.SIGKILL)
    status = wait_exit(proc, WAIT_TIMEOUT)
    if status != -signal.SIGKILL:
        fail(f"{proc.label} ended with status {status} while being killed", proc)
    return status


def kill9_unless_done(proc: CracProc) -> None:
    """SIGKILLs PROC unless it already ran to its end with status 0 (see
    wait_for_step_or_success), and reaps it."""
    proc.send_signal(signal.SIGKILL)  # Popen's: a no-op once the process is reaped
    status = wait_exit(proc, WAIT_TIMEOUT)
    if status not in (0, -signal.SIGKILL):
        fail(f"{proc.label} ended with status {status} while being killed", proc)


# ---------------------------------------------------------------------------------------------
# Images


def process_dirs(ckptdir: Path) -> list[Path]:
    """The ckpt_<prog>_<hostid>-<pid> process directories in CKPTDIR."""
    if not ckptdir.is_dir():
        return []
    return sorted(p for p in ckptdir.iterdir() if PROC_DIR_RE.match(p.name) and p.is_dir())


def tree_running(ckptdir: Path, *programs: bytes) -> list[int]:
    """The processes of a tree still running: the pids its image directories in CKPTDIR name,
    whose command line still names one of PROGRAMS and which started before the directory's
    first image was written. A pid of a process gone may be another's by now, even one running
    the same program (a copy of the suite beside this one): that one started after the image."""
    running = []
    for d in process_dirs(ckptdir):
        pid = int(d.name.rsplit("-", 1)[1])
        gens = generations(d)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            started = process_start_time(pid)
            imaged = gens[0].stat().st_mtime if gens else time.time()
        except OSError:
            continue
        if started < imaged and any(p in cmdline for p in programs):
            running.append(pid)
    return running


def kill_tree(ckptdir: Path, *programs: bytes) -> None:
    """SIGKILL every process of a tree still running (a forked child is no child of the test):
    tree_running's."""
    for pid in tree_running(ckptdir, *programs):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def process_table() -> dict[int, tuple[int, int, int]]:
    """Every process now: {pid: (parent pid, process group, session)}, from /proc/PID/stat."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # state ppid pgrp session ...
        table[int(entry)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def kill_descendants(proc: subprocess.Popen) -> None:
    """SIGKILL the descendants of PROC (while it runs: its pid is its own), those kill_tree does
    not know too (a worker spawned after the last image, which would live on: a Python pool's
    worker blocked in its queue's read, holding the queue's named semaphore the restarted tree
    then waits for). PROC is stopped first, so it forks no new one meanwhile; they are found by
    the parent links in /proc, until none is left. PROC itself is the caller's to kill."""
    if proc.poll() is not None:
        return
    root = proc.pid
    os.kill(root, signal.SIGSTOP)
    killed: set[int] = set()
    while True:
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in process_table().items():
            children.setdefault(ppid, []).append(pid)
        found, frontier = set(), [root]
        while frontier:
            for child in children.get(frontier.pop(), []):
                if child not in found:
                    found.add(child)
                    frontier.append(child)
        if not found - killed:
            return
        for pid in found - killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed |= found


def process_start_time(pid: int) -> float:
    """When process PID started, in seconds since the epoch (clock-tick precision)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
    booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def gen_number(gen: Path) -> int:
    m = GEN_RE.match(gen.name)
    assert m, f"{gen} is not named gen-NNNNNN"
    return int(m.group(1))


def generations(procdir: Path) -> list[Path]:
    """The gen-NNNNNN directories of a process directory, oldest first (temporary ones left
    out: they are not named gen-NNNNNN)."""
    return sorted(p for p in procdir.iterdir() if GEN_RE.match(p.name) and p.is_dir())


def latest_complete(procdir: Path) -> Path | None:
    """The generation `latest` names, if it is complete (MANIFEST.json present)."""
    link = procdir / "latest"
    if not link.is_symlink():
        return None
    target = link.resolve()
    if not (GEN_RE.match(target.name) and target.parent == procdir.resolve()):
        return None
    if not (target / "MANIFEST.json").is_file():
        return None
    return target


def complete_generations(ckptdir: Path) -> dict[Path, int]:
    """For every process directory in CKPTDIR: the number of its latest complete generation."""
    found = {}
    for procdir in process_dirs(ckptdir):
        gen = latest_complete(procdir)
        if gen is not None:
            found[procdir] = gen_number(gen)
    return found


def tree(path: Path) -> str:
    """`ls -lR`-like listing for failure messages."""
    if not path.exists():
        return f"{path}: does not exist"
    lines = []
    for root, dirs, files in os.walk(path):
        for name in sorted(dirs + files):
            p = Path(root) / name
            try:
                st = p.lstat()
                extra = f" -> {os.readlink(p)}" if p.is_symlink() else ""
                lines.append(f"{oct(st.st_mode)} {st.st_size:>12} {p}{extra}")
            except OSError as exc:
                lines.append(f"? {p} ({exc})")
    return "\n".join(lines[:200]) or f"{path}: empty"


_INSPECTED: set[Path] = set()
_REQUIRED_NOTES = {
    n.cname.removeprefix("CRAC_NT_").lower() for n in image_format.NOTES if not n.optional
}


def check_inspect(gen: Path) -> dict:
    """`crac inspect --json GEN` must read the generation whole: exit 0, JSON, every CRAC note of
    upper.core decoded (none unknown, none of the required ones missing), and what the notes and
    device.img's index say agrees with MANIFEST.json. Returns the JSON."""
    cp = subprocess.run(
        [*crac_cmd(), "inspect", "--json", str(gen)],
        capture_output=True,
        env=base_env(),
        timeout=RUN_TIMEOUT,
    )
    assert cp.returncode == 0, f"crac inspect --json {gen} failed\n{describe(cp)}"
    try:
        info = json.loads(cp.stdout)
    except ValueError as exc:
        pytest.fail(f"crac inspect --json {gen} printed no JSON ({exc})\n{describe(cp)}")
    assert info["unknown_notes"] == [], f"{gen}: notes crac inspect cannot decode"
    missing = _REQUIRED_NOTES - set(info["notes"])
    assert not missing, f"{gen}: upper.core lacks the notes {sorted(missing)}"
    manifest = json.loads((gen / "MANIFEST.json").read_text())
    keys = image_format.manifest_key_paths(manifest)
    documented = {k for k, _, _ in image_format.MANIFEST_KEYS}
    assert keys <= documented, f"{gen}: MANIFEST.json keys not in the spec: {keys - documented}"
    top = {k for k in documented if "." not in k}
    assert top <= keys, f"{gen}: MANIFEST.json lacks {top - keys}"
    process = info["notes"]["process"]
    assert process["format"] == manifest["format_version"], process
    assert process["format"] in (
        image_format.CRAC_IMAGE_FORMAT,
        image_format.CRAC_IMAGE_FORMAT_COMPRESSED,
        image_format.CRAC_IMAGE_FORMAT_INCREMENTAL,
    ), process
    assert process["generation"] == manifest["generation"] == gen_number(gen), process
    assert process["ckpt_signal"] == manifest["process"]["ckpt_signal"], process
    assert len(info["notes"]["threads"]) == manifest["process"]["threads"], info["threads"]
    assert len(info["notes"]["signals"]) == image_format.N_SIGNAL_RECS - 1
    dev = info["device_image"]
    in_manifest = [
        (a["address"], a["size"], a["kind"])
        for a in manifest.get("device", {}).get("allocations", [])
    ]
    if (gen / "device.img").exists():
        assert dev is not None, f"{gen}: crac inspect did not read device.img"
        in_index = [(a["addr"], a["size"], a["kind_name"]) for a in dev["allocations"]]
        assert in_index == in_manifest, f"{gen}: device.img's index {in_index} != {in_manifest}"
    else:
        assert dev is None and in_manifest == [], f"{gen}: device allocations but no device.img"
    return info


def inspect_images(ckptdir: Path) -> None:
    """check_inspect on every complete generation under CKPTDIR not inspected yet (each once)."""
    for procdir in process_dirs(ckptdir):
        for gen in generations(procdir):
            gen = gen.resolve()
            if gen in _INSPECTED or not (gen / "MANIFEST.json").exists():
                continue
            check_inspect(gen)
            _INSPECTED.add(gen)


def wait_new_generation(
    ckptdir: Path,
    before: Mapping[Path, int],
    proc: CracProc | None = None,
    timeout: float = WAIT_TIMEOUT,
) -> Path:
    """Waits until a process directory in CKPTDIR has a complete generation newer than BEFORE
    says; returns that generation's directory (resolved)."""
    deadline = time.monotonic() + timeout
    while True:
        ended = proc is not None and proc.poll() is not None
        for procdir, num in complete_generations(ckptdir).items():
            if num > before.get(procdir, 0):
                gen = latest_complete(procdir)
                if gen is not None:
                    return gen
        if ended:
            fail(
                f"{proc.label} ended (status {proc.returncode}) and no new complete generation "
                f"appeared in {ckptdir} (if it ran to its end, the checkpoint took longer than "
                f"the rest of its run)\n{tree(ckptdir)}",
                proc,
            )
        if time.monotonic() > deadline:
            procs = [proc] if proc is not None else []
            fail(
                f"no new complete generation in {ckptdir} after {timeout:.0f} s "
                f"(a checkpoint is complete when `latest` names it and its MANIFEST.json "
                f"exists)\n{tree(ckptdir)}",
                *procs,
            )
        time.sleep(POLL_S)


def checkpoint(
    proc_or_pid: CracProc | int,
    ckptdir: Path,
    *,
    sig: int = signal.SIGUSR2,
    timeout: float = WAIT_TIMEOUT,
) -> Path:
    """Sends the checkpoint signal and waits for the NEW complete generation; returns it."""
    proc = proc_or_pid if isinstance(proc_or_pid, CracProc) else None
    pid = proc.pid if proc is not None else int(proc_or_pid)
    before = complete_generations(ckptdir)
    if proc is not None and proc.poll() is not None:
        fail(f"{proc.label} ended before it could be checkpointed", proc)
    os.kill(pid, sig)
    return wait_new_generation(ckptdir, before, proc, timeout)


def launch_checkpoint_kill(
    app: Path | str,
    args: Sequence[str],
    ckptdir: Path,
    *,
    out_dir: Path,
    label: str = "launch",
    at_step: int = 5,
    after: int = 0,
    opts: Sequence[str] = (),
    cwd: Path | None = None,
) -> CracProc:
    """`crac launch OPTS` APP into CKPTDIR (in CWD, as launch), one checkpoint once it printed
    step AT_STEP, AFTER more steps, then SIGKILL: the ended process (its output holds the step the
    checkpoint was taken at)."""
    proc = launch(app, args, ckptdir, out_dir=out_dir, label=label, opts=opts, cwd=cwd)
    try:
        wait_for_step(proc, at_step)
        checkpoint(proc, ckptdir)
        if after:
            wait_for_step(proc, proc.last_step() + after)
        kill9(proc)
    except BaseException:
        proc.stop()
        raise
    return proc


def launch_image(
    app: Path | str,
    args: Sequence[str],
    ckptdir: Path,
    *,
    out_dir: Path,
    label: str = "launch",
    opts: Sequence[str] = (),
    at_step: int = 5,
    after: int = 0,
) -> Path:
    """launch_checkpoint_kill (at step 5 unless AT_STEP) into an empty CKPTDIR: the generation it
    wrote."""
    launch_checkpoint_kill(
        app, args, ckptdir, out_dir=out_dir, label=label, opts=opts, at_step=at_step, after=after
    )
    gen = latest_complete(process_dirs(ckptdir)[0])
    assert gen is not None, tree(ckptdir)
    return gen


# ---------------------------------------------------------------------------------------------
# Output continuity


def check_steps_contiguous(lines: Sequence[str], what: str) -> list[int]:
    """The step lines of one uninterrupted stretch of output: 1.., each one more than the last."""
    steps = [int(m.group(1)) for m in map(STEP_RE.match, lines) if m]
    for prev, cur in zip(steps, steps[1:]):
        assert cur == prev + 1, f"{what}: step {cur} follows step {prev}"
    return steps


@dataclass
class Segment:
    """The output of one process of a checkpoint/restart chain."""

    label: str
    lines: list[str]
    # Checkpoint taken in this process (None for the last one): the last step printed before the
    # signal was sent, the last step printed once the generation was complete, and the generation.
    before_signal: int | None = None
    at_complete: int | None = None
    gen: Path | None = None


def stitch(segments: Sequence[Segment]) -> list[str]:
    """The output the chain amounts to: each process's output up to the step its successor
    resumes after, then the successor's. Fails when a successor does not start with a step line
    or resumes from a step its predecessor never printed."""
    out = list(segments[0].lines)
    for prev, seg in zip(segments, segments[1:]):
        lines = list(seg.lines)
        first = STEP_RE.match(lines[0]) if lines else None
        second = STEP_RE.match(lines[1]) if len(lines) > 1 else None
        if not first and second and f"step {int(second.group(1)) - 1}".endswith(lines[0]):
            # The checkpoint came between two write()s of one line (Python under
            # PYTHONUNBUFFERED=1 writes the text and its newline apart): the restart writes the
            # rest of the line its predecessor began, here the end of `step N-1`.
            lines, first = lines[1:], second
        if not first:
            head = lines[:3]
            pytest.fail(f"{seg.label}: output does not begin with a step line: {head!r}")
        resume = int(first.group(1))
        marker = f"step {resume - 1}"
        if resume == 1:
            cut = next((i for i, ln in enumerate(out) if STEP_RE.match(ln)), len(out))
        elif marker in out:
            cut = len(out) - out[::-1].index(marker)
        else:
            pytest.fail(
                f"{seg.label} resumes at step {resume}, but {prev.label} never printed `{marker}`"
            )
        out = out[:cut] + lines
    return out


def check_resume_point(seg: Segment, prev: Segment) -> int:
    """The first step a restarted process prints must continue from the checkpointed value:
    after the last step seen before the checkpoint signal, and no later than one past the last
    step printed when the checkpoint was complete (so it re-prints steps the killed process had
    already printed after the checkpoint). Returns that first step."""
    steps = [int(m.group(1)) for m in map(STEP_RE.match, seg.lines) if m]
    assert steps, f"{seg.label} printed no step"
    first = steps[0]
    lo, hi = prev.before_signal + 1, prev.at_complete + 1
    assert lo <= first <= hi, (
        f"{seg.label} resumed at step {first}; the checkpoint taken in {prev.label} was requested "
        f"after step {prev.before_signal} and complete by step {prev.at_complete}, so the first "
        f"step after the restart must be in [{lo}, {hi}]"
    )
    return first


def assert_same_output(actual: Sequence[str], expected: Sequence[str], what: str) -> None:
    if list(actual) == list(expected):
        return
    diff = difflib.unified_diff(
        list(expected), list(actual), "uninterrupted run", what, n=2, lineterm=""
    )
    text = "\n".join(list(diff)[:80])
    pytest.fail(f"{what} differs from the uninterrupted run:\n{text}", pytrace=False)


# ---------------------------------------------------------------------------------------------
# Whole scenarios


@dataclass
class Reference:
    lines: list[str]
    steps: int

    @property
    def done(self) -> str:
        return self.lines[-1]


def native_reference(app: Path, args: Sequence[str], work: Path, cwd: Path) -> Reference:
    """Runs the program natively (no crac) in a fresh work directory: the expected output."""
    work.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    cp = run_native([app, *subst(args, work)], env=base_env(), cwd=cwd, timeout=RUN_TIMEOUT)
    if cp.returncode != 0:
        pytest.fail(f"the program fails natively (a test program bug)\n{describe(cp)}")
    lines = cp.stdout.decode().splitlines()
    steps = check_steps_contiguous(lines, "native run")
    assert steps and steps[0] == 1, f"native run prints no `step 1`\n{describe(cp)}"
    assert lines[-1].startswith("DONE"), f"native run does not end with DONE\n{describe(cp)}"
    return Reference(lines, steps[-1])


@dataclass
class CycleResult:
    reference: Reference
    segments: list[Segment]
    ckptdir: Path
    procdir: Path
    gens: list[Path] = field(default_factory=list)


def run_cycles(
    app: Path,
    args: Sequence[str],
    tmp_path: Path,
    *,
    cycles: int = 2,
    fractions: Sequence[float] = (0.2, 0.45, 0.6, 0.7),
    after: int = 2,
    launch_opts: Sequence[str] = (),
    sig: int = signal.SIGUSR2,
    restart_opts: Sequence[str] = (),
    between: Callable[[Path], None] | None = None,
) -> CycleResult:
    """The acceptance scenario (docs/ARCHITECTURE.md "Testing"): an uninterrupted native run gives
    the expected output; then launch -> (wait until step fractions[i] * N -> checkpoint -> wait
    `after` more steps -> SIGKILL -> crac restart) x CYCLES -> run to the end. Checks: exit status
    0; every
    restarted process resumes at the checkpointed step (see check_resume_point); the stitched
    output equals the uninterrupted run's line for line (so the DONE line too); generations
    gen-000001.. appear in one process directory. BETWEEN, given the work directory, runs after
    each kill, before the restart."""
    assert 1 <= cycles <= len(fractions)
    ref = native_reference(app, args, tmp_path / "ref_work", tmp_path / "ref_cwd")
    work = tmp_path / "work"
    ckptdir = tmp_path / "ckpt"
    logs = tmp_path / "logs"
    for d in (work, ckptdir, logs, tmp_path / "launch_cwd", tmp_path / "restart_cwd"):
        d.mkdir(parents=True, exist_ok=True)
    argv = subst(args, work)

    segments: list[Segment] = []
    gens: list[Path] = []
    procdir: Path | None = None
    proc = launch(app, argv, ckptdir, out_dir=logs, opts=launch_opts, cwd=tmp_path / "launch_cwd")
    try:
        for i in range(cycles):
            target = max(1, int(ref.steps * fractions[i]))
            if target + after >= ref.steps:
                pytest.fail(f"{app.name} has too few steps ({ref.steps}) for {cycles} cycles")
            wait_for_step(proc, target)
            before_signal = proc.last_step()
            gen = checkpoint(proc, ckptdir, sig=sig)
            at_complete = proc.last_step()
            # The checkpoint is complete: the process goes on and re-prints steps after it (or
            # has already run to its end, which is no failure: the restart must still resume
            # from the checkpointed step).
            wait_for_step_or_success(proc, at_complete + after)
            kill9_unless_done(proc)
            seg = Segment(proc.label, proc.lines(), before_signal, at_complete, gen)
            segments.append(seg)
            check_steps_contiguous(seg.lines, seg.label)

            gens.append(gen)
            if between is not None:  # what happens on the node while the job is down
                between(work)
            if procdir is None:
                procdir = gen.parent
            assert gen.parent == procdir, f"generation {gen} is not in {procdir}"
            assert gen.name == f"gen-{i + 1:06d}", f"checkpoint {i + 1} wrote {gen.name}"

            # Restart from the forms the CLI accepts: the checkpoint directory first (it holds
            # exactly one process), then the generation itself.
            path = ckptdir if i == 0 else gen
            label = f"restart{i + 1}"
            proc = restart(
                path, out_dir=logs, label=label, opts=restart_opts, cwd=tmp_path / "restart_cwd"
            )
            wait_for_step(proc, 1)
            check_resume_point(Segment(proc.label, proc.lines()), seg)

        status = wait_exit(proc)
        last = Segment(proc.label, proc.lines())
        segments.append(last)
        if status != 0:
            fail(f"{proc.label} exited with status {status}", proc)
        check_steps_contiguous(last.lines, last.label)
        combined = stitch(segments)
        assert_same_output(combined, ref.lines, "the stitched checkpoint/restart output")
        assert last.lines and last.lines[-1] == ref.done
        inspect_images(ckptdir)
    except BaseException:
        proc.stop()
        raise
    assert procdir is not None
    return CycleResult(ref, segments, ckptdir, procdir, gens)


def counter_lines(steps: int) -> list[str]:
    """The exact output of `ckpt_counter STEPS [MS]` (see tests/apps/ckpt_counter.c)."""
    h = 0xCBF29CE484222325
    for k in range(1, steps + 1):
        for i in range(8):
            h ^= (k >> (8 * i)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return [f"step {k}" for k in range(1, steps + 1)] + [f"DONE checksum={h:016x} steps={steps}"]


def check_finished(proc: CracProc, expected: Sequence[str], prev: Segment) -> Segment:
    """Waits for PROC, a restarted process, to end: exit status 0, resumed at the checkpointed
    step (PREV describes the process the checkpoint was taken in; not checked when PREV has no
    before_signal, e.g. for interval checkpoints), and PREV's output up to there followed by
    PROC's equals EXPECTED line for line."""
    try:
        status = wait_exit(proc)
    except BaseException:
        proc.stop()
        raise
    seg = Segment(proc.label, proc.lines())
    if status != 0:
        fail(f"{proc.label} exited with status {status}", proc)
    check_steps_contiguous(seg.lines, seg.label)
    if prev.before_signal is not None:
        check_resume_point(seg, prev)
    assert_same_output(stitch([prev, seg]), expected, f"{proc.label}'s output")
    return seg


def finish_restart(
    path: Path | str,
    expected: Sequence[str],
    prev: Segment,
    *,
    out_dir: Path,
    label: str,
    opts: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Segment:
    """`crac restart PATH` run to its end and checked with check_finished."""
    proc = restart(path, out_dir=out_dir, label=label, opts=opts, env=env, cwd=cwd)
    return check_finished(proc, expected, prev)
