"""ckpt_selectors.py STEPS — a selectors (epoll) loop over a socketpair with a message in flight
each way between steps, and an asyncio event loop (its own epoll and wake-up socketpair) kept
across steps reading a third socket. Prints `step N` lines, then DONE; fails on any mismatch."""

import asyncio
import selectors
import socket
import sys
import time


def message(k: int, tag: str) -> bytes:
    return f"{tag}:{k}:".encode() + bytes((k * 7 + i) % 256 for i in range(40 + k % 50))


def read_exact(sel: selectors.BaseSelector, want: dict[str, bytes]) -> None:
    """Reads each named socket's expected bytes, waiting on the selector (a minute at most)."""
    got = {name: b"" for name in want}
    deadline = time.monotonic() + 60
    while any(len(got[n]) < len(want[n]) for n in want):
        if time.monotonic() > deadline:
            sys.exit(f"ckpt_selectors: FAIL: nothing to read ({got})")
        for key, _ in sel.select(timeout=1.0):
            name = key.data
            if name in want and len(got[name]) < len(want[name]):
                got[name] += key.fileobj.recv(len(want[name]) - len(got[name]))
    for name in want:
        if got[name] != want[name]:
            sys.exit(f"ckpt_selectors: FAIL: {name} read {got[name]!r}, expected {want[name]!r}")


async def ask(loop: asyncio.AbstractEventLoop, c: socket.socket, s: socket.socket, k: int) -> None:
    await loop.sock_sendall(c, message(k, "async"))
    data = b""
    want = message(k, "async")
    while len(data) < len(want):
        data += await loop.sock_recv(s, len(want) - len(data))
    if data != want:
        sys.exit(f"ckpt_selectors: FAIL: asyncio read {data!r}")


def main() -> None:
    steps = int(sys.argv[1])
    a, b = socket.socketpair()
    for s in (a, b):
        s.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(a, selectors.EVENT_READ, "a")
    sel.register(b, selectors.EVENT_READ, "b")
    c, d = socket.socketpair()
    c.setblocking(False)
    d.setblocking(False)
    loop = asyncio.new_event_loop()
    total = 0
    for k in range(1, steps + 1):
        a.sendall(message(k, "to-b"))
        b.sendall(message(k, "to-a"))
        if k > 1:
            read_exact(sel, {"b": message(k - 1, "to-b"), "a": message(k - 1, "to-a")})
        loop.run_until_complete(ask(loop, c, d, k))
        total = (total * 31 + k) % (1 << 64)
        print(f"step {k}", flush=True)
        time.sleep(0.04)
    loop.close()
    print(f"DONE steps={steps} total={total}", flush=True)


main()
