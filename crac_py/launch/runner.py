"""Turning resolved options into the loader's command line, and exec'ing it (no Python stays in
the process: it becomes the loader, then the program)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn


@dataclass
class CheckpointOptions:
    ckpt_dir: str | None = "."  # None at restart: generations continue where the image is
    interval: int = 0
    ckpt_signal: int = 12
    keep: int = 2
    exit_after: bool = False
    verbose: bool = False
    no_fork_writer: bool = False
    compress: str = "none"  # none, lz4, zstd or zstd:LEVEL (config.compress_spec)
    incremental: int = 0  # 0 off, else every Nth generation full (config.incremental_spec)
    ckpt_open_files: bool = False  # every written file copied (config.ckpt_open_files_spec)

    def loader_args(self) -> list[str]:
        args = [] if self.ckpt_dir is None else ["--ckpt-dir", self.ckpt_dir]
        args += [
            "--interval", str(self.interval),
            "--ckpt-signal", str(self.ckpt_signal),
            "--keep", str(self.keep),
            "--crac-cmd", crac_command(),
        ]  # fmt: skip
        if self.exit_after:
            args.append("--exit-after-checkpoint")
        if self.verbose:
            args.append("--verbose")
        if self.no_fork_writer:
            args.append("--no-fork-writer")
        if self.compress != "none":
            args += ["--compress", self.compress]
        if self.incremental:
            args += ["--incremental", str(self.incremental)]
        if self.ckpt_open_files:
            args.append("--ckpt-open-files")
        return args


@dataclass
class DeviceOptions:
    device: str = "none"
    sim_version: int | None = None
    extra: list[str] = field(default_factory=list)
    cuda_runtime: str | None = None  # --device cuda: NVIDIA's libcudart (devices.find_cuda_runtime)

    def loader_args(self) -> list[str]:
        args = ["--device", self.device]
        if self.sim_version is not None:
            args += ["--sim-version", str(self.sim_version)]
        if self.device == "cuda" and self.cuda_runtime:
            args += ["--cuda-runtime", self.cuda_runtime]
        return args


def crac_command() -> str:
    """How a shell script runs this same crac (for crac_restart_script.sh)."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "crac" and argv0.exists():
        return shlex.quote(str(argv0.resolve()))
    return f"{shlex.quote(sys.executable)} -m crac_py"


def original_environ() -> dict[bytes, bytes] | None:
    """The environment this process was exec'd with, byte for byte and in order.

    os.environ is not it: Python's C-locale coercion (PEP 538) adds LC_CTYPE=C.UTF-8 at start-up
    when the locale is C, and the program must see exactly what crac was given.
    """
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    env: dict[bytes, bytes] = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and key:
            env.setdefault(key, value)
    return env


def hold_ckpt_signal(argv: list[str]) -> None:
    """Block the loader's checkpoint signal across the exec (crac_py/_entry.py blocked its guess
    at start-up; a restart's comes from the image). A signal already pending stays pending and
    the loader turns it into a checkpoint once the program can be checkpointed."""
    from crac_py import ckpt_signal

    cut = argv.index("--") if "--" in argv else len(argv)
    options = argv[:cut]
    number = ckpt_signal.DEFAULT_CKPT_SIGNAL
    if "--ckpt-signal" in options:
        number = int(options[options.index("--ckpt-signal") + 1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {number})
    held = ckpt_signal.held_signal
    if held is not None and held != number and "--restart" not in options:
        # The guess was not the launch's signal: the program starts with the caller's mask.
        # (At a restart every thread gets its saved mask back anyway.)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {held})


OPTIONS_FD_VAR = "CRAC_LOADER_OPTIONS_FD"


def _options_fd(items: list[str]) -> int:
    """A descriptor the loader inherits, holding ITEMS (NUL-terminated, as bytes)."""
    data = b"".join(os.fsencode(item) + b"\0" for item in items)
    fd = os.memfd_create("crac-loader-options", 0)  # not CLOEXEC: the loader reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def exec_loader(loader: str, argv: list[str]) -> NoReturn:
    """Replace this process with the loader, ARGV being its whole command line
    ([loader, options..., "--", program path, program args...]). Raises OSError if the exec
    fails.

    The process's own command line becomes the program's (its argv[0] as the user gave it, then
    its arguments), so `ps`, `pgrep -f` and /proc/PID/cmdline show the program and no crac option
    (the coordinator token included); the loader reads its options from an inherited descriptor
    named by CRAC_LOADER_OPTIONS_FD (loader/boot/main.c), which it removes from the environment
    before the program sees it."""
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ for itself; the program must start with the
    # dispositions a shell would have given it.
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    hold_ckpt_signal(argv)
    cut = argv.index("--")
    options = argv[1:cut]
    shown = argv[cut + 1 :]
    if "--argv0" in options:
        shown = [options[options.index("--argv0") + 1], *shown[1:]]
    fd = _options_fd([*options, "--", argv[cut + 1]])
    env = original_environ()
    if env is None:
        env = {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}
    env[OPTIONS_FD_VAR.encode()] = str(fd).encode()
    os.execve(loader, shown, env)
