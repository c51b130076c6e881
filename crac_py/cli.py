"""The `crac` command (typer). `main()` is the console-script entry point."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from crac_py import __version__, config, devices, doctor, image, paths, runner
from crac_py.preflight import PreflightError, preflight

# Exit status of `crac launch` when it refuses its input or cannot start the program.
EXIT_REFUSED = 2

EXAMPLES = """\
Examples:

  crac doctor                        (can this machine run crac?)

  crac launch ./app arg1 arg2        (run ./app under crac)

  crac launch --device sim -- ./app --its-own-flag

Everything after PROGRAM is passed to the program untouched.
"""

app = typer.Typer(
    name="crac",
    help="Transparent checkpoint/restart for GPU programs (CRAC split process).",
    epilog=EXAMPLES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _error(message: str, code: int = EXIT_REFUSED) -> NoReturn:
    print(f"crac: error: {message}", file=sys.stderr, flush=True)
    raise typer.Exit(code)


def _version_callback(value: bool) -> None:
    if value:
        print(f"crac {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Transparent checkpoint/restart for GPU programs (CRAC split process)."""


def _int_option(name: str, flag_value: int | None, lo: int, hi: int) -> int:
    resolved = config.resolve(name, None if flag_value is None else str(flag_value))
    try:
        value = int(resolved.value)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        where = config.OPTIONS[name].flag if resolved.source == "flag" else resolved.source
        raise config.ConfigError(f"invalid value {resolved.value!r} for {where}; use {lo}..{hi}")
    return value


def _checkpoint_options(
    ckptdir: str | None,
    interval: int | None,
    ckpt_signal: int | None,
    keep: int,
    exit_after: bool,
) -> runner.CheckpointOptions:
    directory = Path(config.resolve("checkpoint_dir", ckptdir).value)
    if not directory.is_dir():
        raise config.ConfigError(f"checkpoint directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise config.ConfigError(f"checkpoint directory {directory} is not writable")
    signal_number = _int_option("sigckpt", ckpt_signal, 1, 64)
    if signal_number in (9, 19, 31, 32, 33, 62):
        raise config.ConfigError(f"signal {signal_number} cannot be the checkpoint signal")
    return runner.CheckpointOptions(
        ckpt_dir=str(directory.resolve()),
        interval=_int_option("checkpoint_interval", interval, 0, 1 << 30),
        ckpt_signal=signal_number,
        keep=keep,
        exit_after=exit_after,
    )


CkptDirOpt = Annotated[
    str | None,
    typer.Option(
        "--ckptdir", "-c", help="Where images go (env CRAC_CHECKPOINT_DIR, DMTCP_CHECKPOINT_DIR)."
    ),
]
IntervalOpt = Annotated[
    int | None,
    typer.Option(
        "--interval",
        "-i",
        help="Checkpoint every S seconds (env CRAC_/DMTCP_CHECKPOINT_INTERVAL; 0 = never).",
    ),
]
KeepOpt = Annotated[int, typer.Option("--keep", min=1, help="Generations to keep.")]
ExitAfterOpt = Annotated[
    bool, typer.Option("--exit-after-checkpoint", help="Exit once the next checkpoint is written.")
]
SimVersionOpt = Annotated[
    int | None,
    typer.Option("--sim-version", min=1, max=2, help="Version of the sim device to load."),
]


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    epilog="Example: crac launch -c /scratch/ckpt -i 3600 -- ./app --its-own-flag",
)
def launch(
    program: Annotated[
        str, typer.Argument(metavar="PROGRAM", help="Program to run: a path, or a name in PATH.")
    ],
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="ARGS", help="Passed to the program untouched."),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            metavar="sim|cuda|auto",
            help="Device backend (env CRAC_DEVICE; default auto: cuda if a GPU is usable).",
        ),
    ] = None,
    sim_version: SimVersionOpt = None,
    ckptdir: CkptDirOpt = None,
    interval: IntervalOpt = None,
    ckpt_signal: Annotated[
        int | None,
        typer.Option(
            "--ckpt-signal", help="Checkpoint signal (env CRAC_SIGCKPT, DMTCP_SIGCKPT; 12)."
        ),
    ] = None,
    keep: KeepOpt = 2,
    exit_after: ExitAfterOpt = False,
) -> None:
    """Run PROGRAM [ARGS...] under crac (the process becomes crac's loader, then PROGRAM)."""
    if program.startswith("-") and not os.path.lexists(program):
        _error(
            f"unknown option {program!r}; put the program after '--' if its name starts with '-'"
        )
    try:
        info = preflight(program)
        dev = devices.resolve_device(
            config.resolve("device", device).value, uses_cuda=bool(info.cuda_imports)
        )
        ckpt = _checkpoint_options(ckptdir, interval, ckpt_signal, keep, exit_after)
        loader = str(paths.loader())
    except (
        PreflightError,
        config.ConfigError,
        devices.DeviceError,
        paths.NativeMissingError,
    ) as exc:
        _error(str(exc))
    dev_opts = runner.DeviceOptions(dev, sim_version)
    argv = [loader, *dev_opts.loader_args(), "--argv0", program, *ckpt.loader_args()]
    argv += ["--", info.path, *(args or [])]
    try:
        runner.exec_loader(loader, argv)
    except OSError as exc:
        _error(f"cannot exec {loader}: {exc.strerror}; reinstall crac (pip install .)")


@app.command(epilog="Example: crac restart /scratch/ckpt/ckpt_app_0a0b0c0d-4242")
def restart(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT",
            help="A checkpoint directory, a process directory, a generation or a latest link.",
        ),
    ],
    device: Annotated[
        str | None,
        typer.Option("--device", metavar="sim|cuda|none", help="Backend (default: the image's)."),
    ] = None,
    sim_version: SimVersionOpt = None,
    no_truncate: Annotated[
        bool,
        typer.Option("--no-truncate", help="Keep files written after the checkpoint as they are."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Restart even if the program or crac changed.")
    ] = False,
    interval: IntervalOpt = None,
    keep: KeepOpt = 2,
    exit_after: ExitAfterOpt = False,
) -> None:
    """Restart a checkpointed program where it stopped; it keeps running in this process."""
    try:
        gen = image.open_generation(path)
        loader = paths.loader()
        image.check_program(gen.manifest, force)
        image.check_loader(gen.manifest, loader, force)
        dev = gen.backend if device is None else devices.resolve_device(device)
        ckpt = runner.CheckpointOptions(
            ckpt_dir=None,
            interval=_int_option("checkpoint_interval", interval, 0, 1 << 30),
            ckpt_signal=gen.ckpt_signal,
            keep=keep,
            exit_after=exit_after,
        )
        core_size, header_crc = gen.core_check
    except (
        image.ImageError,
        config.ConfigError,
        devices.DeviceError,
        paths.NativeMissingError,
    ) as exc:
        _error(str(exc))
    argv = [str(loader), *runner.DeviceOptions(dev, sim_version).loader_args()]
    argv += ["--restart", str(gen.path), "--core-size", str(core_size)]
    argv += ["--header-crc", str(header_crc), *ckpt.loader_args()]
    if no_truncate:
        argv.append("--no-truncate")
    argv += ["--", *gen.argv]
    try:
        runner.exec_loader(str(loader), argv)
    except OSError as exc:
        _error(f"cannot exec {loader}: {exc.strerror}; reinstall crac (pip install .)")


@app.command("doctor")
def doctor_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check this machine: kernel features, address windows, native parts, CUDA, backends."""
    results = doctor.run_checks()
    if as_json:
        print(json.dumps([c.as_json() for c in results], indent=2))
    else:
        styles = {doctor.OK: "green", doctor.WARN: "yellow", doctor.FAIL: "bold red"}
        table = Table(title=f"crac {__version__} doctor")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in results:
            style = styles.get(c.status, "cyan")
            table.add_row(Text(c.name), Text(c.status, style=style), Text(c.detail))
        Console().print(table)
    raise typer.Exit(doctor.exit_code(results))


def _hold_checkpoint_signal() -> None:
    """A checkpoint signal sent while `crac launch`/`restart` is still Python must not kill it:
    ignore it until the exec (the loader installs its own handler)."""
    if len(sys.argv) > 1 and sys.argv[1] in ("launch", "restart"):
        import signal

        value = config.resolve("sigckpt", None).value
        number = int(value) if value.isdigit() and 0 < int(value) < 65 else signal.SIGUSR2
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(number, signal.SIG_IGN)


def main() -> None:
    _hold_checkpoint_signal()
    app(prog_name="crac")
