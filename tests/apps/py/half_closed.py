"""Helpers of the half-closed connection test programs (ckpt_halfclose.py, share_halfclose.py)."""

import select
import socket


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair over 127.0.0.1: (the connecting end, the accepted end)."""
    with socket.socket() as lst:
        lst.bind(("127.0.0.1", 0))
        lst.listen(1)
        a = socket.create_connection(lst.getsockname())
        b, _ = lst.accept()
    return a, b


def finished(sk: socket.socket) -> bool:
    """Whether SK's peer finished sending (POLLRDHUP), without reading."""
    p = select.poll()
    p.register(sk, select.POLLIN | select.POLLRDHUP)
    return any(ev & select.POLLRDHUP for _, ev in p.poll(0))
