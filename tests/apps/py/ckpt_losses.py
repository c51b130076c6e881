"""ckpt_losses.py — a program holding what crac cannot save yet: a child process and two netlink
sockets. Prints `step N` lines, then DONE. Usage: python ckpt_losses.py STEPS"""

import socket
import subprocess
import sys
import time

child = subprocess.Popen(["sleep", "600"])
a, b = (socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) for _ in "ab")
try:
    for step in range(1, int(sys.argv[1]) + 1):
        print(f"step {step}", flush=True)
        time.sleep(0.01)
finally:
    child.kill()
print("DONE", flush=True)
