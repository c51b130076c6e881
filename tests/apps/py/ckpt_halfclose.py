"""ckpt_halfclose.py STEPS: connections whose ends finished sending, through checkpoints. Made at
the start, each over TCP (127.0.0.1) and as a Unix socket pair:
  * gone: the peer sent a few bytes and closed; this end has not read them;
  * half: the peer sent a request and shut its writing down, and still reads: each step this
    end writes a line to it, which the peer must read;
  * both (TCP only): this end shut its writing down, then the peer sent its last bytes and
    closed: the kernel has closed the connection (no peer name any more), the bytes are unread.
Each step checks, without reading, that the bytes are still there (MSG_PEEK) and that the
finished ends read as finished (poll's POLLRDHUP), and that the half-closed peers have not seen
an end. At the end: each finished end reads its bytes, then end of file; writing to the Unix pair
whose peer is gone fails with EPIPE; the half-closed peers read every line, then end of file
after this end closes. Prints `step K` and ends with `DONE checksum=H steps=N`."""

from __future__ import annotations

import socket
import sys
import time

from half_closed import finished, tcp_pair
from step_sum import FNV_BASIS, fnv_step


def fail(why: str) -> int:
    print(f"FAIL: {why}", file=sys.stderr)
    return 1


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    gone: dict[str, tuple[socket.socket, bytes]] = {}
    half: dict[str, tuple[socket.socket, socket.socket, bytes]] = {}
    for kind, make in (("tcp", tcp_pair), ("unix", socket.socketpair)):
        mine, peer = make()
        tail = f"{kind}: the last bytes before the peer closed\n".encode()
        peer.sendall(tail)
        peer.close()
        gone[kind] = (mine, tail)
        mine, peer = make()
        request = f"{kind}: a request, then no more\n".encode()
        peer.sendall(request)
        peer.shutdown(socket.SHUT_WR)
        half[kind] = (mine, peer, request)
    mine, peer = tcp_pair()
    mine.shutdown(socket.SHUT_WR)
    if peer.recv(16) != b"":
        return fail("the peer did not read the end")
    both_tail = b"tcp: the answer after this end had finished\n"
    peer.sendall(both_tail)
    peer.close()
    gone["tcp-both"] = (mine, both_tail)
    ends = [m for m, _ in gone.values()] + [m for m, _, _ in half.values()]
    deadline = time.monotonic() + 60
    while not all(finished(m) for m in ends):  # the FINs arrive (late on a loaded machine)
        if time.monotonic() > deadline:
            return fail("the peers' ends never came")
        time.sleep(0.01)
    h = FNV_BASIS
    for k in range(1, steps + 1):
        for kind, (mine, tail) in gone.items():
            if mine.recv(4096, socket.MSG_PEEK) != tail or not finished(mine):
                return fail(f"step {k}: {kind}: the closed peer's bytes or end are gone")
        for kind, (mine, peer, request) in half.items():
            if mine.recv(4096, socket.MSG_PEEK) != request or not finished(mine):
                return fail(f"step {k}: {kind}: the half-closed peer's request or end is gone")
            if finished(peer):
                return fail(f"step {k}: {kind}: the half-closed peer sees an end")
            mine.sendall(f"line {k}\n".encode())
        h = fnv_step(h, k)
        print(f"step {k}", flush=True)
        time.sleep(0.02)
    for kind, (mine, tail) in gone.items():
        if mine.recv(4096) != tail or mine.recv(4096) != b"":
            return fail(f"{kind}: the closed peer's bytes, then end of file, do not read back")
    try:
        gone["unix"][0].send(b"x")
        return fail("writing to a Unix socket whose peer closed did not fail")
    except BrokenPipeError:
        pass
    for kind, (mine, peer, request) in half.items():
        if mine.recv(4096) != request or mine.recv(4096) != b"":
            return fail(f"{kind}: the request, then end of file, do not read back")
        mine.close()
        got = b""
        while chunk := peer.recv(65536):
            got += chunk
        if got != b"".join(f"line {k}\n".encode() for k in range(1, steps + 1)):
            return fail(f"{kind}: the half-closed peer read {len(got)} bytes, not every line")
    print(f"DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
