"""File descriptors beyond files and pipes that must come back at restart (loader/state/fd_*.c):
epoll with its interest list, timerfd, signalfd, eventfd with its count, inotify with its watches,
sockets, a pipe whose writer closed, shared memory. Each program checks itself and runs through two
checkpoint -> SIGKILL -> restart cycles (tests/ckpt_harness.py), compared with a native run."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ckpt_harness import (
    checkpoint,
    launch,
    launch_checkpoint_kill,
    launch_image,
    restart,
    run_cycles,
    wait_exit,
    wait_for_step,
)
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


def test_unix_socket_names_whose_directory_is_gone(tmp_path, tmp_path_factory):
    """The same, the directory of the sockets' names removed while the job is down, as a process
    of the killed run that went on past the checkpoint removes its temporary directory (a PyTorch
    DataLoader worker's, where Python's multiprocessing binds its resource sharer's listener):
    the restart makes the directory again and binds the names there."""
    app = build("ckpt_sockets", tmp_path_factory)
    run_cycles(app, ["unix", "{work}"], tmp_path, cycles=2, between=shutil.rmtree)


def test_tcp_loopback(tmp_path, tmp_path_factory):
    """A loopback TCP listener (same port, accepting after a restart) and a connected pair in the
    same process with bytes in flight both ways; TCP_NODELAY, SO_RCVBUF, O_NONBLOCK kept."""
    run_cycles(build("ckpt_sockets", tmp_path_factory), ["tcp", "{work}"], tmp_path, cycles=2)


def _port(hexaddr: str) -> int:
    """The port of a sockaddr_in as files/socket-N writes it (hex bytes: family, port, ...)."""
    return int(hexaddr[4:8], 16)


def _bind_when_free(sk: socket.socket, port: int) -> None:
    """SK bound to 127.0.0.1:PORT once the killed process's socket there has gone past its last
    closing state (SO_REUSEADDR binds over TIME_WAIT only; on a loaded machine the kernel may take
    a while to get the orphaned ends there). An ephemeral port can also be another connection's
    by now (other tests beside this one make loopback connections all the time): then the
    lingering connection cannot be set up this time, which the skip says."""
    deadline = time.monotonic() + 5
    while True:
        try:
            sk.bind(("127.0.0.1", port))
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if time.monotonic() > deadline:
                pytest.skip(f"port {port} of the killed program is another socket's by now")
            time.sleep(0.05)


def test_tcp_pair_beside_its_lingering_connection(tmp_path, tmp_path_factory):
    """The killed process's loopback connection may linger in TIME_WAIT with the very addresses
    the restart connects the pair from and to (it closed without unread bytes, which the load of
    the machine decides): the restart then connects from another port instead of giving the
    program a dropped connection (test_tcp_loopback failed now and then with "cannot connect
    again (Address already in use)"). This test holds such a connection itself."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    work = tmp_path / "work"
    work.mkdir()
    app = build("ckpt_sockets", tmp_path_factory)
    gen = launch_image(app, ["tcp", str(work)], ckptdir, out_dir=logs)
    texts = [f.read_text() for f in sorted((gen / "files").glob("socket-*"))]
    fields = [dict(ln.split(" ", 1) for ln in t.splitlines()[1:] if " " in ln) for t in texts]
    listener = next(
        _port(f["local"]) for t, f in zip(texts, fields, strict=True) if " role 1 " in t
    )
    client = next(
        _port(f["local"])
        for f in fields
        if f.get("peer", "-") != "-" and _port(f["peer"]) == listener
    )
    # A connection with its two addresses stays open through the restart (one in TIME_WAIT
    # blocks them only for its first second on this kernel, with tcp_tw_reuse: too short to
    # count on): the listening socket is closed, so the program's listener binds its port again.
    held: list[socket.socket] = []
    try:
        with socket.socket() as lis:
            lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            _bind_when_free(lis, listener)
            lis.listen(1)
            c = socket.socket()
            held.append(c)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            _bind_when_free(c, client)
            c.connect(("127.0.0.1", listener))
            held.append(lis.accept()[0])
        proc = restart(gen, out_dir=logs, label="restart")
        try:
            assert wait_exit(proc) == 0, proc.report()
            assert "cannot connect again" not in proc.stderr_text(), proc.report()
            assert any(ln.startswith("DONE") for ln in proc.lines()), proc.report()
        finally:
            proc.stop()
    finally:
        for sk in held:
            sk.close()


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


def test_connections_whose_ends_finished_sending(tmp_path):
    """A TCP connection and a Unix socket pair whose peer sent its last bytes and closed come back
    with those bytes, then end of file (they came back as dropped connections, and a forked
    server's handler died of ECONNRESET where it would have read the end); a half-closed one
    (the peer shut its writing down, still reads) stays half-closed, not whole, both ways."""
    program = APPS_DIR / "py" / "ckpt_halfclose.py"
    run_cycles(Path(sys.executable), [str(program), "60"], tmp_path, cycles=2)
    for i in (1, 2):
        err = (tmp_path / "logs" / f"restart{i}.err").read_text()
        assert "crac: warning" not in err, err


def test_one_open_file_behind_two_descriptors(tmp_path):
    """A file opened once and dup'd (`exec >log 2>&1`) is one open file again after a restart,
    one offset for both descriptors: reopened twice, each wrote over the other's lines."""
    program = APPS_DIR / "py" / "ckpt_dupfile.py"
    run_cycles(Path(sys.executable), [str(program), "60", "{work}"], tmp_path, cycles=2)


def test_removed_file_behind_a_dup_and_a_shared_mapping(tmp_path):
    """A file with no name (tempfile.TemporaryFile) behind two descriptors and a shared mapping is
    one file again after a restart: one offset for both descriptors, and the mapping is that
    file's (it was made again for each descriptor, and the mapping was memory of its own)."""
    program = APPS_DIR / "py" / "ckpt_tmpfile_mmap.py"
    run_cycles(Path(sys.executable), [str(program), "60"], tmp_path, cycles=2)
    for i in (1, 2):
        err = (tmp_path / "logs" / f"restart{i}.err").read_text()
        assert "crac: warning" not in err, err


def test_python_selectors_and_asyncio(tmp_path):
    """The venv's python under crac: a selectors (epoll) loop over a socketpair with bytes in
    flight, and an asyncio loop (its epoll and wake-up socketpair) kept across steps."""
    program = APPS_DIR / "py" / "ckpt_selectors.py"
    run_cycles(Path(sys.executable), [str(program), "60"], tmp_path, cycles=2)


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sk:
            sk.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_listeners_sharing_a_port(tmp_path):
    """An IPv4 and an IPv6-only listener on one port (IPV6_V6ONLY: Redis, nginx) and two
    SO_REUSEPORT listeners on another all listen again, each with its own backlog (read with
    iproute2's `ss` at every step): without those options restored before bind, the second
    listener on a port came back unbound and Redis spun on accept's EINVAL."""
    if not _has_ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback address (::1)")
    if not shutil.which("ss"):
        pytest.skip("iproute2's ss is not installed (it reads the listeners' backlogs)")
    program = APPS_DIR / "py" / "ckpt_dualstack.py"
    run_cycles(Path(sys.executable), [str(program), "40", "ss"], tmp_path, cycles=2)


def test_netlink_sockets(tmp_path):
    """Netlink sockets (a route socket in link and address groups, one past bind's 32, with
    NETLINK_EXT_ACK; a sock_diag socket on a port id it chose) come back on the same port ids,
    groups and option, and every step's dumps answer as libmnl expects them to. Each step reads
    its answer 10 ms after asking: a checkpoint there waits until it is read, since a new socket
    cannot finish the kernel's dump (before, the socket read as /dev/null and `ss` under a
    restarted program printed nothing)."""
    program = APPS_DIR / "py" / "ckpt_netlink.py"
    run_cycles(Path(sys.executable), [str(program), "40"], tmp_path, cycles=2)


def test_netlink_answer_never_read(tmp_path):
    """A netlink answer the program never reads does not hold the checkpoint for ever: it waits a
    while, then drops the answer and says so (the restarted socket is new and empty)."""
    program = APPS_DIR / "py" / "ckpt_netlink.py"
    run_cycles(Path(sys.executable), [str(program), "40", "stuck"], tmp_path, cycles=1)
    said = "".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*.err"))
    assert "(netlink):" in said and "had not read" in said, said


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


def test_shared_memory_the_restart_may_not_write(tmp_path):
    """A file in /dev/shm the program maps read-only and the restart may not open for writing
    (immutable here; another user's in practice) is mapped as it is, with a warning, instead of
    failing the restart for want of putting it back."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr (e2fsprogs) is not installed: cannot make the file immutable")
    seg = Path(f"/dev/shm/crac-readonly-{os.getpid()}-{tmp_path.name}")
    seg.write_bytes(bytes(range(256)) * 64)
    if subprocess.run(["chattr", "+i", str(seg)], capture_output=True).returncode != 0:
        seg.unlink()
        pytest.skip("this tmpfs does not take the immutable attribute")
    try:
        app = APPS_DIR / "py" / "ckpt_shm_readonly.py"
        run_cycles(Path(sys.executable), [str(app), str(seg), "150"], tmp_path, cycles=2)
    finally:
        subprocess.run(["chattr", "-i", str(seg)], capture_output=True)
        seg.unlink(missing_ok=True)


def test_named_shared_memory_gone_at_restart(tmp_path, tmp_path_factory):
    """A named POSIX shm object is memory (tmpfs), gone with the node: a restart elsewhere, or
    after it was removed, makes it again from the image, as big as it was, and maps it back; the
    program's next steps find every earlier byte and none of a later one."""
    app = build("ckpt_shm", tmp_path_factory)
    logs = tmp_path / "logs"
    killed = launch_checkpoint_kill(app, ["60"], tmp_path / "ckpt", out_dir=logs, at_step=10)
    kept = Path(f"/dev/shm/ckpt_shm-kept-{killed.pid}")
    assert kept.stat().st_size == 64 * 4096
    kept.unlink()
    proc = restart(tmp_path / "ckpt", out_dir=logs, label="restart")
    try:
        assert wait_exit(proc) == 0, proc.report()
        assert proc.lines()[-1].startswith("DONE steps=60"), proc.report()
        assert not kept.exists(), "the program's own shm_unlink at its end"
    finally:
        proc.stop()
        kept.unlink(missing_ok=True)


def test_io_uring_program_runs_and_its_lost_ring_is_said(tmp_path, tmp_path_factory):
    """io_uring refuses to map its rings at an address it is given, so under crac they are
    placed by the kernel and recorded outside W: the program runs as natively. A checkpoint
    cannot save the ring; it says so, keeps the rings' bytes as memory, and the restart goes
    through (it used to stop at "a file mapping without an absolute path"): the program's next
    io_uring_enter fails and it ends cleanly."""
    app = build("ckpt_uring", tmp_path_factory)
    data = tmp_path / "data.bin"
    data.write_bytes(b"0123456789abcdef")
    logs = tmp_path / "logs"
    killed = launch_checkpoint_kill(app, [str(data), "60"], tmp_path / "ckpt", out_dir=logs)
    assert "anon_inode:[io_uring]" in killed.stderr_text(), killed.report()
    proc = restart(tmp_path / "ckpt", out_dir=logs, label="restart")
    try:
        assert wait_exit(proc) == 0, proc.report()
        lines = proc.lines()
        assert lines[0].startswith("ring lost at step "), proc.report()
        assert lines[-1] == "DONE checksum=lost steps=60", proc.report()
    finally:
        proc.stop()


def test_periodic_timerfd_read_as_expired_stays_armed(tmp_path, tmp_path_factory):
    """A periodic timerfd read by the checkpoint just after an expiry the kernel has not handled
    yet shows 0 time left, as a disarmed one does; restored as 0 it was disarmed, and a program
    waiting for its next tick waited for ever (ckpt_evloop's 5 ms timer hung in the loaded
    suite; this 20 us one hung in 9 restarts of 20). Each of five generations must tick."""
    app = build("ckpt_fasttimer", tmp_path_factory)
    logs, ckptdir = tmp_path / "logs", tmp_path / "ckpt"
    proc = launch(app, [], ckptdir, out_dir=logs, opts=["--keep", "10"])
    try:
        wait_for_step(proc, 3)
        gens = []
        for _ in range(5):
            gens.append(checkpoint(proc, ckptdir))
            wait_for_step(proc, proc.last_step() + 2)
    finally:
        proc.stop()
    for i, gen in enumerate(gens):
        back = restart(gen, out_dir=logs, label=f"restart{i + 1}")
        try:
            first = wait_for_step(back, 1)
            wait_for_step(back, first + 5)  # ckpt_fasttimer fails after 10 s without a tick
        finally:
            back.stop()
