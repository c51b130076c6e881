"""Connections between the processes of a restarted tree (docs/DECISIONS.md "Connections between
processes"): a pipe, FIFO, socketpair, Unix socket connection, loopback TCP connection or
pseudo-terminal that two or more processes of the tree held at the checkpoint is made once here, in
the root's `crac restart` before it forks the tree (crac_py/launch/tree.py), its saved bytes put
back once, and each process's loader is given it (`--shared-fd FD:INHERITED_FD`) instead of making
its own (loader/state/fd_shared.c). Each process keeps only its own inherited descriptors."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import re
import socket
import stat
import struct
import sys
import termios
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crac_py.image import format as fmt
from crac_py.image import inspect as insp
from crac_py.image.generation import CORE, ImageError

_PIPE, _FIFO, _SOCKET, _FILE = (
    fmt.ENUM["crac_fd_kind"].value(c)
    for c in ("CRAC_FD_PIPE", "CRAC_FD_FIFO", "CRAC_FD_SOCKET", "CRAC_FD_FILE")
)
_PTY_MASTER, _PTY_SLAVE, _STDIO, _CHAR = (
    fmt.ENUM["crac_fd_kind"].value(c)
    for c in ("CRAC_FD_PTY_MASTER", "CRAC_FD_PTY_SLAVE", "CRAC_FD_STDIO", "CRAC_FD_CHAR")
)
_PTS_PATH = re.compile(r"/dev/pts/(\d+)")
_FDS_NOTE = next(n.type for n in fmt.NOTES if n.cname == "CRAC_NT_FDS")
_REGIONS_NOTE = next(n.type for n in fmt.NOTES if n.cname == "CRAC_NT_REGIONS")
_ANON_SHARED = fmt.ENUM["crac_region_kind"].value("CRAC_REGION_ANON_SHARED")
_FILE_SHARED = fmt.ENUM["crac_region_kind"].value("CRAC_REGION_FILE_SHARED")
_CHUNK = fmt.RECORD["crac_chunk_hdr"].struct
_PAGE = 4096
_OUTSIDE_W = fmt.REGION_OUTSIDE_W
_R_LISTEN, _R_PAIR, _R_PENDING, _R_OUTSIDE = 1, 2, 3, 4  # loader/state/fd_socket.c `enum role`
_SELF_DONE = 2  # the `shut` bit of an end shut down for writing (fd_socket.c PEER_DONE, SELF_DONE)
SHARED_FDS_MAX = 1024  # `--shared-fd` options one loader takes (loader/state/fd_shared.c)
_BACKLOG = 128  # listen()'s backlog at restart where the image has none, as the loader's
_F_SETPIPE_SZ = 1031


class ShareError(Exception):
    pass


@dataclass
class End:
    """One program fd of a shared object: in which process (generation), at which number, which
    end of the object."""

    gen: Path
    vpid: int
    fd: int
    side: Any
    queued: Path | None = None  # the bytes waiting to be read at this end (sockets)
    done_sending: bool = False  # a socket's: shut down for writing (its `shut` has SELF_DONE)


@dataclass
class Obj:
    kind: str  # pipe, fifo, unix, tcp, listen, pty
    key: Any
    ends: list[End] = field(default_factory=list)
    # The first end's saved socket text; a pty's: the slave's settings (crac_pty_rec).
    sock: dict[str, Any] = field(default_factory=dict)
    path: str = ""  # a FIFO's
    # A listener's: the sockets of other processes whose connections waited in its queue, in
    # the order accept() takes them: (their side, their saved socket text).
    waiting: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)


def _fd_records(gen: Path) -> list[dict[str, Any]]:
    notes = insp._crac_notes(gen / CORE)
    blob = notes.get(_FDS_NOTE)
    if blob is None:
        return []
    try:
        return insp._fds(blob)
    except insp._Short as exc:
        raise ShareError(
            f"image corrupted: the fds note of {gen / CORE} ends inside {exc}"
        ) from exc


def _socket_text(gen: Path, fd: int) -> dict[str, Any] | None:
    """files/socket-<fd> (written by loader/state/fd_socket.c sock_save), or None."""
    try:
        text = (gen / "files" / f"socket-{fd}").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.splitlines()
    words = lines[0].split() if lines else []
    out: dict[str, Any] = {}
    try:
        for k in range(0, len(words) - 1, 2):
            out[words[k]] = int(words[k + 1])
        for line in lines[1:]:
            name, _, value = line.partition(" ")
            if name in ("local", "peer"):
                out[name] = b"" if value == "-" else bytes.fromhex(value)
            elif name in ("peerino", "backlog"):
                out[name] = int(value)
            elif name == "icons":
                out[name] = [int(w) for w in value.split()]
            elif name == "waiting":  # a TCP listener's: the address one came from, its bytes
                where, _, brought = value.partition(" ")
                out.setdefault(name, []).append((bytes.fromhex(where), int(brought)))
    except ValueError:
        return None
    return out if {"domain", "type", "role", "partner", "queued"} <= out.keys() else None


def done_sending(s: dict[str, Any]) -> bool:
    """Whether the end with saved socket text S had shut down for writing."""
    return bool(s.get("shut", 0) & _SELF_DONE)


def _ip_name(raw: bytes) -> tuple[int, tuple[Any, ...]] | None:
    """A saved sockaddr_in/in6 as (family, address for socket.bind)."""
    if len(raw) < 8:
        return None
    family = struct.unpack_from("=H", raw)[0]
    port = struct.unpack_from("!H", raw, 2)[0]
    if family == socket.AF_INET:
        return family, (socket.inet_ntop(socket.AF_INET, raw[4:8]), port)
    if family == socket.AF_INET6 and len(raw) >= 24:
        return family, (socket.inet_ntop(socket.AF_INET6, raw[8:24]), port)
    return None


def collect(members: list[tuple[Path, int]]) -> list[Obj]:
    """The objects held by two or more of MEMBERS ((generation, vpid) each). A listening socket
    counts as held by the processes whose connections wait in its queue too."""
    objs: dict[Any, Obj] = {}
    unaccepted: dict[int, tuple[End, dict[str, Any]]] = {}  # by the connecting socket's inode
    for gen, vpid in members:
        recs = _fd_records(gen)
        by_fd = {r["fd"]: r for r in recs}
        for r in recs:
            kind, fd = r["kind"], r["fd"]
            if _collect_pty(objs, r, End(gen, vpid, fd, None)):
                continue
            if kind in (_PIPE, _FIFO):
                key = ("pipe" if kind == _PIPE else "fifo", r["ino"])
                side = "r" if r["open_flags"] & os.O_ACCMODE == os.O_RDONLY else "w"
                o = objs.setdefault(key, Obj(key[0], key))
                o.path = r["path"]
                queued = gen / "files" / f"pipe-{r['ino']}"
                o.ends.append(End(gen, vpid, fd, side, queued if queued.exists() else None))
                continue
            if kind != _SOCKET:
                continue
            s = _socket_text(gen, fd)
            if s is None or s["role"] not in (_R_LISTEN, _R_PAIR, _R_PENDING, _R_OUTSIDE):
                continue
            if s["role"] == _R_LISTEN:
                key = ("listen", r["ino"])
                objs.setdefault(key, Obj("listen", key, sock=s)).ends.append(
                    End(gen, vpid, fd, "l")
                )
                continue
            queued = gen / "files" / f"sockq-{fd}" if s["queued"] else None
            if s["domain"] == socket.AF_UNIX and s["role"] != _R_PENDING:
                peer = s.get("peerino", 0)
                if s["role"] == _R_PAIR and s["partner"] in by_fd:
                    peer = by_fd[s["partner"]]["ino"]
                if not peer:
                    # Not accepted yet (the end in the listener's queue has no inode), if a
                    # listener of the tree lists it.
                    side = ("waiting", r["ino"])
                    unaccepted[r["ino"]] = (End(gen, vpid, fd, side), s)
                    continue
                ends = tuple(sorted((r["ino"], peer)))
                key = ("unix", s["type"], ends)
                side = r["ino"]
            elif (
                s["domain"] in (socket.AF_INET, socket.AF_INET6) and s["type"] == socket.SOCK_STREAM
            ):
                local, peer_name = s.get("local", b""), s.get("peer", b"")
                if not local or not peer_name:
                    continue
                key = ("tcp", tuple(sorted((local, peer_name))))
                side = local
            else:
                continue
            o = objs.setdefault(key, Obj(key[0], key, sock=s))
            o.ends.append(End(gen, vpid, fd, side, queued, done_sending(s)))
    for o in list(objs.values()):
        if o.kind != "listen":
            continue
        for ino in o.sock.get("icons", []):
            if ino in unaccepted:
                end, s = unaccepted.pop(ino)
                o.ends.append(end)
                o.waiting.append((end.side, s))
        for where, brought in o.sock.get("waiting", []):
            # A TCP connection from WHERE that no process accepted: its other end is in the
            # queue, so its object has the connecting side only.
            conn = next(
                (
                    c
                    for c in objs.values()
                    if c.kind == "tcp" and c.ends and all(e.side == where for e in c.ends)
                ),
                None,
            )
            if conn is None:
                continue
            del objs[conn.key]
            side = ("waiting", where)
            for e in conn.ends:
                e.side = side
                o.ends.append(e)
            o.waiting.append((side, {**conn.sock, "unsent": brought > 0}))
    # A pipe no process of the tree reads from leads outside (the tree's stdout to a shell's
    # pipe, say): each process keeps the restart's own stdio instead (fd_pipe.c). A terminal
    # whose master is not the tree's (the user's) is the restart's own, or reopened by path.
    return [
        o
        for o in objs.values()
        if len({e.gen for e in o.ends}) >= 2
        and not (o.kind == "pipe" and all(e.side == "w" for e in o.ends))
        and not (o.kind == "pty" and all(e.side == "s" for e in o.ends))
    ]


def _collect_pty(objs: dict[Any, Obj], r: dict[str, Any], end: End) -> bool:
    """Whether R is an end of a pseudo-terminal, added to its pair in OBJS: a master (the pair
    numbered as its slave), or a slave by its /dev/pts/N path, however the loader classed it (a
    slave alone in its process is a device, or its stdio: `script` and pexpect's child hold
    the slave on 0-2, their parent the master)."""
    kind = r["kind"]
    if kind in (_PTY_MASTER, _PTY_SLAVE):
        index, end.side = r["pty"]["index"], "m" if kind == _PTY_MASTER else "s"
        queued = end.gen / "files" / f"pty-{index}"  # what the master had not read (fd_pty.c)
        end.queued = queued if kind == _PTY_MASTER and queued.exists() else None
    elif kind in (_STDIO, _CHAR) and (m := _PTS_PATH.fullmatch(r["path"])):
        index, end.side = int(m.group(1)), "s"
    else:
        return False
    o = objs.setdefault(("pty", index), Obj("pty", ("pty", index)))
    o.ends.append(end)
    if not o.sock and r.get("pty", {}).get("have_termios"):
        o.sock = r["pty"]
    return True


def _make_pty(o: Obj) -> dict[Any, int]:
    """A new pseudo-terminal pair with the slave's saved settings, and what the old one's master
    had not read (written through the slave, output processing off, as loader/state/fd_pty.c
    does); what its slave had not read is not kept (the loaders said so at the checkpoint)."""
    master, slave = os.openpty()
    saved = _first_saved([e for e in o.ends if e.side == "m"])
    if saved is not None:
        was = termios.tcgetattr(slave)
        raw = list(was)
        raw[1] &= ~termios.OPOST
        termios.tcsetattr(slave, termios.TCSANOW, raw)
        data = saved.read_bytes()
        while data:
            data = data[os.write(slave, data) :]
        termios.tcsetattr(slave, termios.TCSANOW, was)
    if o.sock:
        raw = bytes.fromhex(o.sock["termios"])  # glibc struct termios of x86-64
        iflag, oflag, cflag, lflag = struct.unpack_from("=4I", raw)
        cc = [bytes([b]) for b in raw[17:49]]
        ispeed, ospeed = struct.unpack_from("=2I", raw, 52)
        termios.tcsetattr(slave, termios.TCSANOW, [iflag, oflag, cflag, lflag, ispeed, ospeed, cc])
        fcntl.ioctl(slave, termios.TIOCSWINSZ, bytes.fromhex(o.sock["winsize"]))
    return {"m": master, "s": slave}


def _refill_pipe(w: int, saved: Path) -> None:
    data = saved.read_bytes()
    if len(data) > 65536:
        fcntl.fcntl(w, _F_SETPIPE_SZ, len(data))
    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    fcntl.fcntl(w, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        done = 0
        while done < len(data):
            done += os.write(w, data[done:])
    finally:
        fcntl.fcntl(w, fcntl.F_SETFL, flags)


def _first_saved(ends: list[End]) -> Path | None:
    """The saved bytes of the lowest-vpid process that saved them: every reader tees the same
    bytes at the checkpoint (docs/DECISIONS.md), one copy is put back."""
    saved = sorted((e.vpid, e.fd, e.queued) for e in ends if e.queued is not None)
    return saved[0][2] if saved else None


def _send_queue(into: socket.socket, saved: Path, stream: bool) -> None:
    data = saved.read_bytes()
    if stream:
        into.sendall(data)
        return
    at = 0
    while at + 4 <= len(data):
        (n,) = struct.unpack_from("=I", data, at)
        into.send(data[at + 4 : at + 4 + n])
        at += 4 + n


# The killed incarnation of the tree may still be exiting (its sockets hold the addresses) when
# the restart begins: the addresses are tried again for this long before giving up.
ADDRESS_RETRY_S = 15.0


def _tcp_pair(
    a_addr: tuple[int, tuple[Any, ...]],
    b_addr: tuple[int, tuple[Any, ...]],
    listening: dict[tuple[int, int], socket.socket],
) -> tuple[socket.socket, socket.socket]:
    """A loopback TCP connection from A_ADDR to B_ADDR again (A the connecting end), through
    the tree's listener on B_ADDR made already (a listener two processes hold: a second one
    could not listen there), else through a temporary one."""
    deadline = time.monotonic() + ADDRESS_RETRY_S
    # Without a tree listener at either end, the ends may swap roles: the listening end's old
    # port may be another connection's now (an ephemeral port taken again since the checkpoint).
    swappable = (
        _listener_for(listening, a_addr) is None and _listener_for(listening, b_addr) is None
    )
    swapped = False
    while True:
        here, there = (b_addr, a_addr) if swapped else (a_addr, b_addr)
        made = _listener_for(listening, there)
        listener = made or socket.socket(there[0], socket.SOCK_STREAM)
        c = socket.socket(here[0], socket.SOCK_STREAM)
        try:
            if made is None:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(there[1])
                listener.listen(1)
            c = _connect_from(c, here, there)
            accepted, _ = listener.accept()
            return (accepted, c) if swapped else (c, accepted)
        except OSError as exc:
            c.close()
            if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                raise
            if time.monotonic() > deadline:
                raise
            swapped = swappable and not swapped
            time.sleep(0.05)
        finally:
            if made is None:
                listener.close()


def _connect_from(
    sk: socket.socket, here: tuple[int, tuple[Any, ...]], there: tuple[int, tuple[Any, ...]]
) -> socket.socket:
    """SK connected from HERE to THERE; from another port of HERE's host when the killed
    incarnation's connection lingers in TIME_WAIT with the same two addresses (it closed first):
    only the connecting end's own port changes, as the loader does (loader/state/fd_socket.c)."""
    sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sk.bind(here[1])
        sk.connect(there[1])
        return sk
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
            raise
    sk.close()
    sk = socket.socket(here[0], socket.SOCK_STREAM)
    sk.bind((here[1][0], 0, *here[1][2:]))
    sk.connect(there[1])
    return sk


def _listener_for(
    listening: dict[tuple[int, int], socket.socket], addr: tuple[int, tuple[Any, ...]]
) -> socket.socket | None:
    """The tree's listener made already that takes connections to ADDR: the same port, on
    ADDR's host or the wildcard address."""
    sk = listening.get((addr[0], addr[1][1]))
    if sk is None:
        return None
    host = sk.getsockname()[0]
    return sk if host in (addr[1][0], "0.0.0.0", "::") else None


def _bind_opts(sk: socket.socket, s: dict[str, Any]) -> None:
    """The saved options that decide which names an IP socket may bind beside others (absent in
    older images: the kernel's default), as the loader sets them (fd_socket.c bind_opts)."""
    if s.get("reuseport"):
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if s["domain"] == socket.AF_INET6:
        sk.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, s.get("v6only", 0))


def _bind_again(sk: socket.socket, s: dict[str, Any]) -> None:
    """SK bound to the saved socket S's name: a Unix path the killed process left is removed
    first (only a socket file); an abstract name or an IP address the killed incarnation may
    still hold while it exits is tried again for ADDRESS_RETRY_S."""
    if s["domain"] == socket.AF_UNIX:
        addr: Any = _unix_addr(s.get("local", b""))
        if addr is None:
            return
        _unlink_stale(addr)
    else:
        ip = _ip_name(s.get("local", b""))
        if ip is None:
            raise ShareError("a listening socket with an unreadable address")
        addr = ip[1]
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _bind_opts(sk, s)
    deadline = time.monotonic() + ADDRESS_RETRY_S
    while True:
        try:
            sk.bind(addr)
            return
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _listen_again(o: Obj) -> socket.socket:
    """A listening socket that several processes hold, or that another process's connection
    waited in (_connect_waiting), bound and listening again."""
    s = o.sock
    listener = socket.socket(s["domain"], s["type"])
    _bind_again(listener, s)
    listener.listen((s.get("backlog") or _BACKLOG) + len(o.waiting))
    return listener


def _connect_waiting(o: Obj, listener: socket.socket) -> dict[Any, socket.socket]:
    """Each connection that waited in O's queue connected to LISTENER again, after the
    connections accepted already were made through it: its accept() takes them as it would
    have (Unix: in their old order; TCP: the kernel does not say it). What a waiting
    connection had sent is lost: it was in the listener's queued socket, which nothing can
    read (the checkpoint marked such a connection `unsent`, or a TCP listener's image counted
    the bytes)."""
    made = {}
    address = listener.getsockname()
    for side, c in o.waiting:
        sk = made[side] = socket.socket(c["domain"], c["type"])
        if c["domain"] == socket.AF_UNIX:
            _bind_again(sk, c)
            sk.connect(address)
        else:  # from its old address to the one it connected to (the listener's may be "any")
            here, there = _ip_name(c["local"]), _ip_name(c["peer"])
            if here is None or there is None:
                raise ShareError("a waiting TCP connection with an unreadable address")
            sk = made[side] = _connect_from(sk, here, there)
        if c.get("unsent"):
            end = next(e for e in o.ends if e.side == side)
            print(
                f"crac: warning: process {end.vpid}'s fd {end.fd}, connected to {address!r} and "
                "not yet accepted at the checkpoint, loses what it had sent",
                file=sys.stderr,
            )
    return made


def _make(o: Obj, listening: dict[tuple[int, int], socket.socket]) -> dict[Any, int]:
    """The object made again: {side: descriptor}. LISTENING: the tree's TCP listeners made
    already, by (family, port)."""
    if o.kind == "pty":
        return _make_pty(o)
    if o.kind == "pipe":
        r, w = os.pipe()
        saved = _first_saved([e for e in o.ends if e.side == "r"])
        if saved is not None:
            _refill_pipe(w, saved)
        return {"r": r, "w": w}
    if o.kind == "fifo":
        try:
            os.mkfifo(o.path, 0o600)
        except FileExistsError:
            pass
        if not stat.S_ISFIFO(os.stat(o.path).st_mode):
            raise ShareError(f"{o.path}: not a FIFO any more")
        hold = os.open(o.path, os.O_RDWR | os.O_NONBLOCK)
        try:
            saved = _first_saved([e for e in o.ends if e.side == "r"])
            if saved is not None:
                _refill_pipe(hold, saved)
            r = os.open(o.path, os.O_RDONLY | os.O_NONBLOCK)
            w = os.open(o.path, os.O_WRONLY | os.O_NONBLOCK)
        finally:
            os.close(hold)
        return {"r": r, "w": w}
    if o.kind == "unix":
        a_ino, b_ino = o.key[2]
        a, b = socket.socketpair(socket.AF_UNIX, o.key[1])
        pairs = {a_ino: (a, b), b_ino: (b, a)}
    else:
        a_name, b_name = o.key[1]
        a_addr, b_addr = _ip_name(a_name), _ip_name(b_name)
        if a_addr is None or b_addr is None:
            raise ShareError("a TCP connection with an unreadable address")
        if _listener_for(listening, a_addr) is not None:  # A is the accepted end
            b, a = _tcp_pair(b_addr, a_addr, listening)
        else:
            a, b = _tcp_pair(a_addr, b_addr, listening)
        pairs = {a_name: (a, b), b_name: (b, a)}
    stream = o.kind == "tcp" or o.key[1] == socket.SOCK_STREAM
    for side, (mine, other) in pairs.items():
        saved = _first_saved([e for e in o.ends if e.side == side])
        if saved is not None:  # the bytes waiting at this end, sent from the other
            _send_queue(other, saved, stream)
    for side, (mine, _) in pairs.items():  # a half-closed connection stays so, after its bytes
        if any(e.done_sending for e in o.ends if e.side == side):
            mine.shutdown(socket.SHUT_WR)
    return {side: mine.detach() for side, (mine, _) in pairs.items()}


def _is_shared_object(r: dict[str, Any]) -> bool:
    """ANON_SHARED with an identity (MAP_SHARED anonymous memory kept across fork, an unlinked
    POSIX shm object or semaphore), or a file in memory mapped shared (a named one in /dev/shm:
    multiprocessing's semaphores under the spawn and forkserver start methods). Not a SysV
    segment with a key: each process's restart attaches the segment of that key again
    (loader/restart/restart_memory.c), so it stays one SysV segment (PostgreSQL's shmdt of it
    failed on a memfd); one without a key (IPC_PRIVATE) can only be shared as a memfd."""
    if r["flags"] & _OUTSIDE_W or _sysv_key(r["path"]):
        return False
    if r["kind"] == _ANON_SHARED:
        return bool(r["ino"])
    return r["kind"] == _FILE_SHARED and bool(r["flags"] & fmt.REGION_SHMEM_FILE)


def _sysv_key(path: str) -> int:
    """The key of a SysV segment's region ("/SYSV<key> (deleted)" in /proc/PID/maps), else 0."""
    m = re.match(r"/SYSV([0-9a-f]{8})", path)
    return int(m.group(1), 16) if m else 0


def _shared_memory(members: list[tuple[Path, int]]) -> dict[tuple[int, int], list[Any]]:
    """Shared objects (_is_shared_object) mapped by two or more of MEMBERS:
    {(dev, ino): [(vpid, generation, region), ...]}."""
    by_obj: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for gen, vpid in members:
        blob = insp._crac_notes(gen / CORE).get(_REGIONS_NOTE)
        if blob is None:
            continue
        try:
            regions = insp._regions(blob)
        except insp._Short as exc:
            raise ShareError(f"image corrupted: the regions note of {gen / CORE}: {exc}") from exc
        for r in regions:
            if _is_shared_object(r):
                by_obj[(r["dev"], r["ino"])].append((vpid, gen, r))
    return {k: v for k, v in by_obj.items() if len({g for _, g, _ in v}) >= 2}


def _make_memory(maps: list[Any]) -> int:
    """One descriptor for a shared object, its bytes from the images (the lowest vpid's last, so
    its copy wins where several saved the same page; they were taken at one moment): a memfd, or
    for a file in memory the file itself, made again if it is gone, its mapped ranges put back as
    the checkpoint saw them (loader/restart/restart_memory.c does the same for a file only one
    process maps)."""
    first = maps[0][2]
    if first["kind"] == _FILE_SHARED:
        fd = os.open(first["path"], os.O_RDWR | os.O_CREAT, 0o600)
        size = max(r["file_size"] for _, _, r in maps)
        if os.fstat(fd).st_size < size:
            os.ftruncate(fd, size)
    else:
        size = max(r["file_offset"] + r["end"] - r["start"] for _, _, r in maps)
        fd = os.memfd_create("crac-shared", 0)
        os.ftruncate(fd, size)
    for _, gen, r in sorted(maps, key=lambda m: -m[0]):
        if not r["core_offset"]:
            continue
        length = min(r["end"] - r["start"], size - r["file_offset"])
        if length > 0:
            os.pwrite(fd, _region_bytes(gen, r)[:length], r["file_offset"])
    return fd


def _region_bytes(gen: Path, r: dict[str, Any]) -> bytes:
    """A saved region's bytes, pages not saved as zeros: at its offset in upper.core, or as the
    chunk stream of a --compress or incremental image, whose shared regions' chunks are stored
    RAW (loader/image/image_core.c), so no decompressor is needed here."""
    length = r["end"] - r["start"]
    with (gen / CORE).open("rb") as core:
        core.seek(r["core_offset"])
        if not r["flags"] & fmt.REGION_COMPRESSED:
            return core.read(length).ljust(length, b"\0")
        out = bytearray(length)
        while True:
            head = core.read(_CHUNK.size)
            if len(head) < _CHUNK.size:
                raise ShareError(f"image corrupted: {gen / CORE} ends inside a region's chunks")
            magic, method, first, n, stored, _, gap = _CHUNK.unpack(head)
            if magic != fmt.CHUNK_MAGIC or (n and method != fmt.CHUNK_RAW) or gap >= _PAGE:
                raise ShareError(f"image corrupted: a shared region's chunk in {gen / CORE}")
            if not n:
                return bytes(out)
            at = first * _PAGE
            core.seek(gap, os.SEEK_CUR)
            data = core.read(stored)
            if stored != n * _PAGE or len(data) != stored or at + stored > length:
                raise ShareError(f"image corrupted: a shared region's chunk in {gen / CORE}")
            out[at : at + stored] = data


def _unlink_stale(addr: bytes) -> None:
    """The socket file the killed process left at a Unix path ADDR (not an abstract name),
    removed so the name can be bound again; anything else there is left alone. Its directory is
    made again (owner-only) if it is gone, as the loader does (loader/state/fd_socket.c
    bind_name): a process of the killed run that went on may have removed it."""
    if addr[0] == 0:
        return
    try:
        if stat.S_ISSOCK(os.lstat(addr).st_mode):
            os.unlink(addr)
    except FileNotFoundError:
        parent = os.path.dirname(addr)
        if parent:
            os.makedirs(parent, mode=0o700, exist_ok=True)


def _unix_addr(raw: bytes) -> bytes | None:
    """A saved sockaddr_un as Python's address: the path, or the abstract name with its NUL;
    None for an unnamed one."""
    name = raw[2:]
    if not name:
        return None
    return name if name[0] == 0 else name.split(b"\0", 1)[0]


def _named_dgrams(members: list[tuple[Path, int]]) -> list[tuple[Path, int, int, dict[str, Any]]]:
    """Every Unix datagram socket bound to a name, not one end of a pair: (gen, vpid, fd, its
    saved text)."""
    out = []
    for gen, vpid in members:
        for r in _fd_records(gen):
            if r["kind"] != _SOCKET:
                continue
            s = _socket_text(gen, r["fd"])
            if (
                s is not None
                and s["domain"] == socket.AF_UNIX
                and s["type"] == socket.SOCK_DGRAM
                and s["role"] == 0
                and _unix_addr(s.get("local", b"")) is not None
            ):
                out.append((gen, vpid, r["fd"], s))
    return out


def _datagrams(saved: Path) -> list[tuple[int, bytes | None, bytes]]:
    """files/sockq-<fd> of a named datagram socket (loader/state/fd_socket.c save_named_dgrams):
    (sender fd, sender's name for -2, bytes) each."""
    data, at, out = saved.read_bytes(), 0, []
    while at + 8 <= len(data):
        n, sender = struct.unpack_from("=Ii", data, at)
        at += 8
        name = None
        if sender == -2:
            (nlen,) = struct.unpack_from("=I", data, at)
            name = _unix_addr(data[at + 4 : at + 4 + nlen])
            at += 4 + nlen
        out.append((sender, name, data[at : at + n]))
        at += n
    return out


def _make_dgrams(
    dgrams: list[tuple[Path, int, int, dict[str, Any]]],
) -> dict[tuple[Path, int], int]:
    """The tree's named datagram sockets made here, each bound to its name (and connected to its
    peer's), and their queued datagrams sent again, each from the socket bound to its sender's
    name (another process's, which a loader restarting on its own cannot do)."""
    socks: dict[tuple[Path, int], socket.socket] = {}
    by_name: dict[bytes, socket.socket] = {}
    for gen, _, fd, s in dgrams:
        addr = _unix_addr(s["local"])
        assert addr is not None
        _unlink_stale(addr)
        sk = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sk.bind(addr)
        socks[(gen, fd)] = by_name[addr] = sk
    for gen, _, fd, s in dgrams:
        peer = _unix_addr(s.get("peer", b""))
        if peer is not None:
            try:
                socks[(gen, fd)].connect(peer)
            except OSError:
                pass  # its peer is gone: the program's next send says so
    for gen, _, fd, s in dgrams:
        saved = gen / "files" / f"sockq-{fd}"
        if not s["queued"] or not saved.exists():
            continue
        to = _unix_addr(s["local"])
        for sender, name, data in _datagrams(saved):
            via = socks.get((gen, sender)) if sender >= 0 else by_name.get(name or b"")
            if via is None:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as anon:
                    anon.sendto(data, to)
            else:
                via.sendto(data, to)
    return {key: sk.detach() for key, sk in socks.items()}


def _open_file_links(gen: Path, fd: int) -> list[tuple[str, int, int]]:
    """files/openfile-FD (loader/state/fd_regular.c): ("dup", 0, M) for a lower fd of the same
    process that is the same open file, ("parent", VPID, N) for the parent's."""
    try:
        lines = (gen / "files" / f"openfile-{fd}").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in lines:
        words = line.split()
        try:
            if words[:1] == ["dup"] and len(words) == 2:
                out.append(("dup", 0, int(words[1])))
            elif words[:1] == ["parent"] and len(words) == 3:
                out.append(("parent", int(words[1]), int(words[2])))
        except ValueError:
            continue
    return out


def _shared_files(members: list[tuple[Path, int]]) -> list[tuple[dict[str, Any], list[Any]]]:
    """Regular files that are one open file of several processes of MEMBERS (inherited across
    fork, or dup'd: one offset they all move): each as (the record of its topmost holder, the
    (generation, fd) of every holder). Only across processes: within one, the loader does it."""
    gen_of = {vpid: gen for gen, vpid in members}
    records: dict[tuple[Path, int], dict[str, Any]] = {}
    link: dict[tuple[Path, int], tuple[Path, int]] = {}
    for gen, _ in members:
        for r in _fd_records(gen):
            if r["kind"] != _FILE:
                continue
            node = (gen, r["fd"])
            records[node] = r
            for how, vpid, fd in _open_file_links(gen, r["fd"]):
                other = (gen, fd) if how == "dup" else (gen_of.get(vpid), fd)
                if other[0] is not None and node not in link:
                    link[node] = other  # type: ignore[assignment]

    def top(node: tuple[Path, int]) -> tuple[Path, int]:
        seen = set()
        while node in link and node not in seen:
            seen.add(node)
            node = link[node]
        return node

    groups: dict[tuple[Path, int], list[tuple[Path, int]]] = defaultdict(list)
    for node in records:
        groups[top(node)].append(node)
    return [
        (records[head], nodes)
        for head, nodes in groups.items()
        if head in records and len({g for g, _ in nodes}) >= 2
    ]


def _open_again(r: dict[str, Any]) -> int | None:
    """The file of record R opened again with its flags, or None when the loaders must deal
    with it one by one (removed, moved, replaced by something else: each says so)."""
    if r["unlinked"]:
        return None
    path = r["path"]
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
    except OSError:
        return None
    made = os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_TMPFILE", 0)
    try:
        return os.open(path, (r["open_flags"] & ~made) | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None


def plan(members: list[tuple[Path, int]]) -> dict[Path, list[tuple[str, str, int]]]:
    """Makes every object shared between MEMBERS once, its bytes put back; for each generation
    its loader options (option, value, inherited descriptor). The descriptors are moved above
    every number the programs used, so no loader puts anything over them before it takes them."""
    objs = collect(members)
    mems = _shared_memory(members)
    dgrams = _named_dgrams(members)
    if len({g for g, _, _, _ in dgrams}) < 2:
        dgrams = []  # only one process has named datagram sockets: its loader makes them
    files = _shared_files(members)
    if not objs and not mems and not dgrams and not files:
        return {}
    top = max((r["fd"] for g, _ in members for r in _fd_records(g)), default=2)
    out: dict[Path, list[tuple[str, str, int]]] = defaultdict(list)

    def high(fd: int) -> int:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, top + 64)  # inheritable
        os.close(fd)
        return moved

    # Listeners first (a connection accepted from one is made through it), the connections
    # that waited in them last (accept() takes those after what is already queued).
    made: dict[int, dict[Any, int]] = {}
    listeners: dict[int, socket.socket] = {}
    listening: dict[tuple[int, int], socket.socket] = {}
    for o in sorted(objs, key=lambda o: o.kind != "listen"):
        try:
            if o.kind == "listen":
                sk = listeners[id(o)] = _listen_again(o)
                if o.sock["domain"] != socket.AF_UNIX:
                    listening[(o.sock["domain"], sk.getsockname()[1])] = sk
            else:
                made[id(o)] = _make(o, listening)
        except OSError as exc:
            raise ShareError(f"cannot make a shared {o.kind} again: {exc}") from exc
    for o in objs:
        if o.kind == "listen":
            try:
                waiting = _connect_waiting(o, listeners[id(o)])
            except OSError as exc:
                raise ShareError(f"cannot connect to a shared listener again: {exc}") from exc
            made[id(o)] = {"l": listeners[id(o)].detach()}
            made[id(o)].update((side, sk.detach()) for side, sk in waiting.items())
        # An end no process holds (a pipe's writing end its writer had closed) is closed now:
        # kept, every process of the tree would inherit it, and the readers never see the end
        # of file (git clone's upload-pack waited for ever so).
        used = {e.side for e in o.ends}
        moved = {}
        for side, fd in made[id(o)].items():
            if side in used:
                moved[side] = high(fd)
            else:
                os.close(fd)
        for e in o.ends:
            out[e.gen].append(("--shared-fd", f"{e.fd}:{moved[e.side]}", moved[e.side]))
    if dgrams:
        try:
            made_dgrams = _make_dgrams(dgrams)
        except OSError as exc:
            raise ShareError(f"cannot bind a datagram socket of the tree again: {exc}") from exc
        for (gen, fd), sk in made_dgrams.items():
            moved_fd = high(sk)
            out[gen].append(("--shared-fd", f"{fd}:{moved_fd}", moved_fd))
    for record, holders in files:
        # Each loader takes at most SHARED_FDS_MAX: past that a file is reopened by each process
        # on its own (its offset unshared) rather than the restart refused.
        if any(
            len(out[gen]) + sum(g == gen for g, _ in holders) > SHARED_FDS_MAX for gen, _ in holders
        ):
            continue
        opened = _open_again(record)
        if opened is None:
            continue
        moved_fd = high(opened)
        for gen, fd in holders:
            out[gen].append(("--shared-fd", f"{fd}:{moved_fd}", moved_fd))
    for (dev, ino), maps in mems.items():
        try:
            fd = high(_make_memory(maps))
        except PermissionError:
            if any(r["prot"] & mmap.PROT_WRITE for _, _, r in maps):
                raise ShareError(f"cannot write {maps[0][2]['path']} back: permission denied")
            continue  # another's file the processes only read: each loader maps it as it is
        except OSError as exc:
            raise ShareError(f"cannot make a shared memory object again: {exc}") from exc
        for gen in {g for _, g, _ in maps}:
            out[gen].append(("--shared-mem", f"{dev}:{ino}:{fd}", fd))
    return dict(out)


def keep(shared: dict[Path, list[tuple[str, str, int]]], gen: Path) -> list[str]:
    """In the process that restarts GEN: closes the other processes' descriptors; the loader
    options that give it its own."""
    mine = shared.get(gen, [])
    own = {h for _, _, h in mine}
    for h in {h for items in shared.values() for _, _, h in items} - own:
        os.close(h)
    return [a for opt, value, _ in mine for a in (opt, value)]


__all__ = ["ImageError", "ShareError", "collect", "keep", "plan"]
