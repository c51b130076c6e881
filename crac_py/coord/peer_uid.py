"""Which user holds the other end of a TCP connection from this host: the kernel's sock_diag, asked
for that one socket (tens of microseconds), else /proc/net/tcp (which walks every bucket of the
kernel's connection table: 4-5 ms on a 24 GiB machine whatever the number of sockets, and was
most of the time a forked process of a tree took to join its coordinator)."""

from __future__ import annotations

import socket
import struct
from typing import Any

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
# struct nlmsghdr; struct inet_diag_req_v2 (family, protocol, ext, pad, states, sockid: sport,
# dport (big-endian), src[16], dst[16], interface, cookie[2]).
_NLMSG = struct.Struct("=IHHII")
_REQ = struct.Struct("=BBBBI")
_SOCKID = struct.Struct("!HH16s16s")
_SOCKID_REST = struct.Struct("=III")
_NOCOOKIE = 0xFFFFFFFF
_MSG_UID_AT = 4 + _SOCKID.size + _SOCKID_REST.size + 12  # inet_diag_msg's idiag_uid
_TIMEOUT_S = 1.0


def _packed(family: int, host: str) -> bytes | None:
    try:
        return socket.inet_pton(family, host).ljust(16, b"\0")
    except (OSError, ValueError):
        return None


def _by_diag(family: int, here: tuple[Any, ...], there: tuple[Any, ...]) -> int | None:
    """The uid of the TCP socket whose own address is HERE and whose peer is THERE."""
    src, dst = _packed(family, str(here[0])), _packed(family, str(there[0]))
    if src is None or dst is None:
        return None
    req = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF)
    req += _SOCKID.pack(int(here[1]), int(there[1]), src, dst)
    req += _SOCKID_REST.pack(0, _NOCOOKIE, _NOCOOKIE)
    msg = _NLMSG.pack(_NLMSG.size + len(req), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + req
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(_TIMEOUT_S)
        nl.send(msg)
        reply = nl.recv(8192)
    if len(reply) < _NLMSG.size:
        return None
    _, kind, _, _, _ = _NLMSG.unpack_from(reply)
    body = reply[_NLMSG.size :]
    if kind != _SOCK_DIAG_BY_FAMILY or len(body) < _MSG_UID_AT + 4:
        return None  # NLMSG_ERROR: no such socket
    return struct.unpack_from("=I", body, _MSG_UID_AT)[0]


def _proc_hex(ip: str, port: int) -> str | None:
    try:
        packed = socket.inet_aton(ip)
    except OSError:
        return None
    return f"{int.from_bytes(packed, 'little'):08X}:{port:04X}"


def _by_proc(here: tuple[Any, ...], there: tuple[Any, ...]) -> int | None:
    want = (_proc_hex(str(here[0]), int(here[1])), _proc_hex(str(there[0]), int(there[1])))
    if None in want:
        return None
    try:
        with open("/proc/net/tcp") as fh:
            next(fh, None)
            for line in fh:
                f = line.split()
                if len(f) > 7 and (f[1], f[2]) == want:
                    return int(f[7])
    except (OSError, ValueError):
        pass
    return None


def _unmapped(addr: tuple[Any, ...]) -> tuple[Any, ...]:
    """An IPv4 address an IPv6 listener saw as ::ffff:a.b.c.d as IPv4: the client's socket is."""
    host = str(addr[0])
    return (host[7:], addr[1]) if host.lower().startswith("::ffff:") and "." in host else addr


def tcp_peer_uid(peer: tuple[Any, ...], local: tuple[Any, ...]) -> int | None:
    """The uid owning the client end of a TCP connection from this host, PEER its address and
    LOCAL ours (as getpeername and getsockname give them); None when it cannot be told (another
    host, or neither source answers)."""
    peer, local = _unmapped(peer), _unmapped(local)
    family = socket.AF_INET6 if ":" in str(peer[0]) else socket.AF_INET
    try:
        return _by_diag(family, peer, local)
    except OSError:
        return _by_proc(peer, local) if family == socket.AF_INET else None
