"""The `crac` command (typer). `main()` is the console-script entry point."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from crac_py import __version__, config, devices, doctor, paths
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


def _original_environ() -> dict[bytes, bytes] | None:
    """The environment this process was exec'd with, byte for byte and in order.

    os.environ is not it: Python's C-locale coercion (PEP 538) adds LC_CTYPE=C.UTF-8 at start-up
    when the locale is C, and the program must see exactly what `crac launch` was given.
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


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    epilog="Example: crac launch --device sim -- ./app --its-own-flag",
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
        loader = str(paths.loader())
    except (
        PreflightError,
        config.ConfigError,
        devices.DeviceError,
        paths.NativeMissingError,
    ) as exc:
        _error(str(exc))
    argv = [loader, "--device", dev, "--argv0", program, "--", info.path, *(args or [])]
    sys.stdout.flush()
    sys.stderr.flush()
    env = _original_environ()
    try:
        if env is None:
            os.execv(loader, argv)
        else:
            os.execve(loader, argv, env)
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


def main() -> None:
    app(prog_name="crac")
