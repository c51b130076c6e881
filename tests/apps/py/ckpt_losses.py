"""ckpt_losses.py — a program holding what crac cannot save yet: two netlink sockets (a child
process, once such a thing, is a process of the job now). Prints `step N` lines, then DONE.
Usage: python ckpt_losses.py STEPS"""

import socket
import sys
import time

a, b = (socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) for _ in "ab")
try:
    for step in range(1, int(sys.argv[1]) + 1):
        print(f"step {step}", flush=True)
        time.sleep(0.01)
finally:
    a.close()
    b.close()
print("DONE", flush=True)
