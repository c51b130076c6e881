"""TCP connections between processes of a job that are not in one tree, on one host or on
several (docs/HOSTS.md, "Connections between hosts"): made again before the restarted processes
run, wherever their peers now are, with the bytes each end had not read yet put back.

The restart of each tree (its root's `crac restart`, before it forks the tree) listens, for each
such connection its image holds, on the address it reaches the coordinator from, and reports the
connection (its two saved addresses) and that address to the coordinator, which answers once
every process of the restart has reported (crac_py/coord/connections.py). For each connection
whose peer reported too, the end with the smaller saved address connects to the other's new
address; both send a header naming the connection and the bytes that waited at their end, and
each writes the other's bytes back into the connection, so they wait at the same end as before.
The socket is then given to the loader like one shared within the tree (`--shared-fd`,
crac_py/launch/share.py). A connection whose peer is not part of the job is left to the loader,
which makes it fail as a dropped connection, with a warning."""

from __future__ import annotations

import fcntl
import hashlib
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from crac_py.coord import client as coord_client
from crac_py.coord.client import CoordError, Endpoint
from crac_py.launch import share

MAGIC = b"CRACXCN1"
HEADER = struct.Struct("=8s32sQ")  # magic, the connection's digest, bytes that follow
MEET_TIMEOUT = 300.0  # the coordinator answers within its phase timeout
CONNECT_TIMEOUT = 60.0
_SO_RCVBUFFORCE, _SO_SNDBUFFORCE = 33, 32


class ConnError(Exception):
    pass


@dataclass
class Cand:
    """A TCP connection of one process of this tree whose peer is outside the tree."""

    gen: Path
    fd: int
    local: bytes
    peer: bytes
    queued: Path | None
    done_sending: bool = False  # shut down for writing: the peer reads end of file after its bytes

    def digest(self, token: str) -> bytes:
        a, b = sorted((self.local, self.peer))
        return hashlib.sha256(token.encode() + b"\0" + a + b"\0" + b).digest()


def candidates(members: list[tuple[Path, int]], in_tree: set[tuple[Path, int]]) -> list[Cand]:
    """The TCP connections of MEMBERS that leave the tree (IN_TREE: (gen, fd) already made)."""
    out = []
    for gen, _ in members:
        for r in share._fd_records(gen):
            if r["kind"] != share._SOCKET or (gen, r["fd"]) in in_tree:
                continue
            s = share._socket_text(gen, r["fd"])
            if (
                s is None
                or s["role"] != share._R_OUTSIDE
                or s["domain"] not in (socket.AF_INET, socket.AF_INET6)
                or s["type"] != socket.SOCK_STREAM
                or not s.get("local")
                or not s.get("peer")
            ):
                continue
            queued = gen / "files" / f"sockq-{r['fd']}" if s["queued"] else None
            out.append(Cand(gen, r["fd"], s["local"], s["peer"], queued, share.done_sending(s)))
    # Every process takes its connections in one global order (the pair of saved names), so two
    # processes never wait for each other on two connections taken in opposite orders.
    return sorted(out, key=lambda c: (sorted((c.local, c.peer)), c.local))


def _family(raw: bytes) -> int:
    family = struct.unpack_from("=H", raw)[0]
    return socket.AF_INET6 if family == socket.AF_INET6 else socket.AF_INET


def _big_buffers(sock: socket.socket, nbytes: int) -> None:
    """Room for NBYTES put back at once in each direction: the bytes are written back before
    either program reads (forced beyond rmem_max where allowed)."""
    want = max(nbytes * 2 + 65536, 262144)
    for force, plain in ((_SO_RCVBUFFORCE, socket.SO_RCVBUF), (_SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, want)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, want)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnError("the peer closed the connection while it was being made again")
        buf += chunk
    return bytes(buf)


def _exchange(sock: socket.socket, c: Cand, token: str, first: bool) -> None:
    """Both ends' unread bytes swapped over SOCK, then written back: each end's wait there."""
    mine = c.queued.read_bytes() if c.queued is not None else b""
    digest = c.digest(token)

    def send() -> None:
        sock.sendall(HEADER.pack(MAGIC, digest, len(mine)) + mine)

    def receive() -> bytes:
        magic, got, n = HEADER.unpack(_recv_exact(sock, HEADER.size))
        if magic != MAGIC or got != digest:
            raise ConnError("a connection from something else than its peer")
        return _recv_exact(sock, n)

    if first:
        send()
        theirs = receive()
    else:
        theirs = receive()
        send()
    sock.sendall(theirs)  # they wait at the peer's end again
    if c.done_sending:
        sock.shutdown(socket.SHUT_WR)


def _listen_addr(ep: Endpoint) -> str:
    """The address this host reaches the coordinator from (its peers reach it there too)."""
    with socket.create_connection((ep.host, ep.port), timeout=coord_client.CONNECT_TIMEOUT) as s:
        return s.getsockname()[0]


def reconnect(
    members: list[tuple[Path, int]], in_tree: set[tuple[Path, int]], ep: Endpoint | None
) -> dict[Path, list[tuple[int, int]]]:
    """The connections of MEMBERS to processes of other trees, made again through the
    coordinator at EP: for each generation its (program fd, inherited descriptor) pairs."""
    if ep is None:
        return {}
    cands = candidates(members, in_tree)
    try:
        host = _listen_addr(ep) if cands else "-"
    except OSError as exc:
        raise ConnError(f"cannot reach the coordinator at {ep}: {exc.strerror}") from None
    listeners = []
    ends = []
    for c in cands:
        lsock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        _big_buffers(lsock, c.queued.stat().st_size if c.queued is not None else 0)
        lsock.bind((host, 0))
        lsock.listen(4)
        listeners.append(lsock)
        port = lsock.getsockname()[1]
        ends.append({"local": c.local.hex(), "peer": c.peer.hex(), "addr": f"{host}:{port}"})
    msg = {"type": "command", "verb": "connections", "token": ep.token}
    msg |= {"processes": len(members), "ends": ends}
    try:
        reply = coord_client.request(ep, msg, timeout=MEET_TIMEOUT)
    except CoordError as exc:
        raise ConnError(str(exc)) from None
    if not reply.get("ok") or len(reply.get("peers") or []) != len(cands):
        raise ConnError(f"the coordinator refused the connections: {reply.get('error')}")
    top = max((r["fd"] for g, _ in members for r in share._fd_records(g)), default=2)
    out: dict[Path, list[tuple[int, int]]] = {}
    try:
        for c, lsock, peer in zip(cands, listeners, reply["peers"], strict=True):
            if not peer.get("addr"):
                continue  # not a process of the job: the loader makes it a dropped connection
            size = c.queued.stat().st_size if c.queued is not None else 0
            if peer.get("connect"):
                addr, _, port = str(peer["addr"]).rpartition(":")
                sock = socket.socket(_family(c.local))
                _big_buffers(sock, size)
                sock.settimeout(CONNECT_TIMEOUT)
                sock.connect((addr, int(port)))
            else:
                lsock.settimeout(CONNECT_TIMEOUT)
                sock, _ = lsock.accept()
                sock.settimeout(CONNECT_TIMEOUT)
            _exchange(sock, c, ep.token, bool(peer.get("connect")))
            sock.setblocking(True)
            high = fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD, top + 64)  # inheritable
            sock.close()
            out.setdefault(c.gen, []).append((c.fd, high))
    except (OSError, ValueError) as exc:
        raise ConnError(f"cannot make a connection between processes again: {exc}") from None
    finally:
        for lsock in listeners:
            lsock.close()
    return out
