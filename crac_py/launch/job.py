"""The coordinator options of `crac launch` / `crac restart`, and restarting a whole job.

Modes, as DMTCP's: `--join-coordinator` (one must answer), `--new-coordinator` (start one as a
daemon with --exit-on-last; none may answer yet), `--no-coordinator` (a single process driven by
its own signal: today's behaviour), and, when only a host, port or token is given (flag or
environment), join the coordinator that answers there or start one. With no coordinator option
and no CRAC_/DMTCP_COORD_* variable the process runs without a coordinator.

The loader gets `--coord-host H --coord-port P [--coord-token T]` and connects itself.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from crac_py import config
from crac_py.coord import client as coord_client
from crac_py.coord import restart_script
from crac_py.coord.client import CoordError, CoordinatorNotFound, Endpoint
from crac_py.image import generation as image
from crac_py.launch import runner

_ENV = (
    "CRAC_COORD_HOST",
    "DMTCP_COORD_HOST",
    "DMTCP_HOST",
    "CRAC_COORD_PORT",
    "DMTCP_COORD_PORT",
    "DMTCP_PORT",
    "CRAC_COORD_TOKEN",
)


# A coordinator started on the job's behalf exits when no process has been connected for this
# long (its processes join within seconds; this only ends one that nobody ever joined).
AUTO_STALE_S = 600.0


@dataclass(frozen=True)
class CoordChoice:
    mode: str  # "none", "join", "new" or "any"
    ep: Endpoint | None = None
    explicit_endpoint: bool = False  # host or port given on the command line


def choose(
    *,
    join: bool,
    new: bool,
    none: bool,
    host: str | None,
    port: int | None,
    token: str | None,
    environ: Mapping[str, str] | None = None,
) -> CoordChoice:
    env = os.environ if environ is None else environ
    if join + new + none > 1:
        raise config.ConfigError(
            "give at most one of --join-coordinator, --new-coordinator and --no-coordinator"
        )
    if none:
        return CoordChoice("none")
    ep = coord_client.endpoint(host, port, token, env)
    explicit = host is not None or port is not None
    if join:
        return CoordChoice("join", ep, explicit)
    if new:
        return CoordChoice("new", ep, explicit)
    if explicit or token is not None or any(env.get(name) for name in _ENV):
        return CoordChoice("any", ep, explicit)
    return CoordChoice("none")


def _joinable(ep: Endpoint) -> None:
    """A coordinator answers at EP and accepts our token; else CoordError."""
    if ep.port == 0:
        raise CoordError("--join-coordinator needs the coordinator's port (-p/--coord-port)")
    reply = coord_client.command(ep, "status")
    if not reply.get("ok"):
        raise CoordError(f"the coordinator at {ep} refused: {reply.get('error')}")


def _start(ep: Endpoint, interval: int) -> int:
    """Starts a coordinator daemon for EP on this host; its port."""
    if not coord_client.is_local(ep.host):
        raise CoordinatorNotFound(ep.host, ep.port)
    # Imported here: it brings asyncio (~20 ms), which a launch without a new coordinator
    # does not need.
    from crac_py.coord import run as coord_run

    opts = coord_run.RunOptions(
        port=ep.port,
        token=ep.token or None,
        exit_on_last=True,
        interval=interval,
        quiet=True,
        stale_timeout=AUTO_STALE_S,
    )
    try:
        return coord_run.spawn_daemon(opts)
    except coord_run.CoordStartError as exc:
        raise CoordError(str(exc)) from None


def connect(choice: CoordChoice, interval: int, interval_flag: bool) -> list[str]:
    """Joins or starts the coordinator CHOICE names; the loader's arguments for it."""
    if choice.mode == "none" or choice.ep is None:
        return []
    ep = choice.ep
    host = ep.host
    if choice.mode == "join" or (choice.mode == "any" and ep.port and coord_client.answers(ep)):
        if interval_flag:
            raise config.ConfigError(
                "--interval cannot be given when joining a coordinator: the interval is the "
                "job's; set it with `crac coordinator -i S` or `crac command -i S`"
            )
        _joinable(ep)
        port = ep.port
    elif choice.mode == "new" and ep.port and coord_client.answers(ep):
        raise CoordError(f"a coordinator already answers at {ep}; use --join-coordinator")
    else:
        try:
            port = _start(ep, interval)
        except CoordError:
            if choice.mode != "any" or not ep.port or not coord_client.answers(ep):
                raise
            _joinable(ep)  # several processes started at once: another one started it
            port = ep.port
        else:
            host = "127.0.0.1"
    args = ["--coord-host", host, "--coord-port", str(port)]
    if ep.token:
        args += ["--coord-token", ep.token]
    return args


# ---- whole jobs ------------------------------------------------------------------------------


def job_process_dirs(arg: str) -> list[Path]:
    """The process directories of a job directory ARG (two or more `ckpt_*` directories of one
    job, and no generation or `latest` of its own); [] for anything else (several independent
    runs in one directory are resolve_generation's)."""
    path = Path(arg)
    if not path.is_dir() or (path / image.MANIFEST).exists() or (path / "latest").exists():
        return []
    procs = image.process_dirs(path)
    return procs if len(procs) > 1 and image.is_job(path, procs) else []


# Where srun, mpirun and PMI launchers give a task its number and the number of tasks (the
# restart script's `--part auto` reads the same).
TASK_VARS = (
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
)


def launcher_tasks() -> int:
    """How many tasks the launcher that started this process started (1 outside one)."""
    env = os.environ
    for rank, size in TASK_VARS:
        if not (env.get(rank, "").isdigit() and env.get(size, "").isdigit()):
            continue
        # A Slurm batch shell has SLURM_PROCID and SLURM_NTASKS too, but is no task of a step:
        # only srun's tasks have a (small) step id.
        step = env.get("SLURM_STEP_ID", "")
        if rank == "SLURM_PROCID" and not (step.isdigit() and int(step) < 0xFFFFFFF0):
            continue
        return int(env[size])
    return 1


def restart_job(
    job_dir: Path,
    procs: list[Path],
    choice: CoordChoice,
    passthrough: list[str],
) -> int:
    """`crac restart JOBDIR`: runs the job's restart script (from JOBDIR wherever it is now);
    without one, joins or starts a coordinator and restarts every process directory's latest
    generation. Returns the first non-zero exit status, else 0."""
    ep = choice.ep if choice.ep is not None else coord_client.endpoint(None, None, None)
    env = dict(os.environ)
    if ep.token:
        env["CRAC_COORD_TOKEN"] = ep.token
    script = job_dir / restart_script.SCRIPT_NAME
    if script.is_file():
        argv = ["/bin/sh", str(script), "--ckptdir", str(job_dir.resolve())]
        if launcher_tasks() > 1:  # one task of srun/mpirun: its share (docs/HOSTS.md)
            argv += ["--part", "auto"]
        if choice.explicit_endpoint:
            argv += ["--coord-host", ep.host, "--coord-port", str(ep.port)]
        argv += ["--", *passthrough]
        return subprocess.call(argv, env=env)
    for proc in procs:  # refuse before starting anything
        image.resolve_generation(str(proc))
    port = ep.port
    host = ep.host
    started = False
    if not (port and coord_client.answers(ep)):
        port = _start(ep, 0)
        host = "127.0.0.1"
        started = True
    target = Endpoint(host, port, ep.token)
    coord_client.command(target, "expect", len(procs))
    crac = shlex.split(runner.crac_command())
    children = [
        subprocess.Popen(
            [
                *crac,
                "restart",
                "--join-coordinator",
                "--coord-host",
                host,
                "--coord-port",
                str(port),
                *passthrough,
                str(proc),
            ],
            env=env,
        )
        for proc in procs
    ]
    status = 0
    for child in children:
        rc = child.wait()
        if status == 0 and rc != 0:
            status = rc if rc > 0 else 128 - rc
    if started:  # a coordinator started here that no process joined (all refused) goes too
        try:
            if coord_client.status(target).get("num_peers") == 0:
                coord_client.command(target, "quit")
        except CoordError:
            pass
    return status
