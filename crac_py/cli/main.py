"""The `crac` command (typer). `main()` is the console-script entry point."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

# Only what `crac launch` and `crac restart` need is imported here: their start-up time is the
# program's. The other commands import their modules (rich, asyncio...) when they run.
import crac_py
from crac_py import config, paths
from crac_py.cli.options import (
    AllowChangedOpt,
    AnyCoordOpt,
    CkptDirOpt,
    CkptOpenFilesOpt,
    CompressOpt,
    CoordHostOpt,
    CoordPortOpt,
    CoordTokenFileOpt,
    CoordTokenOpt,
    CudaRuntimeOpt,
    ExitAfterOpt,
    FullEveryOpt,
    IncrementalOpt,
    IntervalOpt,
    JoinOpt,
    KeepOpt,
    LazyOpt,
    NewCoordOpt,
    NoCoordOpt,
    NoForkWriterOpt,
    SimVersionOpt,
    VerboseOpt,
)
from crac_py.coord import client as coord_client
from crac_py.coord.client import CoordError
from crac_py.image import chain as image_chain
from crac_py.image import generation as image
from crac_py.launch import cuda12 as cuda12_launch
from crac_py.launch import devices, hosts, job, runner, tree
from crac_py.launch import mpi as mpi_launch
from crac_py.launch.preflight import PreflightError, preflight

if TYPE_CHECKING:
    from crac_py.image.tree_view import Tree, TreeMember

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


def _restart_error(message: str, coordinator: coord_client.Endpoint | None) -> NoReturn:
    """A restart that joined a coordinator fails: the coordinator hears it first, so the other
    processes of the restart stop instead of going on without this one (docs/PROTOCOL.md
    "restore_failed")."""
    if coordinator is not None:
        try:
            coord_client.request(
                coordinator,
                {
                    "type": "command",
                    "verb": "restart-failed",
                    "token": coordinator.token,
                    "error": message,
                },
                timeout=10,
            )
        except coord_client.CoordError:
            pass  # no coordinator to tell: the others meet the barrier's deadline
    _error(message)


def _version_callback(value: bool) -> None:
    if value:
        print(f"crac {crac_py.version()}")
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


# The job's "already said" marker for the checkpoint-signal handler warning
# (loader/confine/confine_trap.c warn_ckpt_handler): a new launch says it again.
WARNED_MARKER = ".crac-warned-ckpt-signal"


def _forget_warnings(ckpt_dir: str | None) -> None:
    if ckpt_dir is not None:
        with contextlib.suppress(OSError):
            (Path(ckpt_dir) / WARNED_MARKER).unlink()


def _checkpoint_options(
    ckptdir: str | None,
    interval: int | None,
    ckpt_signal: int | None,
    keep: int,
    exit_after: bool,
) -> runner.CheckpointOptions:
    directory = Path(config.resolve("checkpoint_dir", ckptdir).value)
    if not directory.exists() and not directory.is_symlink():
        # As DMTCP creates its --ckptdir: private (images hold the program's memory). The ranks
        # of an MPI job start at once: another one may create it first.
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise config.ConfigError(
                f"cannot create checkpoint directory {directory}: {exc.strerror}"
            ) from None
    elif not directory.is_dir():
        raise config.ConfigError(f"checkpoint directory {directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise config.ConfigError(f"checkpoint directory {directory} is not writable")
    signal_number = config.int_option("sigckpt", ckpt_signal, 1, 64)
    if signal_number in (9, 19, 31, 32, 33, 62):
        raise config.ConfigError(f"signal {signal_number} cannot be the checkpoint signal")
    return runner.CheckpointOptions(
        ckpt_dir=str(directory.resolve()),
        interval=config.int_option("checkpoint_interval", interval, 0, 1 << 30),
        ckpt_signal=signal_number,
        keep=keep,
        exit_after=exit_after,
    )


def _coord_choice(
    join: bool,
    new: bool,
    any_: bool,
    none: bool,
    host: str | None,
    port: int | None,
    token: str | None,
) -> job.CoordChoice:
    choice = job.choose(join=join, new=new, none=none, host=host, port=port, token=token)
    if any_ and choice.mode == "none":
        if none or join or new:
            raise config.ConfigError("--any-coordinator cannot go with another coordinator mode")
        choice = job.CoordChoice("any", coord_client.endpoint(host, port, token), True)
    elif any_ and (join or new or none):
        raise config.ConfigError("--any-coordinator cannot go with another coordinator mode")
    return choice


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
    cuda_runtime: CudaRuntimeOpt = None,
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
    verbose: VerboseOpt = False,
    no_fork_writer: NoForkWriterOpt = False,
    ckpt_open_files: CkptOpenFilesOpt = False,
    compress: CompressOpt = None,
    incremental: IncrementalOpt = False,
    full_every: FullEveryOpt = None,
    coord_host: CoordHostOpt = None,
    coord_port: CoordPortOpt = None,
    coord_token: CoordTokenOpt = None,
    coord_token_file: CoordTokenFileOpt = None,
    join_coordinator: JoinOpt = False,
    new_coordinator: NewCoordOpt = False,
    any_coordinator: AnyCoordOpt = False,
    no_coordinator: NoCoordOpt = False,
) -> None:
    """Run PROGRAM [ARGS...] under crac (the process becomes crac's loader, then PROGRAM)."""
    after_dashes = "--" in sys.argv[: sys.argv.index(program)] if program in sys.argv else False
    if program.startswith("-") and not os.path.lexists(program) and not after_dashes:
        _error(
            f"unknown option {program!r}; put the program after '--' if its name starts with '-'"
        )
    try:
        info = preflight(program)
        dev = devices.resolve_device(
            config.resolve("device", device).value, uses_cuda=bool(info.cuda_imports)
        )
        runtime = str(devices.find_cuda_runtime(cuda_runtime)) if dev == "cuda" else None
        ckpt = _checkpoint_options(ckptdir, interval, ckpt_signal, keep, exit_after)
        _forget_warnings(ckpt.ckpt_dir)
        ckpt.verbose = verbose
        ckpt.no_fork_writer = no_fork_writer
        ckpt.ckpt_open_files = config.ckpt_open_files_spec(ckpt_open_files)
        ckpt.compress = config.compress_spec(compress)
        ckpt.incremental = config.incremental_spec(incremental, full_every, ckpt.compress)
        loader = str(paths.loader())
        coord_token = coord_client.token_option(coord_token, coord_token_file)
        choice = _coord_choice(
            join_coordinator,
            new_coordinator,
            any_coordinator,
            no_coordinator,
            coord_host,
            coord_port,
            coord_token,
        )
        if choice.mode == "none" and not no_coordinator and mpi_launch.is_rank():
            # A rank of an MPI job: the job is checkpointed whole, through one coordinator.
            choice = job.CoordChoice("any", coord_client.endpoint(None, None, None))
        coord_args = job.connect(choice, ckpt.interval, interval is not None)
    except (
        PreflightError,
        config.ConfigError,
        devices.DeviceError,
        paths.NativeMissingError,
        CoordError,
    ) as exc:
        _error(str(exc))
    dev_opts = runner.DeviceOptions(dev, sim_version, cuda_runtime=runtime)
    argv = [loader, *dev_opts.loader_args(), "--argv0", info.argv0, *ckpt.loader_args()]
    argv += coord_args
    try:
        shim_dir = paths.native_dir() / "shim"
        argv += mpi_launch.loader_args(Path(info.path), info.needed, shim_dir)
    except (mpi_launch.MpiUnsupported, OSError) as exc:
        _error(str(exc))
    argv += cuda12_launch.shim_args(info.needed)
    argv += ["--", info.path, *info.script_args, *(args or [])]
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
    cuda_runtime: CudaRuntimeOpt = None,
    no_truncate: Annotated[
        bool,
        typer.Option("--no-truncate", help="Keep files written after the checkpoint as they are."),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Restart even if the program or crac changed.")
    ] = False,
    allow_changed_files: AllowChangedOpt = False,
    lazy: LazyOpt = False,
    interval: IntervalOpt = None,
    keep: KeepOpt = 2,
    exit_after: ExitAfterOpt = False,
    verbose: VerboseOpt = False,
    no_fork_writer: NoForkWriterOpt = False,
    ckpt_open_files: CkptOpenFilesOpt = False,
    compress: CompressOpt = None,
    incremental: IncrementalOpt = False,
    full_every: FullEveryOpt = None,
    coord_host: CoordHostOpt = None,
    coord_port: CoordPortOpt = None,
    coord_token: CoordTokenOpt = None,
    coord_token_file: CoordTokenFileOpt = None,
    join_coordinator: JoinOpt = False,
    new_coordinator: NewCoordOpt = False,
    any_coordinator: AnyCoordOpt = False,
    no_coordinator: NoCoordOpt = False,
    tree_member: Annotated[
        list[str] | None,
        typer.Option(
            "--tree-member",
            metavar="GEN",
            help="A descendant's generation: restarted as a child of its restarted parent "
            "(the restart script gives them).",
        ),
    ] = None,
    search_dir: Annotated[
        str | None,
        typer.Option(
            "--search-dir",
            metavar="DIR",
            help="An image not at its path is looked for in DIR (by its process directory's "
            "name): images copied from another host's local directory.",
        ),
    ] = None,
) -> None:
    """Restart a checkpointed program where it stopped (a job directory: every process)."""
    try:
        coord_token = coord_client.token_option(coord_token, coord_token_file)
        choice = _coord_choice(
            join_coordinator,
            new_coordinator,
            any_coordinator,
            no_coordinator,
            coord_host,
            coord_port,
            coord_token,
        )
        path = hosts.locate(path, search_dir)
        tree_member = [hosts.locate(m, search_dir) for m in tree_member or []]
        rank = mpi_launch.launcher_rank()
        rank_dir = mpi_launch.rank_process_dir(path, rank) if rank is not None else None
        if rank_dir is not None:  # one rank of an MPI job, started by mpirun/srun
            path = str(rank_dir)
            if choice.mode == "none" and not no_coordinator:
                choice = job.CoordChoice("any", coord_client.endpoint(None, None, None))
        procs = job.job_process_dirs(path)
        if procs:
            passthrough = ["--keep", str(keep)]
            passthrough += [] if device is None else ["--device", device]
            passthrough += [] if sim_version is None else ["--sim-version", str(sim_version)]
            passthrough += [] if cuda_runtime is None else ["--cuda-runtime", cuda_runtime]
            passthrough += ["--no-truncate"] if no_truncate else []
            passthrough += ["--force"] if force else []
            passthrough += ["--allow-changed-files"] if allow_changed_files else []
            passthrough += ["--lazy"] if lazy else []
            passthrough += ["--exit-after-checkpoint"] if exit_after else []
            passthrough += ["--verbose"] if verbose else []
            passthrough += ["--no-fork-writer"] if no_fork_writer else []
            passthrough += ["--ckpt-open-files"] if ckpt_open_files else []
            passthrough += [] if compress is None else ["--compress", compress]
            passthrough += ["--incremental"] if incremental else []
            passthrough += [] if full_every is None else ["--full-every", str(full_every)]
            status = job.restart_job(Path(path), procs, choice, passthrough)
            raise typer.Exit(status)
    except (config.ConfigError, CoordError, image.ImageError, hosts.ImageNotHere) as exc:
        _error(str(exc))
    # Its descendants (--tree-member) and its children that had ended unwaited-for are forked
    # first, so each is the child of this process (launch/tree.py).
    tree_args: list[str] = []
    joining = choice.ep if choice.mode == "join" else None
    try:
        path, tree_args = tree.fork_tree(path, tree_member or [], joining)
    except (tree.TreeError, image.ImageError, OSError) as exc:
        if tree_member:
            _restart_error(str(exc), joining)
    try:
        gen = image.open_generation(path)
        loader = paths.loader()
        image.check_program(gen.manifest, force)
        image.check_loader(gen.manifest, loader, force)
        image.check_writable(gen, force)
        image_chain.links(gen.path, gen.manifest)  # an incremental one's parents are there
        lost = [str(x) for x in gen.manifest.get("not_saved") or []]
        if lost:  # the program may fail without them: say why before it does
            print(
                f"crac: warning: the checkpoint could not save {len(lost)} thing(s), which the "
                f"restarted program runs without: {'; '.join(lost)}",
                file=sys.stderr,
            )
        dev = gen.backend if device is None else devices.resolve_device(device)
        if dev == "cuda" and cuda_runtime is None:  # the runtime the image ran on (CUDA 12 or 13)
            cuda_runtime = cuda12_launch.image_runtime_major(gen.manifest)
        runtime = str(devices.find_cuda_runtime(cuda_runtime)) if dev == "cuda" else None
        ckpt = runner.CheckpointOptions(
            ckpt_dir=None,
            interval=config.int_option("checkpoint_interval", interval, 0, 1 << 30),
            ckpt_signal=gen.ckpt_signal,
            keep=keep,
            exit_after=exit_after,
            verbose=verbose,
            no_fork_writer=no_fork_writer,
            compress=config.compress_spec(compress),
            ckpt_open_files=config.ckpt_open_files_spec(
                ckpt_open_files, (gen.manifest.get("process") or {}).get("ckpt_open_files") is True
            ),
        )
        # Incremental images go on as the image was taken, unless the options say otherwise.
        recorded = (gen.manifest.get("incremental") or {}).get("full_every")
        if incremental or full_every is not None or not recorded:
            ckpt.incremental = config.incremental_spec(incremental, full_every, ckpt.compress)
        else:
            ckpt.incremental = int(recorded)
        core_size, header_crc = gen.core_check
        lazy = lazy or config.resolve("lazy_restart", None).value == "1"
        coord_args = job.connect(choice, ckpt.interval, interval is not None)
    except (
        image.ImageError,
        config.ConfigError,
        devices.DeviceError,
        paths.NativeMissingError,
        CoordError,
    ) as exc:
        _restart_error(str(exc), joining)
    argv = [
        str(loader),
        *runner.DeviceOptions(dev, sim_version, cuda_runtime=runtime).loader_args(),
    ]
    argv += ["--restart", str(gen.path), "--core-size", str(core_size)]
    argv += ["--header-crc", str(header_crc), *ckpt.loader_args()]
    if no_truncate:
        argv.append("--no-truncate")
    if allow_changed_files:
        argv.append("--allow-changed-files")
    if lazy:
        argv.append("--lazy")
    argv += coord_args
    argv += [*tree_args, "--", *gen.argv]
    try:
        runner.exec_loader(str(loader), argv)
    except OSError as exc:
        _restart_error(
            f"cannot exec {loader}: {exc.strerror}; reinstall crac (pip install .)", joining
        )


@app.command("doctor")
def doctor_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check this machine: kernel features, address windows, native parts, CUDA, backends."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from crac_py.cli import doctor

    results = doctor.run_checks()
    if as_json:
        print(json.dumps([c.as_json() for c in results], indent=2))
    else:
        styles = {doctor.OK: "green", doctor.WARN: "yellow", doctor.FAIL: "bold red"}
        table = Table(title=f"crac {crac_py.version()} doctor")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in results:
            style = styles.get(c.status, "cyan")
            table.add_row(Text(c.name), Text(c.status, style=style), Text(c.detail))
        Console().print(table)
    raise typer.Exit(doctor.exit_code(results))


# ---- the job's coordinator ----------------------------------------------------------------------


@app.command(
    "coordinator",
    epilog="Example: crac coordinator --daemon --exit-on-last -p 0 --port-file port.txt",
)
def coordinator_cmd(
    port_arg: Annotated[
        int | None, typer.Argument(metavar="[PORT]", help="The port, as the last argument.")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--coord-port",
            "--port",
            "-p",
            help="Port (env CRAC_/DMTCP_COORD_PORT; 7779; 0 = any free port).",
        ),
    ] = None,
    port_file: Annotated[
        Path | None, typer.Option("--port-file", help="Write the port listened on to this file.")
    ] = None,
    status_file: Annotated[
        Path | None,
        typer.Option("--status-file", help="Write Host:/Port: lines (MANA's rc file) here."),
    ] = None,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            "--coord-logfile",
            help="With --daemon: log here (default: next to --status-file, else nowhere).",
        ),
    ] = None,
    daemon: Annotated[
        bool, typer.Option("--daemon", help="Detach; return once it listens.")
    ] = False,
    exit_on_last: Annotated[
        bool, typer.Option("--exit-on-last", help="Exit when the last process has left.")
    ] = False,
    interval: IntervalOpt = None,
    exit_after_checkpoint: Annotated[
        bool,
        typer.Option(
            "--exit-after-checkpoint",
            "--exit-after-ckpt",
            help="End the job once each checkpoint is written (DMTCP's --exit-after-ckpt).",
        ),
    ] = False,
    phase_timeout: Annotated[
        float,
        typer.Option("--phase-timeout", min=0.1, help="Seconds a process may take per phase."),
    ] = 60.0,
    stale_timeout: Annotated[
        float,
        typer.Option("--stale-timeout", min=0, help="Exit after S s with no process (0: never)."),
    ] = 8 * 3600.0,
    host: Annotated[
        str,
        typer.Option("--host", "--bind", help="Address to listen on; not loopback needs --token."),
    ] = "127.0.0.1",
    token: Annotated[
        str | None,
        typer.Option("--token", help="Shared secret clients must present (env CRAC_COORD_TOKEN)."),
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option("--token-file", help="Read the shared secret from this file."),
    ] = None,
    idle_timeout: Annotated[
        float,
        typer.Option(
            "--idle-timeout",
            min=0.1,
            help="Drop a connection silent this long (s) before its first message or between "
            "commands.",
        ),
    ] = 30.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Log only problems.")] = False,
) -> None:
    """Run a job's coordinator (crac launch/restart processes join it; crac command asks it)."""
    from crac_py.coord import run as coord_run

    try:
        opts = coord_run.resolve_options(
            port=port if port is not None else port_arg,
            host=host,
            token=token,
            token_file=token_file,
            port_file=port_file,
            status_file=status_file,
            log_file=log_file,
            daemon=daemon,
            exit_on_last=exit_on_last,
            interval=interval,
            exit_after_checkpoint=exit_after_checkpoint,
            phase_timeout=phase_timeout,
            stale_timeout=stale_timeout,
            quiet=quiet,
            idle_timeout=idle_timeout,
        )
        status = coord_run.run(opts)
    except (config.ConfigError, coord_run.CoordStartError) as exc:
        _error(str(exc))
    raise typer.Exit(status)


@app.command(
    "command",
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "allow_interspersed_args": False,
        "help_option_names": [],  # command.py prints its own usage for --help (-h is the host)
    },
    short_help="Send a command to a job's coordinator (dmtcp_command's verbs: s l c bc kc i k q).",
)
def command_cmd(
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="[-h HOST] [-p PORT] [--json] VERB [N]", show_default=False),
    ] = None,
) -> None:
    """Send a command to a job's coordinator (see `crac command --help`)."""
    from crac_py.cli import command as command_mod

    raise typer.Exit(command_mod.run(args or []))


# ---- images -------------------------------------------------------------------------------------


def _verify_tables(reports: list) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from crac_py.image import verify

    styles = {verify.OK: "green", verify.WARN: "yellow", verify.FAIL: "bold red"}
    console = Console()
    for report in reports:
        title = f"crac verify {report.generation or report.target}"
        table = Table(title=title, title_justify="left")
        table.add_column("check")
        table.add_column("status")
        table.add_column("detail", overflow="fold")
        for c in report.checks:
            table.add_row(Text(c.name), Text(c.status, style=styles[c.status]), Text(c.detail))
        console.print(table)
        verdict = "VALID" if report.valid else f"INVALID: {report.reason}"
        console.print(Text(verdict, style="green" if report.valid else "bold red"))


@app.command("inspect", epilog="Example: crac inspect --json /scratch/ckpt/ckpt_app_0a0b0c0d-4242")
def inspect_cmd(
    path: Annotated[
        str,
        typer.Argument(metavar="CHECKPOINT", help="A checkpoint, process or generation directory."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print everything as JSON.")] = False,
) -> None:
    """Show what an image holds: regions by kind, threads, file descriptors, device state (a
    job's directory: its process tree)."""
    from crac_py.image import inspect as inspect_image
    from crac_py.image import tree_view

    if tree_view.is_tree(path):
        _inspect_tree(tree_view.read_tree(Path(path)), as_json)
        return
    try:
        from crac_py.image import trust

        gen = image.open_generation(path)
        trust.check_structure(gen.path, *gen.core_check)  # what a restart would refuse
        info = inspect_image.describe(gen)
    except image.ImageError as exc:
        _error(str(exc))
    if as_json:
        print(json.dumps(info, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    backend = info["backend"] or {}
    console.print(
        f"generation {info['generation']} of {info['program']} ({info['created']}), "
        f"backend {backend.get('name')} {backend.get('version')}"
    )
    t = Table(title="upper half: regions by kind")
    for col in ("kind", "regions", "MiB", "saved pages"):
        t.add_column(col)
    for kind, k in info["regions_by_kind"].items():
        t.add_row(kind, str(k["regions"]), f"{k['bytes'] / 2**20:.1f}", str(k["saved_pages"]))
    console.print(t)
    if info["chain"]:
        links = ", ".join(
            f"gen-{c['generation']:06d} ({c['status']})" if c["generation"] else c["status"]
            for c in info["chain"]
        )
        console.print(f"incremental chain (newest first): {links}")
    for loss in info["not_saved"]:
        console.print(f"not saved: {loss}")
    if info["excluded_bytes"]:
        console.print(
            f"excluded by the program (MADV_DONTDUMP): {info['excluded_bytes'] / 2**20:.1f} MiB"
        )
    t = Table(title="threads")
    for col in ("tid", "main"):
        t.add_column(col)
    for th in info["threads"]:
        t.add_row(str(th["tid"]), "yes" if th["main"] else "")
    console.print(t)
    t = Table(title="file descriptors")
    for col in ("fd", "kind", "offset", "path", "locks"):
        t.add_column(col)
    for fd in info["fds"]:
        t.add_row(str(fd["fd"]), fd["kind"], str(fd["offset"]), fd["path"], ", ".join(fd["locks"]))
    console.print(t)
    dev = info["device"]
    t = Table(title="device state")
    for col in ("allocation", "kind", "MiB"):
        t.add_column(col)
    for a in dev.get("allocations", []):
        t.add_row(hex(a["address"]), a["kind"], f"{a['size'] / 2**20:.2f}")
    console.print(t)
    console.print(
        f"streams {dev.get('streams', 0)}, events {dev.get('events', 0)}, "
        f"modules {dev.get('modules', 0)}, pinned ranges {dev.get('pinned', 0)}"
    )


def _inspect_tree(job_tree: Tree, as_json: bool) -> None:
    """`crac inspect JOBDIR`: the tree (crac_py/image/tree_view.py), its connections, and what
    makes it incomplete."""
    if as_json:
        print(json.dumps(job_tree.as_json(), indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    source = f"restart script {job_tree.script.name}" if job_tree.script else "latest generations"
    n = len(job_tree.members)
    console.print(f"process tree of {job_tree.job_dir} ({n} processes, {source})")
    t = Table(title="processes (ids as the program knows them)")
    for col in ("pid", "parent", "program", "generation", "pgid", "sid", "ended children"):
        t.add_column(col)

    def add(m: TreeMember, depth: int, seen: set[int]) -> None:
        seen.add(id(m))
        indent = "  " * depth + ("└ " if depth else "")
        zombies = " ".join(map(str, m.zombies))
        t.add_row(
            Text(f"{indent}{m.vpid}"),
            str(m.vppid),
            Text(Path(m.program).name),
            str(m.generation),
            str(m.pgid or "?"),
            str(m.sid or "?"),
            zombies,
        )
        for kid in job_tree.kids(m):
            if id(kid) not in seen:
                add(kid, depth + 1, seen)

    seen: set[int] = set()
    for root in job_tree.roots() or job_tree.members[:1]:
        add(root, 0, seen)
    for m in job_tree.members:  # a cycle of parents has no root: still listed
        if id(m) not in seen:
            add(m, 0, seen)
    console.print(t)
    conns = [(m, c) for m in job_tree.members for c in m.connections]
    if conns:
        t = Table(title="connections between processes")
        t.add_column("pid")
        t.add_column("record")
        for m, c in conns:
            t.add_row(str(m.vpid), Text(", ".join(f"{k}={v}" for k, v in c.items())))
        console.print(t)
    else:
        console.print("connections between processes: none recorded in the images")
    for p in job_tree.problems:
        console.print(Text(f"incomplete: {p}", style="bold red"))


@app.command("verify", epilog="Example: crac verify /scratch/ckpt/ckpt_app_0a0b0c0d-4242")
def verify_cmd(
    path: Annotated[
        str,
        typer.Argument(
            metavar="CHECKPOINT",
            help="A generation, a process directory, a latest link, or a job's directory.",
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check an image completely: checksums, format, program binary (exit 0 valid, 2 not)."""
    from crac_py.cli import progress
    from crac_py.image import verify

    try:
        total = sum(verify.total_bytes(g) for g in image.resolve_generations(path))
    except image.ImageError:
        total = 0
    with progress.DelayedProgress("verifying", total=total or None) as bar:
        reports = verify.verify(path, bar.advance)
    from crac_py.image import tree_view

    # A job's tree: every member there, of one checkpoint (crac_py/image/tree_view.py).
    tree_problems = tree_view.read_tree(Path(path)).problems if tree_view.is_tree(path) else []
    if tree_problems:
        tree_report = verify.Report(path)
        tree_report.checks += [verify.Check("tree", verify.FAIL, p) for p in tree_problems]
        reports.append(tree_report)
    if as_json:
        print(json.dumps([r.as_json() for r in reports], indent=2))
    else:
        _verify_tables(reports)
    bad = [r for r in reports if not r.valid]
    if bad:
        for r in bad:
            if r.checks and all(c.name == "tree" for c in r.checks):
                continue  # one line per problem, below
            print(f"crac: error: {r.generation or r.target}: {r.reason}", file=sys.stderr)
        for p in tree_problems:
            print(f"crac: error: {p}", file=sys.stderr)
        raise typer.Exit(EXIT_REFUSED)


@app.command(
    "compact", epilog="Example: crac compact --keep 1 /scratch/ckpt/ckpt_app_0a0b0c0d-4242"
)
def compact_cmd(
    path: Annotated[
        str,
        typer.Argument(
            metavar="[CHECKPOINT_DIR_OR_GENERATION]",
            help="A checkpoint directory (default: the working directory), a process directory, "
            "its latest generation or latest link.",
        ),
    ] = ".",
    keep: Annotated[
        int | None,
        typer.Option(
            "--keep",
            min=1,
            help="Then remove all but the newest N generations the chain no longer needs "
            "(default: remove none).",
        ),
    ] = None,
) -> None:
    """Make an incremental chain one full generation (N+1), so older ones can go."""
    from crac_py.image import compact

    try:
        status = compact.compact(path, keep)
    except (image.ImageError, paths.NativeMissingError) as exc:
        _error(str(exc))
    raise typer.Exit(status)


@app.command(
    "gdb",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    epilog="Example: crac gdb 4242 -batch -ex 'thread apply all bt'",
)
def gdb_cmd(
    pid: Annotated[int, typer.Argument(help="The process of a program under crac.")],
    gdb_args: Annotated[
        list[str] | None, typer.Argument(help="Passed on to gdb.", show_default=False)
    ] = None,
) -> None:
    """Attach gdb to a program under crac, with the program's own symbols.

    `gdb -p PID` alone finds only crac's loader; crac's SIGSYS traps pass without stopping."""
    import shutil

    from crac_py.debug import DebugError, gdb_commands

    gdb = shutil.which("gdb")
    if gdb is None:
        _error("gdb is not installed (Debian: apt-get install gdb)")
    try:
        commands = gdb_commands(pid)
    except DebugError as exc:
        _error(str(exc))
    ex = [arg for cmd in commands for arg in ("-ex", cmd)]
    os.execv(gdb, [gdb, "-q", "-p", str(pid), *ex, *(gdb_args or [])])


@app.command(
    "kernels",
    epilog="Example: crac kernels app.cu -o app.kernels.so   (next to the nvcc-built ./app)",
)
def kernels_cmd(
    sources: Annotated[
        list[Path], typer.Argument(help="The program's CUDA C++ sources (.cu).", show_default=False)
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="The library to write (default: FIRST_SOURCE_STEM.kernels.so here). The sim "
            "finds PROGRAM.kernels.so next to the program, or the path in $CRAC_KERNELS.",
        ),
    ] = None,
    cxx: Annotated[
        str | None, typer.Option("--cxx", help="C++ compiler (default: $CXX, g++, clang++).")
    ] = None,
    flags: Annotated[
        list[str] | None,
        typer.Option("-X", "--compiler-flag", help="Extra compiler flag (e.g. -X -DN=4)."),
    ] = None,
) -> None:
    """Compile the device code of .cu sources for the CPU: the kernels the sim runs for a program
    built by nvcc (docs/SIM.md "Programs built by nvcc")."""
    from crac_py.kernels.build import KernelsError, build

    out = output or Path(f"{sources[0].stem}.kernels.so")
    try:
        kernels = build(sources, out, cxx=cxx, extra=list(flags or []))
    except KernelsError as exc:
        _error(str(exc), 1)
    for k in kernels:
        if k.expr is None:
            print(
                f"crac: warning: kernel {k.pretty} cannot be named from outside its source "
                "(anonymous namespace?): launching it will fail",
                file=sys.stderr,
            )
    usable = sum(1 for k in kernels if k.expr is not None)
    print(f"crac: {out}: {usable} kernel{'s' if usable != 1 else ''}")


def _dmtcp_spellings() -> None:
    """sys.argv with DMTCP's options of launch, restart and coordinator made crac's
    (crac_py/cli/dmtcp_spellings.py); one refused ends here with its reason."""
    from crac_py.cli import dmtcp_spellings

    name = sys.argv[1] if len(sys.argv) > 1 else ""
    table = dmtcp_spellings.SPELLINGS.get(name, {})
    # Most lines hold none: the CLI's command is not built twice for them.
    if not any(a.partition("=")[0] in table for a in sys.argv[2:]):
        return
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    takes_value = {
        opt
        for p in command.params
        if p.param_type_name == "option" and not getattr(p, "is_flag", False)
        for opt in (*p.opts, *p.secondary_opts)
    }
    try:
        args, notes = dmtcp_spellings.rewrite(
            name, sys.argv[2:], takes_value, stop_at_operand=name == "launch"
        )
    except dmtcp_spellings.SpellingError as exc:
        print(f"crac: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    for note in notes:
        print(f"crac: note: {note}", file=sys.stderr)
    sys.argv[2:] = args


def main() -> None:
    """Runs the CLI. Every error is one `crac: error:` line on stderr with exit status 2 (usage
    errors included, which click would draw in a box), and Ctrl-C ends quietly with 130."""
    try:  # typer 0.2x carries its own click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions as click  # type: ignore[no-redef]

    _dmtcp_spellings()
    try:
        status = app(prog_name="crac", standalone_mode=False)
    except click.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(EXIT_REFUSED)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "crac"
        message = exc.format_message().rstrip(".")
        print(f"crac: error: {message} (see '{command} --help')", file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    except click.ClickException as exc:
        print(f"crac: error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code if exc.exit_code else EXIT_REFUSED)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)
