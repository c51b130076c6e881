"""ckpt_losses.py — a program holding what crac cannot save: two packet sockets (AF_PACKET; a
VSOCK socket where raw sockets are not allowed). Prints `step N` lines, then DONE; exits 3 at once,
saying so, when it can make neither. Usage: python ckpt_losses.py STEPS"""

import socket
import sys
import time


def unsaved_socket() -> socket.socket:
    for family, kind in (
        (socket.AF_PACKET, socket.SOCK_RAW),
        (socket.AF_VSOCK, socket.SOCK_STREAM),
    ):
        try:
            return socket.socket(family, kind, 0)
        except OSError:
            continue
    print("NO-SOCKET: neither a packet nor a VSOCK socket can be made here", flush=True)
    sys.exit(3)


a, b = unsaved_socket(), unsaved_socket()
try:
    for step in range(1, int(sys.argv[1]) + 1):
        print(f"step {step}", flush=True)
        time.sleep(0.01)
finally:
    a.close()
    b.close()
print("DONE", flush=True)
