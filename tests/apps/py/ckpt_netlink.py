"""ckpt_netlink.py STEPS [stuck]: netlink sockets through checkpoints, as ip, ss and a daemon's
monitor hold them. A NETLINK_ROUTE socket bound to link and address groups (and, by
NETLINK_ADD_MEMBERSHIP, group 33, past bind's 32) with NETLINK_EXT_ACK on, and a NETLINK_SOCK_DIAG
socket bound to a port id of its own choosing. Each step asks the first for the links, prints its
line, and reads the answer 30 ms later (a checkpoint asked for at the line comes in between); then
it dumps the listening TCP sockets on the second. It checks what libmnl checks (every answer's
sequence number, its port id the socket's own, the dump ended by NLMSG_DONE) and each socket's
name, groups and option as they were at the start, and calls getaddrinfo with AI_ADDRCONFIG
(glibc's own netlink socket). With `stuck`, a third socket asks for the links once and never
reads the answer. Prints `step K` and ends with `DONE checksum=H steps=N`."""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

from step_sum import FNV_BASIS, fnv_step

SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NETLINK_LIST_MEMBERSHIPS = 9
NETLINK_EXT_ACK = 11
NETLINK_SOCK_DIAG = 4
RTM_GETLINK = 18
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
RTMGRP_LINK, RTMGRP_IPV4_IFADDR = 1, 0x10
HIGH_GROUP = 33  # RTNLGRP_BRVLAN: only NETLINK_ADD_MEMBERSHIP reaches groups past 32
TCP_LISTEN = 1 << 10
ADDRCONFIG = socket.AI_ADDRCONFIG


def fail(why: str) -> None:
    print(f"FAIL: {why}", file=sys.stderr, flush=True)
    sys.exit(1)


def request(sk: socket.socket, kind: int, seq: int, body: bytes) -> None:
    sk.send(struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)


def read_dump(sk: socket.socket, seq: int, what: str) -> int:
    """The messages of one dump up to its NLMSG_DONE, checked as libmnl's mnl_cb_run does."""
    port = sk.getsockname()[0]
    count = 0
    while True:
        data = sk.recv(1 << 16)
        at = 0
        while at + 16 <= len(data):
            length, kind, _flags, got_seq, pid = struct.unpack_from("=IHHII", data, at)
            if got_seq != seq or pid != port:
                fail(f"{what}: answer for seq {got_seq} port {pid}, not {seq} port {port}")
            if kind == NLMSG_ERROR:
                fail(f"{what}: error {struct.unpack_from('=i', data, at + 16)[0]}")
            if kind == NLMSG_DONE:
                return count
            count += 1
            at += (length + 3) & ~3


def memberships(sk: socket.socket) -> bytes:
    return sk.getsockopt(SOL_NETLINK, NETLINK_LIST_MEMBERSHIPS, 16)


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    route = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    route.bind((0, RTMGRP_LINK | RTMGRP_IPV4_IFADDR))
    route.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, HIGH_GROUP)
    route.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
    diag = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    diag.bind((0x40000000 | os.getpid(), 0))  # a port id of its own, not the kernel's choice
    start = {
        "route name": route.getsockname(),
        "route groups": memberships(route),
        "route ext_ack": route.getsockopt(SOL_NETLINK, NETLINK_EXT_ACK),
        "diag name": diag.getsockname(),
    }
    if "stuck" in sys.argv[2:]:
        stuck = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        request(stuck, RTM_GETLINK, 1, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0))
    h = FNV_BASIS
    for k in range(1, steps + 1):
        request(route, RTM_GETLINK, k, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0))
        # The step's line first: the test's checkpoint, asked for when it appears, comes while
        # the answer waits to be read.
        h = fnv_step(h, k)
        print(f"step {k}", flush=True)
        time.sleep(0.03)
        if read_dump(route, k, "links") < 1:
            fail(f"step {k}: no link, not even lo")
        # inet_diag_req_v2: family, protocol, ext, pad, states, then an empty inet_diag_sockid
        req = struct.pack("=BBBxI", socket.AF_INET, socket.IPPROTO_TCP, 0, TCP_LISTEN) + bytes(48)
        request(diag, SOCK_DIAG_BY_FAMILY, k, req)
        read_dump(diag, k, "listeners")
        # glibc asks the kernel for the machine's addresses over a netlink socket of its own.
        if not socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM, flags=ADDRCONFIG):
            fail(f"step {k}: getaddrinfo found no address for localhost")
        now = {
            "route name": route.getsockname(),
            "route groups": memberships(route),
            "route ext_ack": route.getsockopt(SOL_NETLINK, NETLINK_EXT_ACK),
            "diag name": diag.getsockname(),
        }
        for key, was in start.items():
            if now[key] != was:
                fail(f"step {k}: {key} is {now[key]!r}, was {was!r}")
        time.sleep(0.01)
    print(f"DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
