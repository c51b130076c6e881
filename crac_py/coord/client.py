"""Talking to a coordinator from Python: `crac command`, and the coordinator options of
`crac launch` / `crac restart` (join one, start one, or run without one).

Exit statuses follow dmtcp_command: 2 when the coordinator cannot be reached or answers with an
error (CoordinatorNotFound, CoordError).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crac_py import config
from crac_py.coord.proto import MAX_LINE, ProtocolError, decode, encode

CONNECT_TIMEOUT = 5.0
REPLY_TIMEOUT = 30.0


class CoordError(Exception):
    """The coordinator cannot be used; the message says why (exit status 2)."""


class CoordinatorNotFound(CoordError):
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        super().__init__(
            f"coordinator not found at {host}:{port}; start one with `crac coordinator -p "
            f"{port}`, or give its host and port (-h/-p, CRAC_COORD_HOST/CRAC_COORD_PORT)"
        )


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    token: str = ""

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def read_token_file(path: str) -> str:
    """The token in PATH: its first line, without surrounding blanks."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(4096)
    except OSError as exc:
        raise config.ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    lines = raw.decode(errors="surrogateescape").strip().splitlines()
    if not lines or not lines[0].strip():
        raise config.ConfigError(f"the token file {path} is empty")
    return lines[0].strip()


def token_option(
    flag: str | None,
    file_flag: str | None,
    flag_name: str = "--coord-token",
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The token given by flag or file, for endpoint(): FLAG (with a warning: every user of the
    host sees it in ps), else the file FILE_FLAG names, else, when neither CRAC_COORD_TOKEN nor
    DMTCP_COORD_TOKEN is set, the file CRAC_COORD_TOKEN_FILE names. None: the environment's,
    if any (endpoint() reads it)."""
    if flag is not None:
        if file_flag is not None:
            raise config.ConfigError(f"give {flag_name} or its file, not both")
        print(
            f"crac: warning: {flag_name} shows the token to every user of this host (ps); "
            f"give it in CRAC_COORD_TOKEN or {flag_name}-file FILE instead",
            file=sys.stderr,
        )
        return flag
    if file_flag is not None:
        return read_token_file(file_flag)
    env = os.environ if environ is None else environ
    if not (env.get("CRAC_COORD_TOKEN") or env.get("DMTCP_COORD_TOKEN")):
        if env.get("CRAC_COORD_TOKEN_FILE"):
            return read_token_file(env["CRAC_COORD_TOKEN_FILE"])
    return None


def parse_port(value: str, where: str) -> int:
    try:
        port = int(value)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise config.ConfigError(f"invalid port {value!r} for {where}; use 0..65535")
    return port


def endpoint(
    host: str | None,
    port: str | int | None,
    token: str | None,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """Host, port and token resolved as everywhere: flag > CRAC_* > DMTCP_* > default."""
    h = config.resolve("coord_host", host, environ)
    p = config.resolve("coord_port", None if port is None else str(port), environ)
    t = config.resolve("coord_token", token, environ)
    where = "-p/--coord-port" if p.source == "flag" else p.source
    return Endpoint(h.value, parse_port(p.value, where), t.value)


def _recv_line(sock: socket.socket) -> bytes:
    buf = bytearray()
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_LINE + 1 and b"\n" not in buf:
            raise ProtocolError("reply longer than the protocol allows")
    return bytes(buf.split(b"\n", 1)[0])


def request(ep: Endpoint, msg: dict[str, Any], timeout: float | None = REPLY_TIMEOUT) -> dict:
    """One message, one reply. Raises CoordinatorNotFound when nothing answers at EP,
    CoordError when the connection breaks or the reply is garbage."""
    try:
        sock = socket.create_connection((ep.host, ep.port), timeout=CONNECT_TIMEOUT)
    except (OSError, OverflowError):
        raise CoordinatorNotFound(ep.host, ep.port) from None
    with sock:
        try:
            sock.settimeout(timeout)
            sock.sendall(encode(msg))
            line = _recv_line(sock)
        except TimeoutError:
            raise CoordError(f"the coordinator at {ep} did not answer in {timeout:g} s") from None
        except OSError as exc:
            raise CoordError(f"lost the coordinator at {ep}: {exc.strerror or exc}") from None
        except ProtocolError as exc:
            raise CoordError(f"bad reply from {ep}: {exc}") from None
    if not line:
        raise CoordError(f"the coordinator at {ep} closed the connection without answering")
    try:
        reply = decode(line)
    except ProtocolError as exc:
        raise CoordError(f"bad reply from {ep} (is it a crac coordinator?): {exc}") from None
    return reply


def command(
    ep: Endpoint, verb: str, value: int | None = None, timeout: float | None = REPLY_TIMEOUT
) -> dict:
    """A command's reply (`ok` true or false)."""
    msg: dict[str, Any] = {"type": "command", "verb": verb, "token": ep.token}
    if value is not None:
        msg["value"] = value
    reply = request(ep, msg, timeout)
    if "ok" not in reply:
        raise CoordError(f"bad reply from {ep} (is it a crac coordinator?): {reply}")
    return reply


def status(ep: Endpoint) -> dict:
    """The coordinator's status; raises CoordError (or CoordinatorNotFound) otherwise."""
    reply = command(ep, "status")
    if not reply.get("ok"):
        raise CoordError(f"the coordinator at {ep} refused: {reply.get('error')}")
    return reply


def answers(ep: Endpoint) -> bool:
    """Whether a coordinator answers at EP (any reply, even a refusal, counts)."""
    try:
        command(ep, "status", timeout=CONNECT_TIMEOUT)
    except CoordError:
        return False
    return True


def is_local(host: str) -> bool:
    """Whether a coordinator for HOST may be started here (it listens on loopback)."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
