"""ckpt_dualstack.py STEPS [ss]: listeners as Redis and nginx make them, through checkpoints: an
IPv4 and an IPv6-only listener on one port (IPV6_V6ONLY), and two SO_REUSEPORT listeners sharing
another, each with its own backlog. Each step connects to each port from this process, and the
listener that takes the connection must echo what was sent; with `ss`, each step also reads the
listeners' backlogs with iproute2's `ss` and checks them. Prints `step K` and ends with
`DONE checksum=H steps=N`."""

from __future__ import annotations

import select
import socket
import subprocess
import sys
import time

from step_sum import FNV_BASIS, fnv_step


def listener(
    family: int, host: str, port: int, backlog: int, *, v6only=False, reuseport=False
) -> socket.socket:
    sk = socket.socket(family, socket.SOCK_STREAM)
    if reuseport:
        sk.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    if v6only:
        sk.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    sk.bind((host, port))
    sk.listen(backlog)
    return sk


def check_backlogs(k: int, want: dict[str, list[int]]) -> bool:
    """`ss -ltnH`'s Send-Q (a listener's backlog) of the listeners on each address:port in WANT."""
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    seen = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 4:
            seen.setdefault(words[3], []).append(int(words[2]))
    for local, backlogs in want.items():
        if sorted(seen.get(local, [])) != backlogs:
            print(f"FAIL: step {k}: {local} listens with {seen.get(local)}, not {backlogs}")
            print(f"ss -ltnH said:\n{out}", file=sys.stderr)
            return False
    return True


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    with_ss = sys.argv[2:3] == ["ss"]
    # IPv4 on a free port, then IPv6-only on the same one: IPV6_V6ONLY lets both bind.
    v4 = listener(socket.AF_INET, "0.0.0.0", 0, 37)
    port = v4.getsockname()[1]
    v6 = listener(socket.AF_INET6, "::", port, 41, v6only=True)
    r1 = listener(socket.AF_INET, "127.0.0.1", 0, 23, reuseport=True)
    rport = r1.getsockname()[1]
    r2 = listener(socket.AF_INET, "127.0.0.1", rport, 29, reuseport=True)
    backlogs = {f"0.0.0.0:{port}": [37], f"[::]:{port}": [41], f"127.0.0.1:{rport}": [23, 29]}
    targets = [
        (socket.AF_INET, ("127.0.0.1", port), [v4]),
        (socket.AF_INET6, ("::1", port), [v6]),
        (socket.AF_INET, ("127.0.0.1", rport), [r1, r2]),
    ]
    h = FNV_BASIS
    for k in range(1, steps + 1):
        for family, addr, takers in targets:
            with socket.socket(family, socket.SOCK_STREAM) as c:
                c.settimeout(10)
                c.connect(addr)
                ready, _, _ = select.select(takers, [], [], 10)
                if not ready:
                    print(f"FAIL: step {k}: nobody accepted on {addr}", file=sys.stderr)
                    return 1
                conn, _ = ready[0].accept()
                with conn:
                    message = f"{k} {addr[0]}".encode()
                    c.sendall(message)
                    conn.settimeout(10)
                    got = conn.recv(64)
                    if got != message:
                        print(f"FAIL: step {k}: {addr} got {got!r}", file=sys.stderr)
                        return 1
        if with_ss and not check_backlogs(k, backlogs):
            return 1
        h = fnv_step(h, k)
        print(f"step {k}", flush=True)
        time.sleep(0.04)
    print(f"DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
