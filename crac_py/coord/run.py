"""`crac coordinator`: bind, port and status files, daemon, signals; then coordinator.py serves.

The socket is bound and listening before anything else happens (and before `--daemon` detaches),
so a busy port is one clear error line from the command the user ran, and a client that connects
as soon as `crac coordinator --daemon` has returned is queued, never refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import resource
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crac_py import config
from crac_py.coord import client as coord_client
from crac_py.coord import registry
from crac_py.coord.server import CoordConfig, Coordinator
from crac_py.launch import runner


class CoordStartError(Exception):
    """The coordinator cannot start; the message says why and what to do."""


@dataclass
class RunOptions:
    port: int
    host: str = "127.0.0.1"
    token: str | None = None
    port_file: Path | None = None
    status_file: Path | None = None
    log_file: Path | None = None
    daemon: bool = False
    exit_on_last: bool = False
    exit_after_checkpoint: bool = False
    interval: int = 0
    phase_timeout: float = 60.0
    stale_timeout: float = 8 * 3600.0
    quiet: bool = False
    idle_timeout: float = 30.0


def resolve_options(
    *,
    port: int | None,
    host: str,
    token: str | None,
    token_file: str | None,
    port_file: Path | None,
    status_file: Path | None,
    log_file: Path | None,
    daemon: bool,
    exit_on_last: bool,
    interval: int | None,
    exit_after_checkpoint: bool = False,
    phase_timeout: float,
    stale_timeout: float,
    quiet: bool,
    idle_timeout: float,
) -> RunOptions:
    """RunOptions from `crac coordinator`'s options, with what they leave out from the
    environment (CRAC_/DMTCP_ port, token, interval); ConfigError on a bad value."""
    resolved = config.resolve("coord_port", None if port is None else str(port))
    where = "-p/--coord-port" if resolved.source == "flag" else resolved.source
    return RunOptions(
        port=coord_client.parse_port(resolved.value, where),
        host=host,
        token=config.resolve(
            "coord_token", coord_client.token_option(token, token_file, "--token")
        ).value
        or None,
        port_file=port_file,
        status_file=status_file,
        log_file=log_file,
        daemon=daemon,
        exit_on_last=exit_on_last,
        exit_after_checkpoint=exit_after_checkpoint,
        interval=config.int_option("checkpoint_interval", interval, 0, 1 << 30),
        phase_timeout=phase_timeout,
        stale_timeout=stale_timeout,
        quiet=quiet,
        idle_timeout=idle_timeout,
    )


def is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CoordStartError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CoordStartError(
                f"port {port} on {host} is already in use (another coordinator? check with "
                f"`crac command -p {port} status`); use another -p PORT, or -p 0 with --port-file"
            ) from None
        raise CoordStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.set_inheritable(False)
    return sock


def _write_atomic(path: Path, text: str) -> None:
    """A fresh random temporary name (O_EXCL|O_NOFOLLOW: never a planted link, even in /tmp),
    then a rename over PATH."""
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    tmp = f".{path.name}.tmp-{secrets.token_hex(8)}"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dfd)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
        os.rename(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    finally:
        os.close(dfd)


def _status_text(cfg: CoordConfig, opts: RunOptions) -> str:
    name = socket.gethostname()
    try:
        ip = socket.getaddrinfo(opts.host, None, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror:
        ip = opts.host
    interval = f"{cfg.interval}" if cfg.interval else "0 (checkpoint manually)"
    return (
        f"Coordinator started: {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        "Status...\n"
        f"Host: {name} ({ip})\n"
        f"Port: {cfg.port}\n"
        f"Checkpoint Interval: {interval}\n"
        f"Exit on last client: {int(opts.exit_on_last)}\n"
        f"PID: {os.getpid()}\n"
    )


def _redirect(log_file: Path | None) -> None:
    fd_in = os.open(os.devnull, os.O_RDONLY)
    target = str(log_file) if log_file is not None else os.devnull
    fd_out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd_in, 0)
    os.dup2(fd_out, 1)
    os.dup2(fd_out, 2)
    os.close(fd_in)
    os.close(fd_out)


_READY_FD: int | None = None  # in a daemon: the pipe on which it tells its starter it is ready


def _daemonize(log_file: Path | None) -> tuple[bool, str | None]:
    """Double fork. In the original process: waits until the daemon says it is ready and
    returns (False, None), or (False, its error). In the daemon (detached, in a new session,
    output to LOG_FILE or /dev/null): returns (True, None)."""
    global _READY_FD
    r, w = os.pipe()
    pid = os.fork()
    if pid > 0:
        os.close(w)
        os.waitpid(pid, 0)
        data = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(r, 4096)
            if not chunk:
                break
            data += chunk
        os.close(r)
        if data.startswith(b"ok"):
            return False, None
        return False, data.decode(errors="replace").strip() or "the daemon did not start"
    os.close(r)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    _READY_FD = w
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        _redirect(log_file)
    except OSError as exc:
        _ready(f"cannot open the log file {log_file}: {exc.strerror}")
        os._exit(2)
    return True, None


def _ready(error: str | None = None) -> None:
    global _READY_FD
    if _READY_FD is None:
        return
    try:
        os.write(_READY_FD, b"ok\n" if error is None else error.encode())
    finally:
        os.close(_READY_FD)
        _READY_FD = None


def _log_file(opts: RunOptions) -> Path | None:
    if opts.log_file is not None:
        return opts.log_file
    if opts.status_file is not None:
        return opts.status_file.with_name(opts.status_file.name + ".log")
    return None


def raise_fd_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: one descriptor per process of the job, and the
    per-uid bound on other connections (server.py) is what keeps them in check, not 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _prepare(opts: RunOptions) -> tuple[socket.socket, CoordConfig]:
    if not is_loopback(opts.host) and not opts.token:
        raise CoordStartError(
            f"listening on {opts.host} (not loopback) needs a shared secret: give --token T or "
            "set CRAC_COORD_TOKEN, and the same to every crac launch/restart/command"
        )
    # Paths are made absolute before a daemon changes its directory to /.
    for name in ("port_file", "status_file", "log_file"):
        value = getattr(opts, name)
        if value is not None:
            setattr(opts, name, Path(os.path.abspath(value)))
    raise_fd_limit()
    sock = bind(opts.host, opts.port)
    port = sock.getsockname()[1]
    cfg = CoordConfig(
        host=opts.host,
        port=port,
        token=opts.token or None,
        interval=opts.interval,
        phase_timeout=opts.phase_timeout,
        exit_on_last=opts.exit_on_last,
        exit_after_checkpoint=opts.exit_after_checkpoint,
        stale_timeout=opts.stale_timeout,
        quiet=opts.quiet,
        crac_cmd=runner.crac_command(),
        idle_timeout=opts.idle_timeout,
    )
    return sock, cfg


def _serve_here(sock: socket.socket, cfg: CoordConfig, opts: RunOptions) -> int:
    """Runs the coordinator in this process (the daemon, or the foreground command)."""
    if opts.status_file is not None:
        try:
            _write_atomic(opts.status_file, _status_text(cfg, opts))
        except OSError as exc:
            message = f"cannot write the status file {opts.status_file}: {exc.strerror}"
            if _READY_FD is None:
                raise CoordStartError(message) from None
            _ready(message)
            return 2
    # The port file last: whoever waits for it finds the status file written too.
    if opts.port_file is not None:
        try:
            _write_atomic(opts.port_file, f"{cfg.port}\n")
        except OSError as exc:
            message = f"cannot write the port file {opts.port_file}: {exc.strerror}"
            if _READY_FD is None:
                raise CoordStartError(message) from None
            _ready(message)
            return 2
    coordinator = Coordinator(cfg)
    coordinator.log(f"listening on {opts.host}:{cfg.port} (pid {os.getpid()})", always=True)
    listed = registry.entry_path(cfg.port)
    if listed is not None:
        try:
            _write_atomic(listed, registry.entry_text(opts.host, cfg.port, cfg.token))
        except OSError:
            listed = None  # served all the same, unlisted
    _ready()
    try:
        reason = asyncio.run(_serve(coordinator, sock))
    finally:
        registry.unregister(listed)
    if opts.status_file is not None:
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(opts.status_file, flags)  # a link planted there since: not followed
            with os.fdopen(fd, "a") as fh:
                fh.write(f"Coordinator exited: {time.strftime('%Y-%m-%d %H:%M:%S')} ({reason})\n")
        except OSError:
            pass
    return 0


def run(opts: RunOptions) -> int:
    """`crac coordinator`: serves until it stops and returns the exit status; with --daemon,
    returns 0 once the daemon serves. Raises CoordStartError when it cannot start."""
    sock, cfg = _prepare(opts)
    if not opts.daemon:
        return _serve_here(sock, cfg, opts)
    port = _start_daemon(sock, cfg, opts)
    if not opts.quiet:
        print(f"crac coordinator: listening on {opts.host}:{port} (daemon)", file=sys.stderr)
    return 0


def _start_daemon(sock: socket.socket, cfg: CoordConfig, opts: RunOptions) -> int:
    in_daemon, error = _daemonize(_log_file(opts))
    if in_daemon:
        os.chdir("/")
        try:
            status = _serve_here(sock, cfg, opts)
        except BaseException as exc:  # never return into the caller's code path
            print(f"crac coordinator: fatal: {exc!r}", file=sys.stderr, flush=True)
            status = 2
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sock.close()
    if error is not None:
        raise CoordStartError(error)
    return cfg.port


# Variables that carry a coordinator token: the daemon gets the token in the first only.
TOKEN_ENV = ("CRAC_COORD_TOKEN", "DMTCP_COORD_TOKEN", "CRAC_COORD_TOKEN_FILE")


def spawn_daemon(opts: RunOptions) -> int:
    """Starts a coordinator daemon for `crac launch --new-coordinator` and the like, and returns
    its port once it serves.

    The daemon is a fresh `crac coordinator --daemon` process, not a fork of this one: a fork
    would show this command line (a `--coord-token T` included) in ps for the daemon's whole
    life. Its token travels in its environment (CRAC_COORD_TOKEN), which only its user reads."""
    env = {k: v for k, v in os.environ.items() if k not in TOKEN_ENV}
    if opts.token:
        env["CRAC_COORD_TOKEN"] = opts.token
    with tempfile.TemporaryDirectory(prefix="crac-coord-") as tmp:
        port_file = Path(tmp) / "port"
        argv = [
            *shlex.split(runner.crac_command()),
            "coordinator",
            "--daemon",
            "--coord-port",
            str(opts.port),
            "--host",
            opts.host,
            "--port-file",
            str(port_file),
            "--interval",
            str(opts.interval),
            "--phase-timeout",
            repr(opts.phase_timeout),
            "--stale-timeout",
            repr(opts.stale_timeout),
            "--idle-timeout",
            repr(opts.idle_timeout),
        ]
        argv += ["--exit-on-last"] if opts.exit_on_last else []
        argv += ["--exit-after-checkpoint"] if opts.exit_after_checkpoint else []
        argv += ["--quiet"] if opts.quiet else []
        for name, flag in (("status_file", "--status-file"), ("log_file", "--log-file")):
            value = getattr(opts, name)
            if value is not None:
                argv += [flag, os.path.abspath(value)]
        try:
            cp = subprocess.run(
                argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CoordStartError(f"cannot start a coordinator: {exc}") from None
        if cp.returncode != 0:
            lines = cp.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"]
            raise CoordStartError(lines[-1].removeprefix("crac: error: "))
        try:
            return int(port_file.read_text())
        except (OSError, ValueError):
            raise CoordStartError("the coordinator daemon did not say its port") from None


async def _serve(coordinator: Coordinator, sock: socket.socket) -> str:
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:  # as DMTCP: ^C quits and the processes of the job die too
        for peer in list(coordinator.peers.values()):
            peer.send({"type": "kill"})
        coordinator.log("interrupted: killing the job's processes and exiting", always=True)
        coordinator.stop("SIGINT")

    def on_sigterm() -> None:  # the processes go on without a coordinator
        coordinator.log("terminated (SIGTERM); the processes go on alone", always=True)
        coordinator.stop("SIGTERM")

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    return await coordinator.serve(sock)
