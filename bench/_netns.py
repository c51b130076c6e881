"""Hosts made of network namespaces on this machine (docs/HOSTS.md), for bench/hosts.py and the
multi-host tests: each namespace has its own address on one bridge, which lives in a hub
namespace of its own, so the machine's own network is never touched; names carry the creating
process's pid, so two runs side by side do not meet."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Sequence

NET = "10.77.0"


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


class NetnsUnavailable(Exception):
    """Network namespaces cannot be made here; the message says why."""


def check_netns() -> None:
    """NetnsUnavailable unless namespaces can be made and removed here."""
    if shutil.which("ip") is None:
        raise NetnsUnavailable("iproute2's `ip` is not installed (apt install iproute2)")
    if os.geteuid() != 0:
        raise NetnsUnavailable("network namespaces (the hosts) need root")
    probe = f"cracprobe{os.getpid()}"
    cp = _ip("netns", "add", probe)
    if cp.returncode != 0:
        raise NetnsUnavailable(f"cannot make a network namespace here: {cp.stderr.strip()}")
    _ip("netns", "del", probe)


class Hosts:
    """Namespaces NAME-h1..hN at 10.77.0.1..N/24, and the hub holding their bridge."""

    def __init__(self, n: int):
        check_netns()
        self.prefix = f"crac{os.getpid()}{secrets.token_hex(2)}"
        self.hub = f"{self.prefix}hub"
        self.names = [f"{self.prefix}h{i}" for i in range(1, n + 1)]
        self._made: list[str] = []
        try:
            self._add(self.hub)
            self._run(["-n", self.hub, "link", "add", "br0", "type", "bridge"])
            self._run(["-n", self.hub, "link", "set", "br0", "up"])
            for i, ns in enumerate(self.names, 1):
                self._add(ns)
                self._run(
                    ["-n", ns, "link", "add", "eth0", "type", "veth"]
                    + ["peer", "name", f"p{i}", "netns", self.hub]
                )
                self._run(["-n", self.hub, "link", "set", f"p{i}", "master", "br0", "up"])
                self._run(["-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0"])
                self._run(["-n", ns, "link", "set", "eth0", "up"])
                self._run(["-n", ns, "link", "set", "lo", "up"])
        except BaseException:
            self.remove()
            raise

    def _add(self, ns: str) -> None:
        self._run(["netns", "add", ns])
        self._made.append(ns)

    @staticmethod
    def _run(args: Sequence[str]) -> None:
        cp = _ip(*args)
        if cp.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {cp.stderr.strip()}")

    @staticmethod
    def addr(i: int) -> str:
        """Host i's address (1-based)."""
        return f"{NET}.{i}"

    def argv(self, i: int, argv: Sequence[str | os.PathLike]) -> list[str]:
        """ARGV run on host i (`ip netns exec` execs it: its pid is the program's)."""
        return ["ip", "netns", "exec", self.names[i - 1], *map(str, argv)]

    def link(self, i: int, up: bool) -> None:
        """Host i's cable plugged in or pulled out."""
        self._run(["-n", self.names[i - 1], "link", "set", "eth0", "up" if up else "down"])

    def remove(self) -> None:
        for ns in reversed(self._made):
            _ip("netns", "del", ns)
        self._made.clear()
