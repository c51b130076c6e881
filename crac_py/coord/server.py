"""The coordinator of a job (docs/PROTOCOL.md): an asyncio TCP server that every `crac launch` /
`crac restart` process of the job joins (through its loader's manager thread), and that
`crac command` talks to.

A job checkpoint is four phases with a barrier after each (checkpoint -> suspended, write ->
written, resume -> durable, publish -> published): the programs run again after `written`, while
their forked writers write, and no process publishes before every one is durable. A participant
that fails a phase, disconnects, or does not answer within the phase timeout makes the
coordinator abandon that checkpoint: it sends `abort` to the others, logs why and answers a
waiting `bcheckpoint` with that reason; the previous generation of every process (and the
restart script naming them) stays the valid one. After a complete job checkpoint the
coordinator writes crac_restart_script.sh (restart_script.py).

Process setup (binding, port and status files, daemon) is in coord_run.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crac_py.coord import connections, peer_uid, restart_script
from crac_py.coord.proto import (
    ANSWERS,
    MAX_EXPECT,
    MAX_GENERATION,
    MAX_INTERVAL,
    MAX_LINE,
    MAX_PID,
    PHASES,
    ProtocolError,
    decode,
    encode,
    int_in,
)
from crac_py.coord.restore_gate import RestoreGate

Msg = dict[str, Any]
_PHASE_STATE = {phase: state for phase, _, _, state in PHASES}
# Connections not yet known as a worker (before their hello, and every command connection) that
# one uid (on this host) or one address may hold at once: idle connections can no longer use up
# the coordinator's descriptors and lock everybody out.
MAX_PENDING_PER_PEER = 64
# Half-open worker connections (a host that vanished) are found by TCP keepalive: probes after
# this long idle, then every KEEPALIVE_INTERVAL_S, given up after KEEPALIVE_PROBES.
KEEPALIVE_IDLE_S = 60
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 6


@dataclass
class CoordConfig:
    host: str  # address listened on
    port: int  # port actually bound
    token: str | None = None
    interval: int = 0
    phase_timeout: float = 60.0
    exit_on_last: bool = False
    # Every job checkpoint ends the job once written (`--exit-after-checkpoint`, as DMTCP's
    # coordinator's --exit-after-ckpt; a tree launched with that flag starts its own so).
    exit_after_checkpoint: bool = False
    stale_timeout: float = 0.0  # exit after this long with no process connected; 0 = never
    quiet: bool = False
    crac_cmd: str = "crac"  # shell words that run this crac, for the restart script
    # Seconds a connection may stay silent before its first message, or between two commands.
    idle_timeout: float = 30.0
    max_pending: int = MAX_PENDING_PER_PEER


MAX_MPI_SIZE = 1 << 20  # as the loader bounds it (loader/ckpt/coord_client.c)
# The pids a `go` carries: its line stays under the loader's 64 KiB (loader/ckpt/coord_client.c).
MAX_MOVED_PIDS = 2048


class Abandon(Exception):
    """A job checkpoint cannot complete; the message says why."""


@dataclass(eq=False)
class Peer:
    id: str
    seq: int
    pid: int
    vpid: int
    program: str
    host: str
    proc_dir: Path
    restarted: bool
    writer: asyncio.StreamWriter
    state: str = "RUNNING"
    last_gen: int | None = None
    # Answers still to come for checkpoints abandoned before this peer answered their phase:
    # they are dropped, never counted for a later checkpoint.
    stale: int = 0
    # A forked process of a tree (docs/PROTOCOL.md): one that ends before it is suspended is left
    # out of the checkpoint (its parent's image keeps its exit status), not a failure.
    tree_child: bool = False
    addr: str = ""  # the address its connection came from (which host, for the restart script)
    # An MPI job's process: its rank and the job's size, from its launcher's environment.
    mpi_rank: int | None = None
    mpi_size: int | None = None
    said_restored: bool = False  # a restarted process whose state is back (restore_gate.py)

    @property
    def label(self) -> str:
        return f"{self.program}[{self.vpid}] (pid {self.pid}, {self.id})"

    def send(self, msg: Msg) -> None:
        if not self.writer.is_closing():
            self.writer.write(encode(msg))

    def as_json(self) -> Msg:
        return {
            "id": self.id,
            "pid": self.pid,
            "vpid": self.vpid,
            "program": self.program,
            "host": self.host,
            "state": self.state,
            "last_gen": self.last_gen,
            "restarted": self.restarted,
            **(
                {"mpi_rank": self.mpi_rank, "mpi_size": self.mpi_size}
                if self.mpi_size is not None
                else {}
            ),
        }


@dataclass(eq=False)
class JobCheckpoint:
    number: int  # attempt number
    exit_after: bool
    source: str
    participants: dict[str, Peer]
    done: asyncio.Future[Msg]
    phase: str = "starting"
    answer: str = ""
    waiting: set[str] = field(default_factory=set)
    barrier: asyncio.Future[None] | None = None
    failure: str | None = None
    published: dict[str, Path] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # participants that disconnected
    started: float = field(default_factory=time.monotonic)
    messages: int = 0  # phase messages sent and answers received (bench/hosts.py counts them)

    def fail(self, reason: str) -> None:
        """The first failure wins; it ends the current phase's wait at once."""
        if self.failure is None:
            self.failure = reason
        if self.barrier is not None and not self.barrier.done():
            self.barrier.set_exception(Abandon(self.failure))


def _peer_address(writer: asyncio.StreamWriter) -> str:
    """The IP address a worker's connection came from ('' when unknown)."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


def loopback_peer_uid(peer: tuple[Any, ...], local: tuple[Any, ...]) -> int | None:
    """The uid owning the client end of a TCP connection from this host (crac_py/coord/peer_uid.py);
    None when it cannot be told (another host)."""
    return peer_uid.tcp_peer_uid(peer, local)


class Coordinator:
    def __init__(self, cfg: CoordConfig, log: Callable[[str], None] | None = None):
        self.cfg = cfg
        self._log = log
        self.peers: dict[str, Peer] = {}
        self.seq = 0
        self.current: JobCheckpoint | None = None
        # A request a process made after its part of the current checkpoint was over: the next
        # (where it came from, and whether the job exits after it).
        self.next_request: tuple[str, bool] | None = None
        self.generation = 0  # complete job checkpoints
        self.attempts = 0
        self.ever_connected = False
        self.idle_since = time.monotonic()
        self.next_due: float | None = None
        self.last_script: Path | None = None
        self.expect: tuple[int, float] | None = None  # (restarted joins awaited, deadline)
        self.meeting = connections.Meeting(0, 0.0)  # where restarted connections meet again
        self.restarted_joins = 0
        self.restore_gate = RestoreGate()
        self.exit_reason: str | None = None
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()  # interval or quorum changed
        self._tasks: set[asyncio.Task[Any]] = set()
        self.hostname = socket.gethostname()
        self.pending: dict[str, int] = {}  # connections not (yet) a worker, per uid/address
        self._refused_keys: set[str] = set()  # logged once each

    # ---- logging and lifetime ------------------------------------------------------------

    def log(self, message: str, *, always: bool = False) -> None:
        if self.cfg.quiet and not always:
            return
        if self._log is not None:
            self._log(message)
        else:
            stamp = time.strftime("%H:%M:%S")
            print(f"crac coordinator [{stamp}]: {message}", file=sys.stderr, flush=True)

    def stop(self, reason: str) -> None:
        if self.exit_reason is None:
            self.exit_reason = reason
        self._stop.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def serve(self, sock: socket.socket) -> str:
        """Serves on the bound, listening SOCK until quit, a signal, --exit-on-last or the
        stale timeout; returns why it stopped."""
        server = await asyncio.start_server(self._handle, sock=sock, limit=MAX_LINE + 2)
        self._spawn(self._interval_loop())
        if self.cfg.stale_timeout > 0:
            self._spawn(self._stale_loop())
        try:
            await self._stop.wait()
            # No new client from here: one probing the port now must find it free, not a
            # coordinator about to go (the restart script starts its own on the same port).
            server.close()
            await asyncio.sleep(0.05)  # let the last replies (quit's) and kill messages go out
        finally:
            server.close()
            for peer in list(self.peers.values()):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(peer.writer.drain(), 1.0)
                peer.writer.close()
            for task in list(self._tasks):
                task.cancel()
        return self.exit_reason or "stopped"

    async def _stale_loop(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.cfg.stale_timeout))
            if not self.peers and time.monotonic() - self.idle_since >= self.cfg.stale_timeout:
                self.log(
                    f"no process connected for {self.cfg.stale_timeout:g} s; exiting", always=True
                )
                self.stop("stale timeout")
                return

    def _maybe_exit_on_last(self) -> None:
        if not (self.cfg.exit_on_last and self.ever_connected) or self.peers:
            return
        if self.current is not None or self._quorum_pending():
            return
        self.log("the last process left; exiting (--exit-on-last)")
        self.stop("last process left")

    # ---- connections -----------------------------------------------------------------------

    def _token_ok(self, msg: Msg) -> bool:
        if not self.cfg.token:
            return True
        given = msg.get("token")
        expected = self.cfg.token.encode()
        return isinstance(given, str) and hmac.compare_digest(given.encode(), expected)

    def _foreign_uid(self, writer: asyncio.StreamWriter) -> int | None:
        """Without a token, connections from another user's processes on this host are
        refused (joining another user's coordinator is a classic DMTCP accident)."""
        if self.cfg.token:
            return None
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        if not peer or not local:
            return None
        uid = loopback_peer_uid(peer, local)
        return uid if uid is not None and uid != os.getuid() else None

    async def _readline(self, reader: asyncio.StreamReader) -> bytes:
        try:
            return await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            raise ProtocolError(f"line longer than {MAX_LINE} bytes") from None

    async def _readline_idle(self, reader: asyncio.StreamReader) -> bytes:
        """A line, or ProtocolError after idle_timeout of silence (or of half a line)."""
        try:
            return await asyncio.wait_for(self._readline(reader), self.cfg.idle_timeout)
        except TimeoutError:
            raise ProtocolError(f"nothing sent in {self.cfg.idle_timeout:g} s") from None

    def _peer_key(self, writer: asyncio.StreamWriter) -> str:
        """Whom a connection counts against: its uid when it comes from this host, else its
        address."""
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        if not peer or not local:
            return "unknown"
        uid = loopback_peer_uid(peer, local)
        return f"uid {uid}" if uid is not None else f"address {peer[0]}"

    def _release(self, key: str) -> None:
        left = self.pending.get(key, 0) - 1
        if left > 0:
            self.pending[key] = left
        else:
            self.pending.pop(key, None)

    @staticmethod
    def _keepalive(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None:
            return
        with contextlib.suppress(OSError, AttributeError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = self._peer_key(writer)
        if self.pending.get(key, 0) >= self.cfg.max_pending:
            if key not in self._refused_keys:
                self._refused_keys.add(key)
                self.log(
                    f"refusing connections from {key}: {self.cfg.max_pending} already open "
                    "without being a process of the job",
                    always=True,
                )
            with contextlib.suppress(Exception):
                writer.write(encode({"type": "error", "error": f"too many connections ({key})"}))
                writer.close()
            return
        self.pending[key] = self.pending.get(key, 0) + 1
        held = [key]  # released when the connection becomes a worker, or ends
        self._keepalive(writer)
        try:
            line = await self._readline_idle(reader)
            if not line:
                return
            msg = decode(line)
            kind = msg.get("type")
            if kind == "hello":
                await self._worker(msg, reader, writer, held)
            elif kind == "command":
                await self._commands(msg, reader, writer)
            else:
                writer.write(encode({"type": "error", "error": f"unknown message type {kind!r}"}))
        except ProtocolError as exc:
            with contextlib.suppress(Exception):
                writer.write(encode({"type": "error", "error": str(exc)}))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if held:
                self._release(held.pop())
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), 2.0)
            writer.close()

    # ---- workers ---------------------------------------------------------------------------

    def _hello_error(self, msg: Msg, writer: asyncio.StreamWriter) -> str | None:
        if not self._token_ok(msg):
            return "wrong token (give the coordinator's in CRAC_COORD_TOKEN or --coord-token-file)"
        uid = self._foreign_uid(writer)
        if uid is not None:
            return f"this coordinator belongs to uid {os.getuid()}, not to uid {uid}"
        if msg.get("role") != "worker":
            return f"unknown role {msg.get('role')!r}"
        ints = all(int_in(msg.get(k), 1, MAX_PID) for k in ("pid", "vpid"))
        strs = all(
            isinstance(msg.get(k), str) and "\0" not in msg[k]
            for k in ("program", "host", "proc_dir")
        )
        if not (ints and strs) or not os.path.isabs(msg["proc_dir"]):
            return "malformed hello (pid, vpid, program, host, absolute proc_dir)"
        if ("mpi_rank" in msg or "mpi_size" in msg) and not (
            int_in(msg.get("mpi_size"), 1, MAX_MPI_SIZE)
            and int_in(msg.get("mpi_rank"), 0, msg["mpi_size"] - 1)
        ):
            return "malformed hello (mpi_rank must be under mpi_size)"
        return None

    async def _worker(
        self,
        hello: Msg,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        held: list[str],
    ) -> None:
        error = self._hello_error(hello, writer)
        if error is not None:
            pid = hello.get("pid") if int_in(hello.get("pid"), 0, MAX_PID) else "?"
            self.log(f"refused a process (pid {pid}): {error}", always=True)
            writer.write(encode({"type": "refused", "reason": error}))
            return
        self._release(held.pop())  # a process of the job now: no longer counted as pending
        self.seq += 1
        peer = Peer(
            id=f"w{self.seq}",
            seq=self.seq,
            pid=hello["pid"],
            vpid=hello["vpid"],
            program=hello["program"],
            host=hello["host"],
            proc_dir=Path(hello["proc_dir"]),
            restarted=bool(hello.get("restarted")),
            writer=writer,
            tree_child=bool(hello.get("tree_child")),
            addr=_peer_address(writer),
            mpi_rank=hello.get("mpi_rank"),
            mpi_size=hello.get("mpi_size"),
        )
        self.peers[peer.id] = peer
        self.ever_connected = True
        if peer.restarted:
            self.restarted_joins += 1
            # The job's count goes on from its images (as DMTCP's computation generation does):
            # a restarted job's next checkpoint is the one after the generation it came from.
            image_gen = hello.get("image_gen")
            if int_in(image_gen, 1, MAX_GENERATION) and image_gen > self.generation:
                self.generation = image_gen
        self._wake.set()  # a quorum of restarted processes or of MPI ranks may be complete now
        peer.send({"type": "welcome", "id": peer.id, "interval": self.cfg.interval})
        self._join_tree_child(peer)
        self._take_over_from_exec(peer)
        how = "restarted" if peer.restarted else "launched"
        if peer.mpi_size is not None:
            how += f", MPI rank {peer.mpi_rank} of {peer.mpi_size}"
        self.log(f"{peer.label} joined ({how}, {peer.proc_dir}); {len(self.peers)} connected")
        try:
            while True:
                line = await self._readline(reader)
                if not line:
                    break
                try:
                    msg = decode(line)
                except ProtocolError as exc:
                    peer.send({"type": "error", "error": str(exc)})
                    continue
                self._on_worker_message(peer, msg)
        except (ProtocolError, ConnectionError):
            pass
        finally:
            self._on_disconnect(peer)

    def _on_worker_message(self, peer: Peer, msg: Msg) -> None:
        kind = msg.get("type")
        if kind in ANSWERS:
            self._on_answer(peer, str(kind), msg)
        elif kind == "request":
            if msg.get("verb", "checkpoint") == "checkpoint":
                source = f"a request from {peer.label}"
                # A process launched with --exit-after-checkpoint asks for a checkpoint that ends
                # the job (the checkpoint signal under `crac launch --exit-after-checkpoint`).
                exit_after = msg.get("exit_after") is True
                ck = self.current
                if ck is not None and peer.id in ck.published:
                    # Its part is over (its generation may be seen already): a signal it got
                    # after that asks for the next checkpoint. One it got before, it dropped.
                    self.next_request = (source, exit_after)
                    return
                started = self.start_checkpoint(exit_after, source)
                if isinstance(started, str):
                    self.log(f"ignored a checkpoint request from {peer.label}: {started}")
            else:
                peer.send({"type": "error", "error": f"unknown request {msg.get('verb')!r}"})
        elif kind == "aborted":
            pass
        elif kind == "restored" and peer.restarted and not peer.said_restored:
            peer.said_restored = True
            failure = self.restore_gate.failed(time.monotonic())
            if failure is not None:
                peer.send({"type": "restore_failed", "error": failure})
            else:
                self._let_go(self.restore_gate.restored(peer, time.monotonic()))
        elif kind == "restore_failed" and peer.restarted and not peer.said_restored:
            peer.said_restored = True  # it is not waited for any more
            self._fail_restart(f"{peer.label} could not be restarted: {msg.get('error', '?')}")
        else:
            peer.send({"type": "error", "error": f"unknown message type {kind!r}"})

    def _let_go(self, peers: list[Any]) -> None:
        """The restore barrier opened for PEERS (restore_gate.py). Each gets the pids the job's
        processes on its host had (vpid) and have now: a restarted process signals a sibling or
        cousin by the pid it knew (PostgreSQL's backends, by the pids in its shared memory)."""
        for p in peers:
            p.send({"type": "go", "pids": self._moved_pids(p.host)})
        if len(peers) > 1:
            self.log(f"{len(peers)} restarted processes are back; they go on")
        self._wake.set()  # a checkpoint may wait for the barrier

    def _moved_pids(self, host: str) -> list[list[int]]:
        """[vpid, pid] of the processes on HOST whose pid is not the one they knew; a vpid two of
        them claim (processes from two hosts restarted on one) is left out: it names neither."""
        moved: dict[int, int | None] = {}
        for q in self.peers.values():
            if q.host == host and q.vpid != q.pid:
                moved[q.vpid] = None if q.vpid in moved else q.pid
        pairs = [[v, r] for v, r in sorted(moved.items()) if r is not None]
        return pairs[:MAX_MOVED_PIDS]

    def _fail_restart(self, why: str) -> None:
        """A process of the restart failed: the others stop rather than run without it."""
        stopped = self.restore_gate.fail(why, time.monotonic())
        self.log(f"restart failed: {why}; {len(stopped)} waiting process(es) stop", always=True)
        for p in stopped:
            p.send({"type": "restore_failed", "error": why})
        self._wake.set()

    async def _restore_deadline(self, deadline: float) -> None:
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        if self.restore_gate.deadline == deadline and self.restore_gate.expected:
            left = self.restore_gate.expected
            self.log(f"restart: {left} announced process(es) not back in time; the others go on")
            self._let_go(self.restore_gate.expire(time.monotonic()))

    def _on_answer(self, peer: Peer, kind: str, msg: Msg) -> None:
        if peer.stale > 0:
            peer.stale -= 1
            return
        ck = self.current
        if ck is None or peer.id not in ck.waiting:
            self.log(f"ignored {kind!r} from {peer.label}: no phase of it is awaited")
            return
        if kind == "failed":
            ck.waiting.discard(peer.id)
            reason = msg.get("reason") or "no reason given"
            ck.fail(f"{peer.label} could not {ck.phase}: {reason}")
            return
        if kind != ck.answer:
            self.log(f"ignored {kind!r} from {peer.label} during the {ck.phase} phase")
            return
        ck.waiting.discard(peer.id)
        ck.messages += 1
        if kind == "suspended":
            peer.state = "SUSPENDED"
        elif kind == "written":
            peer.state = "WRITTEN"
        elif kind == "durable":
            if not int_in(msg.get("gen"), 1, MAX_GENERATION):
                ck.fail(f"{peer.label} answered 'durable' without a generation")
                return
            peer.state = "DURABLE"
        else:
            gen, gen_dir = msg.get("gen"), msg.get("dir")
            if (
                not int_in(gen, 1, MAX_GENERATION)
                or not isinstance(gen_dir, str)
                or "\0" in gen_dir
                or not os.path.isabs(gen_dir)
            ):
                ck.fail(f"{peer.label} answered 'published' without a generation")
                return
            peer.last_gen = gen
            ck.published[peer.id] = Path(gen_dir)
            peer.state = "EXITED" if ck.exit_after else "RUNNING"
        if not ck.waiting and ck.barrier is not None and not ck.barrier.done():
            ck.barrier.set_result(None)

    def _join_tree_child(self, peer: Peer) -> None:
        """A process forked while its parent's checkpoint waits for `suspended` (the parent is
        still in the fork, which returns once the child is welcomed): it is part of that
        checkpoint, or the parent's image would name a child no image holds."""
        ck = self.current
        if not peer.tree_child or ck is None or ck.failure is not None:
            return
        if ck.answer == "":  # the first phase has not begun: it goes to every participant
            ck.participants[peer.id] = peer
        elif ck.answer == "suspended":
            ck.participants[peer.id] = peer
            ck.waiting.add(peer.id)
            peer.state = _PHASE_STATE[ck.phase]
            peer.send({"type": "checkpoint", "exit_after": ck.exit_after})

    def _take_over_from_exec(self, peer: Peer) -> None:
        """The loader a process exec'd (the same host and pid as a connected process, whose
        connection it holds until it is welcomed, then closes): a checkpoint that counts the
        process before its exec counts the new loader instead. The exec came before the process
        was suspended (an exec waits for a checkpoint that holds its threads), so nothing of the
        checkpoint was asked of it that the new loader has not yet been asked; its old
        connection then leaves without failing the checkpoint, as it used to."""
        ck = self.current
        old = next(
            (
                p
                for p in self.peers.values()
                if p is not peer and p.pid == peer.pid and p.host == peer.host
            ),
            None,
        )
        if old is None or ck is None or ck.failure is not None or old.id not in ck.participants:
            return
        if ck.answer == "":  # the first phase has not begun
            del ck.participants[old.id]
            ck.participants[peer.id] = peer
        elif ck.answer == "suspended" and old.id in ck.waiting:
            del ck.participants[old.id]
            ck.waiting.discard(old.id)
            ck.participants[peer.id] = peer
            ck.waiting.add(peer.id)
            peer.state = _PHASE_STATE[ck.phase]
            peer.send({"type": "checkpoint", "exit_after": ck.exit_after})
        else:
            return
        old.state = "RUNNING"
        self.log(f"{peer.label} exec'd from {old.label}: it takes its place in the checkpoint")

    @staticmethod
    def _exec_successor(peer: Peer, ck: JobCheckpoint) -> Peer | None:
        """The participant that joined after PEER from the same host and pid: the loader PEER's
        process exec'd (it closes PEER's connection once welcomed)."""
        return next(
            (
                p
                for p in ck.participants.values()
                if p is not peer and p.pid == peer.pid and p.host == peer.host and p.seq > peer.seq
            ),
            None,
        )

    def _on_disconnect(self, peer: Peer) -> None:
        self.peers.pop(peer.id, None)
        if peer.restarted and not peer.said_restored:  # it died while being restored
            self._fail_restart(f"{peer.label} ended before its restart was done")
        else:
            self._let_go(
                self.restore_gate.gone(peer, peer.restarted, peer.said_restored, time.monotonic())
            )
        if not self.peers:
            self.idle_since = time.monotonic()
        ck = self.current
        if (
            ck is not None
            and ck.answer == "suspended"
            and peer.id in ck.waiting
            and ck.failure is None
            and (peer.tree_child or self._exec_successor(peer, ck))
        ):
            # A child of a tree that exited before it was suspended, or the connection of a
            # loader that exec'd before it was suspended while the exec'd one, which joined
            # before the checkpoint began, is part of it: not part of this checkpoint.
            ck.participants.pop(peer.id, None)
            ck.waiting.discard(peer.id)
            if not ck.waiting and ck.barrier is not None and not ck.barrier.done():
                ck.barrier.set_result(None)
        elif ck is not None and peer.id in ck.participants and ck.barrier is None:
            # The first phase has not begun (the checkpoint waits for restarted processes or MPI
            # ranks): nothing was asked of it, so it is simply not part of this checkpoint.
            ck.participants.pop(peer.id, None)
            self._wake.set()
        elif ck is not None and peer.id in ck.participants:
            ck.gone.add(peer.id)
            finished = ck.phase == "publish" and peer.id in ck.published
            if not finished:
                ck.fail(f"{peer.label} disconnected during the {ck.phase} phase (did it die?)")
            elif ck.barrier is not None and not ck.barrier.done() and not ck.waiting:
                ck.barrier.set_result(None)
            if ck.exit_after:
                self._wake.set()
        self.log(f"{peer.label} left; {len(self.peers)} connected")
        self._maybe_exit_on_last()

    # ---- job checkpoints -------------------------------------------------------------------

    def start_checkpoint(self, exit_after: bool, source: str) -> JobCheckpoint | str:
        """Starts a job checkpoint; a string says why it cannot start."""
        if self.current is not None:
            return "checkpoint in progress"
        if not self.peers:
            return "no process is connected"
        self.attempts += 1
        ck = JobCheckpoint(
            number=self.attempts,
            exit_after=exit_after or self.cfg.exit_after_checkpoint,
            source=source,
            participants=dict(sorted(self.peers.items(), key=lambda kv: kv[1].seq)),
            done=asyncio.get_running_loop().create_future(),
        )
        self.current = ck
        self._spawn(self._run_checkpoint(ck))
        return ck

    def _quorum_pending(self) -> bool:
        if self.expect is None:
            return False
        count, deadline = self.expect
        if self.restarted_joins >= count or time.monotonic() >= deadline:
            self.expect = None
            return False
        return True

    async def _await_quorum(self, ck: JobCheckpoint) -> None:
        """After a restart, no checkpoint starts before every announced process is back and
        restored (restore_gate.py)."""
        while ck.failure is None:
            if self._quorum_pending():
                assert self.expect is not None
                count, deadline = self.expect
                ck.phase = f"waiting for {count - self.restarted_joins} restarted process(es)"
            elif self.restore_gate.pending(time.monotonic()):
                deadline = self.restore_gate.deadline
                ck.phase = f"waiting for {self.restore_gate.expected} process(es) being restored"
            else:
                break
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - time.monotonic()))
        await self._await_mpi_ranks(ck)
        ck.participants = dict(sorted(self.peers.items(), key=lambda kv: kv[1].seq))
        if not ck.participants:
            raise Abandon("no process is connected")

    def _missing_mpi_ranks(self) -> dict[int, list[int]]:
        """Per MPI job size announced by a connected process, the ranks not connected: a job
        checkpointed before all its ranks joined would be saved in part, and could not restart."""
        ranks: dict[int, set[int]] = {}
        for p in self.peers.values():
            if p.mpi_size is not None and p.mpi_rank is not None:
                ranks.setdefault(p.mpi_size, set()).add(p.mpi_rank)
        return {
            size: [r for r in range(size) if r not in have]
            for size, have in ranks.items()
            if len(have) < size
        }

    async def _await_mpi_ranks(self, ck: JobCheckpoint) -> None:
        deadline = time.monotonic() + self.cfg.phase_timeout
        while (missing := self._missing_mpi_ranks()) and ck.failure is None:
            absent = sum(len(r) for r in missing.values())
            if time.monotonic() >= deadline:
                shown = ", ".join(
                    f"{', '.join(map(str, r[:8]))}{' ...' if len(r) > 8 else ''} of {size}"
                    for size, r in sorted(missing.items())
                )
                raise Abandon(
                    f"{absent} MPI rank(s) did not join the coordinator within "
                    f"{self.cfg.phase_timeout:g} s (missing ranks {shown})"
                )
            ck.phase = f"waiting for {absent} MPI rank(s) to join"
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - time.monotonic()))

    async def _run_phase(self, ck: JobCheckpoint, phase: str, send: str, answer: str) -> None:
        if ck.failure is not None:
            raise Abandon(ck.failure)
        ck.phase, ck.answer = phase, answer
        ck.waiting = {pid for pid in ck.participants if pid not in ck.gone}
        ck.barrier = asyncio.get_running_loop().create_future()
        msg: Msg = {"type": send}
        if send == "checkpoint":
            msg["exit_after"] = ck.exit_after
        for p in ck.participants.values():
            p.state = _PHASE_STATE[phase]
            p.send(msg)
            ck.messages += 1
        try:
            await asyncio.wait_for(asyncio.shield(ck.barrier), self.cfg.phase_timeout)
        except TimeoutError:
            late = [ck.participants[i].label for i in sorted(ck.waiting)]
            ck.fail(
                f"{', '.join(late)} did not answer the {phase} phase within "
                f"{self.cfg.phase_timeout:g} s"
            )
            raise Abandon(ck.failure) from None

    async def _await_exits(self, ck: JobCheckpoint) -> None:
        """After a kcheckpoint: every participant has disconnected (exited)."""
        deadline = time.monotonic() + self.cfg.phase_timeout
        while set(ck.participants) - ck.gone and time.monotonic() < deadline:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - time.monotonic()))
        left = [ck.participants[i].label for i in ck.participants if i not in ck.gone]
        if left:
            self.log(f"still connected after kcheckpoint: {', '.join(left)}", always=True)

    async def _run_checkpoint(self, ck: JobCheckpoint) -> None:
        try:
            await self._await_quorum(ck)
            n = len(ck.participants)
            self.log(f"checkpoint {ck.number} of {n} process(es) started ({ck.source})")
            for phase, send, answer, _ in PHASES:
                await self._run_phase(ck, phase, send, answer)
            result = self._complete(ck)
            if ck.exit_after:
                # Each waits for this before it exits: the restart script is there by then.
                for i, p in ck.participants.items():
                    if i not in ck.gone:
                        p.send({"type": "complete", "gen": self.generation})
                await self._await_exits(ck)
        except Abandon as exc:
            result = self._abandon(ck, str(exc))
        except Exception as exc:  # a bug here must not wedge the job: abandon, keep serving
            result = self._abandon(ck, f"internal error: {exc!r}")
        finally:
            self.current = None
            for p in self.peers.values():
                p.state = "RUNNING"
            if self.cfg.interval > 0:
                self.next_due = time.monotonic() + self.cfg.interval
            self._wake.set()
        if not ck.done.done():
            ck.done.set_result(result)
        pending, self.next_request = self.next_request, None
        if pending is not None:
            source, exit_after = pending
            started = self.start_checkpoint(exit_after, source)
            if isinstance(started, str):
                self.log(f"ignored {source}: {started}")
        self._maybe_exit_on_last()

    def _complete(self, ck: JobCheckpoint) -> Msg:
        self.generation += 1
        ordered = [ck.published[i] for i in ck.participants]
        hosts = [restart_script.Placement(p.host, p.addr) for i, p in ck.participants.items()]
        first = ck.participants[next(iter(ck.participants))]
        job_dir = first.proc_dir.parent
        elapsed = time.monotonic() - ck.started
        job = restart_script.ScriptJob(
            job_dir=job_dir,
            gen_dirs=ordered,
            generation=self.generation,
            port=self.cfg.port,
            interval=self.cfg.interval,
            crac_cmd=self.cfg.crac_cmd,
            hosts=hosts,
        )
        problem = restart_script.script_dir_problem(job_dir, ordered)
        try:
            if problem is not None:
                raise PermissionError(errno.EPERM, f"refused: {problem}")
            script = restart_script.write(job)
        except OSError as exc:
            message = (
                f"checkpoint {ck.number}: every image is written, but the restart script "
                f"cannot be written in {job_dir}: {exc.strerror}"
            )
            self.log(message, always=True)
            return {
                "ok": False,
                "error": message,
                "generation": self.generation,
                "dirs": [str(d) for d in ordered],
            }
        self.last_script = script
        self.log(
            f"checkpoint {ck.number} complete in {elapsed:.2f} s: job generation "
            f"{self.generation}, {len(ordered)} image(s), {ck.messages} messages; {script} written"
        )
        return {
            "ok": True,
            "generation": self.generation,
            "dirs": [str(d) for d in ordered],
            "script": str(script),
            "seconds": round(elapsed, 3),
            "messages": ck.messages,
        }

    def _abandon(self, ck: JobCheckpoint, reason: str) -> Msg:
        for pid, p in ck.participants.items():
            if ck.barrier is None:  # abandoned before its first phase: nobody was told of it
                break
            if pid in ck.gone or pid not in self.peers:
                continue
            if pid in ck.waiting:
                p.stale += 1  # its answer to this phase is still to come
            p.send({"type": "abort", "reason": reason})
        if self.generation and self.last_script:
            kept = f"job generation {self.generation} ({self.last_script}) stays valid"
        elif self.generation:  # restarted from it, not yet checkpointed again
            kept = f"job generation {self.generation}, the one restarted from, stays valid"
        else:
            kept = "the previous images, if any, stay valid"
        message = f"checkpoint {ck.number} abandoned: {reason}; {kept}"
        self.log(message, always=True)
        return {"ok": False, "error": message}

    # ---- interval --------------------------------------------------------------------------

    def set_interval(self, seconds: int) -> None:
        self.cfg.interval = seconds
        self.next_due = time.monotonic() + seconds if seconds > 0 else None
        self._wake.set()

    async def _interval_loop(self) -> None:
        while True:
            if self.cfg.interval > 0 and self.next_due is None:
                self.next_due = time.monotonic() + self.cfg.interval
            timeout = None
            if self.cfg.interval > 0 and self.next_due is not None:
                timeout = max(0.0, self.next_due - time.monotonic())
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            due = self.next_due
            if self.cfg.interval > 0 and due is not None and time.monotonic() >= due:
                self.next_due = time.monotonic() + self.cfg.interval
                if self.current is None and self.peers:
                    self.start_checkpoint(False, f"interval of {self.cfg.interval} s")

    # ---- commands --------------------------------------------------------------------------

    async def _commands(
        self, first: Msg, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        msg: Msg | None = first
        while msg is not None:
            reply = await self.command(msg, writer)
            writer.write(encode(reply))
            await writer.drain()
            if msg.get("verb") == "quit" and reply.get("ok"):
                return
            line = await self._readline_idle(reader)
            if not line:
                return
            msg = decode(line)
            if msg.get("type") != "command":
                writer.write(encode({"ok": False, "error": "expected a command"}))
                return

    def status(self) -> Msg:
        running = self.current is None and bool(self.peers)
        return {
            "ok": True,
            "num_peers": len(self.peers),
            "running": "yes" if running else "no",
            "ckpt_interval": self.cfg.interval,
            "host": self.hostname,
            "address": self.cfg.host,
            "port": self.cfg.port,
            "generation": self.generation,
            "pid": os.getpid(),
            "phase": self.current.phase if self.current else None,
            "restart_script": str(self.last_script) if self.last_script else None,
        }

    async def command(self, msg: Msg, writer: asyncio.StreamWriter | None = None) -> Msg:
        if not self._token_ok(msg):
            return {
                "ok": False,
                "error": "wrong token (give the coordinator's in "
                "CRAC_COORD_TOKEN or --coord-token-file)",
            }
        if writer is not None and (uid := self._foreign_uid(writer)) is not None:
            return {
                "ok": False,
                "error": f"this coordinator belongs to uid {os.getuid()}, not to uid {uid}",
            }
        verb = msg.get("verb")
        if verb == "status":
            return self.status()
        if verb == "list":
            peers = sorted(self.peers.values(), key=lambda p: p.seq)
            return {"ok": True, "peers": [p.as_json() for p in peers]}
        if verb in ("checkpoint", "bcheckpoint", "kcheckpoint"):
            started = self.start_checkpoint(verb == "kcheckpoint", f"`crac command {verb}`")
            if isinstance(started, str):
                return {"ok": False, "error": started}
            if verb == "checkpoint":
                return {"ok": True, "started": True, "number": started.number}
            return await asyncio.shield(started.done)
        if verb == "interval":
            value = msg.get("value")
            if not int_in(value, 0, MAX_INTERVAL):
                return {"ok": False, "error": f"interval needs seconds in 0..{MAX_INTERVAL}"}
            self.set_interval(value)
            self.log(f"checkpoint interval set to {value} s")
            return {"ok": True, "ckpt_interval": value}
        if verb in ("kill", "quit"):
            peers = list(self.peers.values())
            for p in peers:
                p.send({"type": "kill"})
            self.log(f"{verb}: killing {len(peers)} process(es)")
            if verb == "quit":
                self.stop("quit")
            return {"ok": True, "killed": len(peers)}
        if verb == "expect":
            value = msg.get("value")
            if not int_in(value, 0, MAX_EXPECT):
                return {
                    "ok": False,
                    "error": f"expect needs a number of processes (0..{MAX_EXPECT})",
                }
            self.restarted_joins = sum(p.restarted for p in self.peers.values())
            self.expect = (value, time.monotonic() + self.cfg.phase_timeout)
            self.restore_gate.expect(value, self.expect[1])
            self._spawn(self._restore_deadline(self.restore_gate.deadline))
            if not self.meeting.open(value):  # a second task of the same restart keeps it
                self.meeting = connections.Meeting(value, self.expect[1])
            self._wake.set()
            return {"ok": True, "expect": value}
        if verb == "connections":
            return await self.meeting.report(msg, self.cfg.phase_timeout)
        if verb == "restart-failed":  # a process of the restart failed before its loader ran
            self._fail_restart(f"a process could not be restarted: {str(msg.get('error'))[:2000]}")
            return {"ok": True}
        return {"ok": False, "error": f"unknown verb {verb!r}"}
