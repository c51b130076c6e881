"""Connections between the processes of a tree (docs/DECISIONS.md "Connections between
processes"): a pipe, socketpair, loopback TCP connection or pseudo-terminal that a parent and its
forked children share is made once at restart and given to each of them, with the bytes that were
in it (a pseudo-terminal's are not kept); so is memory they share (MAP_SHARED anonymous, POSIX
shm, semaphores, named ones in /dev/shm that spawned workers open by name), which Python's process
pools need besides their pipes.

Each program (tests/apps/share_*.c) checks every byte it receives and prints one step per
record; the tree is checkpointed by the signal to its root while the pipe or the connection has
bytes in it (the reader is slow), SIGKILLed, restarted from the coordinator's script, checkpointed
again, SIGKILLed, restarted and run to the end: the reader's output over the three runs is the
uninterrupted run's, and its children end with status 0 (the reader checks).
"""

from __future__ import annotations

import shutil
import signal
import socket
import sys

import pytest
from ckpt_harness import (
    CracProc,
    base_env,
    kill_descendants,
    kill_tree,
    process_dirs,
    tree,
    wait_exit,
)
from conftest import APPS_DIR, crac_cmd, require_native
from coord_harness import free_port
from job_harness import Output, restart_twice, segments_of, signal_checkpoint, wait_past

STEPS = 300
TAG = "S"
# The tree's processes by their command lines: the apps, and Python's spawned workers, forkserver
# and resource tracker (`python -c "from multiprocessing... import main"`).
KILLED = (b"share_", b"multiprocessing", b"cat", b"loky", b"tty_counter")


CASES = [
    ("share_pipe", "pair"),  # a writer blocked on a full pipe, a slow reader
    ("share_pipe", "pipeline"),  # gen | filter | sum, three processes
    ("share_pipe", "fifo"),  # a pair through a named FIFO, opened by name at each end
    ("share_sock", "pair"),  # a socketpair ping-pong, bytes waiting both ways
    ("share_sock", "tcp"),  # a TCP client/server pair over 127.0.0.1
    ("share_dgram", "named"),  # a Unix datagram ping-pong between two named sockets
    ("share_mem", "memory"),  # MAP_SHARED anonymous + unlinked POSIX shm, pshared semaphores
    ("share_pool", "pool"),  # multiprocessing.Pool(2).map in a loop
    ("share_pool", "executor"),  # concurrent.futures.ProcessPoolExecutor(2).map in a loop
    ("share_pool", "pool-spawn"),  # workers exec'd: named semaphores in /dev/shm
    ("share_pool", "executor-forkserver"),  # workers forked by a server process
    ("share_pool", "respawn-spawn"),  # new workers open the named semaphores after each restart
    ("share_pool", "manager"),  # a Pool's workers store results through Manager proxies
    ("share_coproc", "asyncio"),  # asyncio and a `cat` coprocess; an O_TMPFILE file
    ("share_coproc", "asyncio-pidfd"),  # the same, the loop watching `cat` through a pidfd
    ("share_forksrv", "tcp"),  # socketserver.ForkingTCPServer and its client, one process
    ("share_listen", "serve"),  # a child connects afresh each step to its parent's listener
    ("share_listen", "prefork"),  # the same, the parent the client, a forked child the server
    ("share_listen", "serve-tcp"),  # the same two over TCP (127.0.0.1)
    ("share_listen", "prefork-tcp"),
    # accepted at once, the client slow to answer: a checkpoint catches the connection's two ends
    # held by the two processes, the parent's still leading to the listener it holds too
    ("share_listen", "prefork-held"),
    ("share_listen", "prefork-tcp-held"),
    ("share_file", "in-place"),  # a child writes a shared file of fixed size in place
    ("share_halfclose", "pair"),  # TCP and Unix connections shut for writing by one end
    ("share_openfile", "file"),  # one open file (one offset) written by three processes
    ("share_readers", "pipe"),  # a pipe two processes read whose writing end nobody holds
    # a parent's SIGUSR2 (the checkpoint signal's number) to its child's handler, not a checkpoint
    ("share_signal", "usr2"),
    # the same with SIGUSR1: kill and sigqueue by the child's pid the program knows, after a
    # restart not the kernel's (sigqueue went to that pid as it was)
    ("share_signal", "usr1"),
    # real-time signals a child holds blocked, queued by its parent across both restarts: each
    # one's sender is the parent as the program knows it (saved as the run's kernel pid before)
    ("share_pending", "held"),
    # siblings signalled by the pids the program knows, by a restarted one and by new children
    ("share_siblings", "kill"),
    # /proc/<pid> by the pids the program knows: psutil, joblib's loky workers
    ("share_procpid", "joblib"),
    # a pseudo-terminal: the parent holds the master, its child (pty.fork) the slave on 0-2
    ("share_pty", "fork"),
    # the same, a foreground group of the child's session answering, as a shell's job does
    ("share_pty", "job"),
]


# Images whose regions are chunk streams (--compress, and an incremental run's generations after
# its first): the tree's restart reads the shared memory's chunks, stored RAW for it.
CHUNKED = [("pool", "--compress", "zstd"), ("pool-spawn", "--incremental", "")]


@pytest.mark.parametrize(("app", "mode"), CASES, ids=[f"{a}-{m}" for a, m in CASES])
def test_shared_connection_survives_two_restarts(apps, tmp_path, app, mode):
    two_restarts(apps, tmp_path, app, mode)


@pytest.mark.parametrize(("mode", "option", "value"), CHUNKED, ids=[c[1] for c in CHUNKED])
def test_shared_memory_of_chunked_images(apps, tmp_path, mode, option, value):
    two_restarts(apps, tmp_path, "share_pool", mode, [option, value] if value else [option])


def test_program_run_by_util_linux_script(apps, tmp_path):
    """util-linux `script`, which runs a program on a pseudo-terminal and copies what it writes
    to its own stdout: restarted, the program writes to the terminal again (it wrote to the
    restart's stdout, past `script`), and its lines still come through `script`."""
    script = shutil.which("script")
    if script is None:
        pytest.skip("util-linux `script` is not installed")
    counter = f"{sys.executable} {APPS_DIR / 'py' / 'tty_counter.py'} {TAG} {STEPS} 20"
    two_restarts(apps, tmp_path, "script", "", program=[script, "-qfec", counter, "/dev/null"])


# Arguments after STEPS and MS.
TRAILING = {("share_signal", "usr1"): [str(int(signal.SIGUSR1))]}


def _program(apps, app: str, mode: str) -> list[str]:
    if app in (
        "share_pool",
        "share_coproc",
        "share_forksrv",
        "share_halfclose",
        "share_openfile",
        "share_readers",
        "share_procpid",
        "share_pty",
    ):
        return [sys.executable, str(APPS_DIR / "py" / f"{app}.py"), TAG, mode]
    # share_mem, share_dgram and share_file have no mode
    moded = app in ("share_pipe", "share_sock", "share_listen")
    return [str(apps[app]), TAG, *([mode] if moded else [])]


def two_restarts(apps, tmp_path, app, mode, opts=(), program=None):
    """PROGRAM (a whole command line; by default APP's with MODE, STEPS and 20 ms) through the
    scenario of this module."""
    require_native()
    ckptdir = tmp_path / "ckpt"
    if program is None:
        program = [*_program(apps, app, mode), str(STEPS), "20", *TRAILING.get((app, mode), [])]
    argv = [*crac_cmd(), "launch", "-c", str(ckptdir), *opts, "--", *program]
    root = CracProc(argv, out_dir=tmp_path / "logs", label="launch", env=base_env())
    out = Output(root.out_path, "launch")
    runs = []
    try:
        script, before, after = signal_checkpoint(root.pid, out, [TAG], ckptdir, 30, root)
        assert len(process_dirs(ckptdir)) >= 2, tree(ckptdir)
        wait_past(out, [TAG], after, 2, root)
        kill_descendants(root)
        kill_tree(ckptdir, *KILLED)
        if root.poll() is None:
            root.kill()
        wait_exit(root)
        chains = {t: [s] for t, s in segments_of(out, [TAG], before, after).items()}
        restart_twice(script, free_port(), tmp_path, chains, runs, [TAG], STEPS)
        for r in runs:
            assert "cannot be restored" not in r.report(), r.report()
        if app == "share_listen" and not mode.endswith("-held"):
            # Its child's connection waits in the listener's queue most of the time: a
            # checkpoint caught it there (the listener's image lists it), and it came back.
            waiting = "\nwaiting " if mode.endswith("-tcp") else "\nicons "
            assert any(waiting in f.read_text() for f in ckptdir.glob("*/gen-*/files/socket-*")), (
                tree(ckptdir)
            )
    except BaseException:
        print(root.report(), *(r.report() for r in runs), sep="\n")
        raise
    finally:
        for r in runs:
            r.kill()
        kill_descendants(root)
        kill_tree(ckptdir, *KILLED)
        root.stop()


def test_tcp_pair_whose_listening_port_was_taken_since():
    """A loopback connection between processes of a tree is made again between its two old
    addresses; when the port its listening end had is another socket's now (an ephemeral port
    taken again since the checkpoint: a restart failed with EADDRINUSE), the other end listens
    at its own port instead and the first connects from a new one (crac_py/launch/share.py)."""
    from crac_py.launch import share

    ports = []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            ports.append(probe.getsockname()[1])
    a_port, b_port = ports
    with socket.socket() as taker:  # listening at B's port: B cannot bind it, even reusing
        taker.bind(("127.0.0.1", b_port))
        taker.listen(1)
        a, b = share._tcp_pair(
            (socket.AF_INET, ("127.0.0.1", a_port)), (socket.AF_INET, ("127.0.0.1", b_port)), {}
        )
    with a, b:
        assert a.getsockname() == ("127.0.0.1", a_port)
        assert b.getpeername() == a.getsockname() and a.getpeername() == b.getsockname()
        a.sendall(b"ping")
        assert b.recv(4) == b"ping"
