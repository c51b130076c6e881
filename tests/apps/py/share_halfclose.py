"""share_halfclose TAG MODE [STEPS=300] [MS=20]: half-closed connections between two processes of
a tree. A forked child sends a request over a TCP connection (127.0.0.1) and a Unix socket pair
made before the fork, shuts its writing down on both, then reads a line a step from each; the
parent checks at each step, without reading, that both requests and their ends are still there
(MSG_PEEK, POLLRDHUP) and writes the step's line to both. A second child sent its last bytes on a
third connection and exited at the start: the parent's end keeps them, then end of file. At the
end the parent reads each request and end of file and closes; the child must then read end of
file. The child prints `TAG step N`, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's
checksum); the parent ends with the child's status, non-zero on any mismatch. MODE is unused."""

import os
import socket
import sys
import time

from half_closed import finished, tcp_pair
from step_sum import FNV_BASIS, fnv_step


def fail(who: str, why: str) -> int:
    print(f"share_halfclose: {who}: FAIL: {why}", file=sys.stderr)
    return 1


def child(tag: str, ends: list[socket.socket], steps: int) -> int:
    for sk in ends:
        sk.sendall(b"request\n")
        sk.shutdown(socket.SHUT_WR)
    readers = [sk.makefile("rb") for sk in ends]
    h = FNV_BASIS
    for k in range(1, steps + 1):
        for sk, rd in zip(ends, readers):
            line = rd.readline()
            if line != f"line {k}\n".encode():
                return fail("child", f"step {k}: read {line!r} from {sk.family.name}")
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
    if any(rd.read() != b"" for rd in readers):
        return fail("child", "more than the lines before end of file")
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    (c, d), (u, v), (g, gone_end) = tcp_pair(), socket.socketpair(), tcp_pair()
    tail = b"the last bytes of a process that exited\n"
    kid2 = os.fork()
    if kid2 == 0:
        gone_end.sendall(tail)
        os._exit(0)
    gone_end.close()
    os.waitpid(kid2, 0)
    kid = os.fork()
    if kid == 0:
        for sk in (c, u, g):
            sk.close()
        os._exit(child(tag, [d, v], steps))
    d.close()
    v.close()
    mine = [c, u]
    deadline = time.monotonic() + 60
    while not all(finished(sk) for sk in [*mine, g]):  # the child's requests and ends arrive
        if time.monotonic() > deadline:
            return fail("parent", "the child's requests never came")
        time.sleep(0.01)
    status = 0
    for k in range(1, steps + 1):
        if g.recv(4096, socket.MSG_PEEK) != tail or not finished(g):
            status = fail("parent", f"step {k}: the exited child's bytes or end are gone")
            break
        if any(sk.recv(4096, socket.MSG_PEEK) != b"request\n" or not finished(sk) for sk in mine):
            status = fail("parent", f"step {k}: a request or its end is gone")
            break
        for sk in mine:
            sk.sendall(f"line {k}\n".encode())
        time.sleep(ms / 1000)
    if status == 0 and (g.recv(4096) != tail or g.recv(4096) != b""):
        status = fail("parent", "the exited child's bytes, then end of file, do not read back")
    for sk in mine:
        if status == 0 and (sk.recv(4096) != b"request\n" or sk.recv(4096) != b""):
            status = fail("parent", "a request, then end of file, does not read back")
        sk.close()
    _, child_status = os.waitpid(kid, 0)
    return status or os.waitstatus_to_exitcode(child_status)


if __name__ == "__main__":
    sys.exit(main())
