"""Helpers for the coordinator tests: a coordinator process on a free port, `crac command`, and a
fake worker (a socket speaking docs/PROTOCOL.md) for the protocol-level tests.

Every wait has a timeout; nothing asserts on timing beyond "within a generous bound".
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import crac_cmd

TIMEOUT = 30.0
CMD_TIMEOUT = 60.0
_COORD_ENV = (
    "CRAC_COORD_",
    "DMTCP_COORD_",
    "DMTCP_HOST",
    "DMTCP_PORT",
    "CRAC_CHECKPOINT",
    "DMTCP_CHECKPOINT",
    "CRAC_SIGCKPT",
    "DMTCP_SIGCKPT",
)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test runner's environment without coordinator or checkpoint settings, plus EXTRA."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_COORD_ENV)}
    env.update(extra or {})
    return env


def free_port() -> int:
    """A TCP port free now, below the kernel's ephemeral range: a port the kernel picked (bind
    to 0) is one it hands out again for any outgoing connection, and with suites running beside
    each other one was taken between the pick and the coordinator's bind (an MPI test failed on
    "port ... is already in use"). Ports below that range only go to who binds them by number."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port below the ephemeral range")


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, 10001)


class Coordinator:
    """`crac coordinator -p 0 --port-file F ARGS` in the foreground (killed at cleanup)."""

    def __init__(
        self,
        work: Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        port: int = 0,
        label: str = "coord",
    ):
        work.mkdir(parents=True, exist_ok=True)
        self.port_file = work / f"{label}.port"
        self.log_path = work / f"{label}.log"
        self.port_file.unlink(missing_ok=True)
        argv = [
            *crac_cmd(),
            "coordinator",
            "-p",
            str(port),
            "--port-file",
            str(self.port_file),
            *args,
        ]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=clean_env(env),
            cwd=work,
        )
        deadline = time.monotonic() + TIMEOUT
        while not (self.port_file.exists() and self.port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the coordinator did not start:\n{self.log_text()}")
            time.sleep(0.01)
        self.port = int(self.port_file.read_text())

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_exit(self, timeout: float = TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the coordinator did not exit in {timeout:.0f} s:\n{self.log_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=TIMEOUT)
        if not self.log.closed:
            self.log.close()

    def request(self, verb: str, value: int | None = None, token: str = "") -> dict[str, Any]:
        return request(self.port, verb, value, token)

    def wait_peers(self, n: int, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            st = self.request("status")
            if st["num_peers"] == n:
                return st
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{st['num_peers']} peers, not {n}, after {timeout:.0f} s:\n{self.log_text()}"
                )
            time.sleep(0.02)


def request(port: int, verb: str, value: int | None = None, token: str = "") -> dict[str, Any]:
    """A command sent directly over the socket (fast; for polling)."""
    msg: dict[str, Any] = {"type": "command", "verb": verb, "token": token}
    if value is not None:
        msg["value"] = value
    return request_msg(port, msg)


def request_msg(port: int, msg: dict[str, Any]) -> dict[str, Any]:
    """MSG sent on a connection of its own; the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(json.dumps(msg).encode() + b"\n")
        return json.loads(_read_line(s, TIMEOUT))


def _read_line(s: socket.socket, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no line")
        s.settimeout(left)
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def command(
    port: int | None,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = CMD_TIMEOUT,
) -> subprocess.CompletedProcess:
    """`crac command [-p PORT] ARGS` run to its end; text output."""
    port_args = [] if port is None else ["-p", str(port)]
    return subprocess.run(
        [*crac_cmd(), "command", *port_args, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=clean_env(env),
        timeout=timeout,
    )


def command_bg(port: int, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [*crac_cmd(), "command", "-p", str(port), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(env),
    )


def finish(p: subprocess.Popen, timeout: float = CMD_TIMEOUT) -> tuple[int, str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"{p.args!r} did not end in {timeout:.0f} s\n{out}\n{err}")
    return p.returncode, out, err


def status_lines(cp: subprocess.CompletedProcess) -> dict[str, str]:
    """KEY=VALUE lines of `crac command s`, after checking the first three are exactly the
    lines DMTCP scripts parse."""
    lines = cp.stdout.splitlines()
    assert cp.returncode == 0, describe_text(cp)
    assert len(lines) >= 3, describe_text(cp)
    assert lines[0].startswith("NUM_PEERS=") and lines[0][10:].isdigit(), describe_text(cp)
    assert lines[1] in ("RUNNING=yes", "RUNNING=no"), describe_text(cp)
    assert lines[2].startswith("CKPT_INTERVAL=") and lines[2][14:].isdigit(), describe_text(cp)
    return dict(line.split("=", 1) for line in lines if "=" in line)


def describe_text(cp: subprocess.CompletedProcess) -> str:
    return (
        f"command: {cp.args!r}\nreturncode: {cp.returncode}\n--- stdout ---\n{cp.stdout}\n"
        f"--- stderr ---\n{cp.stderr}"
    )


class FakeWorker:
    """A socket that speaks the worker side of docs/PROTOCOL.md."""

    def __init__(
        self,
        port: int,
        proc_dir: Path,
        *,
        pid: int,
        token: str = "",
        program: str = "fake",
        restarted: bool = False,
        extra: dict[str, Any] | None = None,
    ):
        self.pid = pid
        self.proc_dir = proc_dir
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = b""
        self.hello = {
            "type": "hello",
            "role": "worker",
            "token": token,
            "pid": pid,
            "vpid": pid,
            "program": program,
            "host": socket.gethostname(),
            "proc_dir": str(proc_dir),
            "restarted": restarted,
            **(extra or {}),
        }
        self.send(self.hello)
        self.welcome = self.recv()

    def send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"worker {self.pid}: nothing from the coordinator")
            ready, _, _ = select.select([self.sock], [], [], left)
            if ready:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError(f"worker {self.pid}: the coordinator closed")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def expect(self, kind: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        msg = self.recv(timeout)
        assert msg.get("type") == kind, f"worker {self.pid} expected {kind!r}, got {msg!r}"
        return msg

    def silent(self, seconds: float) -> bool:
        """True when nothing arrives for SECONDS (a barrier holds)."""
        try:
            msg = self.recv(seconds)
        except TimeoutError:
            return True
        pytest.fail(f"worker {self.pid} got {msg!r} while the barrier should hold")

    def gen_dir(self, gen: int) -> Path:
        return self.proc_dir / f"gen-{gen:06d}"

    def do_checkpoint(self, gen: int, *, exit_after: bool = False) -> None:
        """Answers a whole checkpoint (the checkpoint message already received or not)."""
        msg = self.expect("checkpoint")
        assert msg.get("exit_after") is exit_after, msg
        self.answer_rest(gen)

    def answer_rest(self, gen: int) -> None:
        self.send({"type": "suspended"})
        self.expect("write")
        self.send({"type": "written", "gen": gen})
        self.expect("resume")
        self.send({"type": "durable", "gen": gen})
        self.expect("publish")
        self.gen_dir(gen).mkdir(parents=True, exist_ok=True)
        self.send({"type": "published", "gen": gen, "dir": str(self.gen_dir(gen))})

    def close(self) -> None:
        self.sock.close()


def answer_to_publish(ws: Sequence[FakeWorker], gen: int) -> None:
    """After every worker said `suspended`: each answers `write` and `resume`, then gets
    `publish` and makes its generation directory (its `published` is the caller's)."""
    for w in ws:
        w.expect("write")
        w.send({"type": "written", "gen": gen})
    for w in ws:
        w.expect("resume")
        w.send({"type": "durable", "gen": gen})
    for w in ws:
        w.expect("publish")
        w.gen_dir(gen).mkdir(parents=True, exist_ok=True)


def answer_all(ws: Sequence[FakeWorker], gen: int) -> None:
    """Every worker answers the rest of a checkpoint (its `checkpoint` already received), phase
    by phase, as real workers do concurrently."""
    for w in ws:
        w.send({"type": "suspended"})
    answer_to_publish(ws, gen)
    for w in ws:
        w.send({"type": "published", "gen": gen, "dir": str(w.gen_dir(gen))})


def wait_until(pred, what: str, timeout: float = TIMEOUT, poll: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def run_script(script: Sequence[str] | str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(script, capture_output=True, text=True, timeout=CMD_TIMEOUT, **kw)
