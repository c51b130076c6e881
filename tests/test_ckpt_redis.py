"""Redis (Debian's redis-server, a program nobody on the team wrote) under crac, twice through
checkpoint -> SIGKILL -> restart: an epoll server with a TCP listener, jemalloc, background
threads, its data in memory only (no RDB file, no AOF). Clients outside the job talk RESP to it
over loopback. After each restart the server answers on the same port with its data as the
checkpoint had it (what the killed run was given after the checkpoint is not there), a
connection a client had open at the checkpoint is one the server has let go (not a client it
keeps for ever), and the job goes on: at the end `SHUTDOWN NOSAVE` ends it with status 0."""

from __future__ import annotations

import random
import shutil
import socket
import time
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, CracProc, base_env, checkpoint, kill9, tree
from conftest import crac_cmd, require_native
from coord_harness import free_port

CONNECT_S = 60.0  # a loaded machine may take this long to bring the server up


class Client:
    """One RESP connection (the protocol's five reply kinds, as redis-cli reads them)."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.file = self.sock.makefile("rb")

    def send(self, *args: str | bytes | int) -> None:
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            data = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(out))

    def reply(self) -> object:
        line = self.file.readline()
        if not line:
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise ValueError(f"not a RESP reply: {line!r}")

    def call(self, *args: str | bytes | int) -> object:
        self.send(*args)
        return self.reply()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def connect(port: int, proc: CracProc) -> Client:
    """A client once the server answers PING (the launch or restart still running)."""
    deadline = time.monotonic() + CONNECT_S
    while True:
        try:
            c = Client(port)
            if c.call("PING") == "PONG":
                return c
            c.close()
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"redis-server does not answer on port {port}\n{proc.report()}")
        time.sleep(0.1)


def fill(c: Client, rng: random.Random, cycle: int, state: dict[bytes, bytes]) -> None:
    """Strings (one of 1 MiB of random bytes), a counter, a list and a hash, pipelined; STATE
    gets every string key's value as the server now holds it."""
    for i in range(2000):
        key, value = f"c{cycle}:k{i}".encode(), rng.randbytes(rng.randrange(1, 200))
        c.send("SET", key, value)
        state[key] = value
    big = f"c{cycle}:big".encode()
    state[big] = rng.randbytes(1 << 20)
    c.send("SET", big, state[big])
    for _ in range(2001):
        assert c.reply() == "OK"
    for _ in range(50):
        c.call("INCR", "counter")
    assert c.call("RPUSH", "list", *[f"{cycle}.{i}" for i in range(100)]) == 100 * cycle
    assert c.call("HSET", "hash", f"cycle{cycle}", cycle) == 1
    assert c.call("SET", "lasting", cycle, "EX", 3600) == "OK"


def check(c: Client, cycle: int, state: dict[bytes, bytes]) -> None:
    """The server holds what CYCLE fills gave it and nothing else."""
    assert c.call("DBSIZE") == len(state) + 4  # + counter, list, hash, lasting
    for key, value in state.items():
        c.send("GET", key)
    for key, value in state.items():
        assert c.reply() == value, f"{key!r} differs"
    assert c.call("GET", "counter") == str(50 * cycle).encode()
    assert c.call("LLEN", "list") == 100 * cycle
    assert c.call("LRANGE", "list", -1, -1) == [f"{cycle}.99".encode()]
    assert c.call("HGETALL", "hash") == [
        x for k in range(1, cycle + 1) for x in (f"cycle{k}".encode(), str(k).encode())
    ]
    assert 0 < int(c.call("TTL", "lasting")) <= 3600


def test_redis_server_keeps_its_data_through_two_restarts(tmp_path: Path):
    require_native()
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (Debian: redis-server)")
    port, ckptdir, logs = free_port(), tmp_path / "ckpt", tmp_path / "logs"
    argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(tmp_path)]
    rng = random.Random(19)
    state: dict[bytes, bytes] = {}
    proc = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", *argv],
        out_dir=logs,
        label="launch",
        env=base_env(),
        cwd=tmp_path,
    )
    procs = [proc]
    try:
        for cycle in (1, 2):
            c = connect(port, proc)
            fill(c, rng, cycle, state)
            held = Client(port)
            assert held.call("CLIENT", "SETNAME", "held") == "OK"
            checkpoint(proc, ckptdir)
            # What the killed run is given after the checkpoint is not in the image.
            assert c.call("SET", "after-checkpoint", cycle) == "OK"
            assert c.call("DEL", f"c{cycle}:k0") == 1
            kill9(proc)
            c.close()
            held.close()
            proc = CracProc(
                [*crac_cmd(), "restart", str(ckptdir)],
                out_dir=logs,
                label=f"restart{cycle}",
                env=base_env(),
                cwd=tmp_path,
            )
            procs.append(proc)
            c = connect(port, proc)
            check(c, cycle, state)
            # The held connection's end was dropped at the restart: the server let it go.
            deadline = time.monotonic() + CONNECT_S
            while b"name=held" in c.call("CLIENT", "LIST"):
                assert time.monotonic() < deadline, "the server still lists the held client"
                time.sleep(0.1)
            c.close()
        c = connect(port, proc)
        c.send("SHUTDOWN", "NOSAVE")
        with pytest.raises(ConnectionError):
            c.reply()
        assert proc.wait(timeout=RUN_TIMEOUT) == 0, proc.report()
    except BaseException:
        print(*(p.report() for p in procs), tree(ckptdir), sep="\n")
        raise
    finally:
        for p in procs:
            p.stop()
