"""File descriptors beyond files and pipes that must come back at restart (loader/state/fd_*.c):
epoll with its interest list, timerfd, signalfd, eventfd with its count, inotify with its watches,
sockets, a pipe whose writer closed, shared memory. Each program checks itself and runs through two
checkpoint -> SIGKILL -> restart cycles (tests/ckpt_harness.py), compared with a native run."""

from __future__ import annotations

import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from ckpt_harness import run_cycles
from conftest import APPS_DIR, CFLAGS

_BUILT: dict[str, Path] = {}


def build(name: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/apps/NAME.c compiled once per session with conftest's flags."""
    if name not in _BUILT:
        exe = tmp_path_factory.mktemp("fd_apps") / name
        cmd = ["gcc", *CFLAGS, "-o", str(exe), str(APPS_DIR / f"{name}.c")]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            pytest.fail(f"cannot build {name}.c:\n{' '.join(cmd)}\n{res.stderr}")
        _BUILT[name] = exe
    return _BUILT[name]


def test_epoll_timerfd_signalfd_eventfd(tmp_path, tmp_path_factory):
    """An epoll loop over an eventfd, a periodic timerfd, a signalfd and pipes (edge-triggered, a
    fired one-shot) keeps its registrations and their data words; the eventfd keeps its count, a
    one-hour timer stays armed, the flags stay."""
    run_cycles(build("ckpt_evloop", tmp_path_factory), [], tmp_path, cycles=2)


def test_inotify(tmp_path, tmp_path_factory):
    """inotify watches on a scratch directory and a subdirectory (with a removed watch between
    them) come back under the same watch numbers, with their masks: the events after a restart
    name the same watches."""
    run_cycles(build("ckpt_inotify", tmp_path_factory), ["{work}"], tmp_path, cycles=2)


def test_unix_sockets(tmp_path, tmp_path_factory):
    """Unix sockets within the process: a socketpair stream and a seqpacket pair with a message in
    flight, a datagram ping-pong with a second thread (a reply queued), listeners on a path and on
    an abstract name (accepting after a restart), a long-lived accepted connection with bytes in
    flight and a connection still waiting to be accepted."""
    run_cycles(build("ckpt_sockets", tmp_path_factory), ["unix", "{work}"], tmp_path, cycles=2)


def test_tcp_loopback(tmp_path, tmp_path_factory):
    """A loopback TCP listener (same port, accepting after a restart) and a connected pair in the
    same process with bytes in flight both ways; TCP_NODELAY, SO_RCVBUF, O_NONBLOCK kept."""
    run_cycles(build("ckpt_sockets", tmp_path_factory), ["tcp", "{work}"], tmp_path, cycles=2)


class _Echo(socketserver.StreamRequestHandler):
    """Answers each "ping K" line with "pong K"."""

    def handle(self) -> None:
        for line in self.rfile:
            self.wfile.write(line.replace(b"ping", b"pong"))


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A line echo server on 127.0.0.1 run by the test (outside crac): its port."""
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server.server_address[1]
        server.shutdown()


def test_outside_tcp_connection(tmp_path, tmp_path_factory, echo_port):
    """A TCP connection to a server outside the job comes back as a socket that fails as a dropped
    connection does (EPIPE or ECONNRESET, never a /dev/null that reads end of file), with a
    warning at restart; the program reconnects and its output is the uninterrupted run's."""
    res = run_cycles(
        build("ckpt_sockets", tmp_path_factory), ["outside", str(echo_port)], tmp_path, cycles=2
    )
    logs = tmp_path / "logs"
    for i in (1, 2):
        err = (logs / f"restart{i}.err").read_text()
        assert "a connection leaving the process cannot be restored" in err, err
        assert "ckpt_sockets: reconnected after" in err, err
    assert res.segments


def test_python_selectors_and_asyncio(tmp_path):
    """The venv's python under crac: a selectors (epoll) loop over a socketpair with bytes in
    flight, and an asyncio loop (its epoll and wake-up socketpair) kept across steps."""
    program = APPS_DIR / "py" / "ckpt_selectors.py"
    run_cycles(Path(sys.executable), [str(program), "60"], tmp_path, cycles=2)


def test_pipes_and_fifos(tmp_path, tmp_path_factory):
    """A pipe whose writer closed keeps its bytes (and ends after them); a 256 KiB pipe full of
    bytes comes back whole; FIFOs opened by path come back with the bytes in them, one with both
    ends held, one whose writer closed."""
    run_cycles(build("ckpt_pipes", tmp_path_factory), ["{work}"], tmp_path, cycles=2)


def test_shared_memory_mapped_twice(tmp_path, tmp_path_factory):
    """Shared memory mapped twice in one process (a POSIX shm object kept and one unlinked, a
    MAP_SHARED|MAP_ANONYMOUS region duplicated with mremap, a removed SysV segment attached twice)
    is shared again after a restart: each mapping sees the other's writes, earlier bytes kept."""
    run_cycles(build("ckpt_shm", tmp_path_factory), [], tmp_path, cycles=2)
