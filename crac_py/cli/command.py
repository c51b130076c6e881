"""`crac command [-h H] [-p P] [--json] VERB [N]`: dmtcp_command's verbs and output.

Arguments are parsed here rather than by typer because dmtcp_command's spellings look like
options (`-s`, `-bc`, `--bcheckpoint`, `-i 60`, `-i60`, `-p7779`) and `-h` is the host.
Exit status: 0 success, 2 coordinator not found or an error from it, 1 usage.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from crac_py import config
from crac_py.coord import client as coord_client
from crac_py.coord import registry
from crac_py.coord.client import CoordError, CoordinatorNotFound, Endpoint
from crac_py.coord.proto import LONG_REPLY_VERBS, OLD_VERBS, normalize_verb

EXIT_OK, EXIT_USAGE, EXIT_ERROR = 0, 1, 2

USAGE = """\
usage: crac command [-h HOST] [-p PORT] [--token-file F] [--exact] [--json] VERB [N]

Sends VERB to the job's coordinator (host and port: -h/-p, else CRAC_COORD_HOST/PORT,
DMTCP_COORD_HOST/PORT, else localhost:7779, else the one coordinator of this user's running on
this host, such as the one a job started for itself; --exact: only the host, port and token
given, as a script that then joins with those same values needs). Leading dashes are optional,
as in dmtcp_command:

  s,  status        NUM_PEERS=n, RUNNING=yes|no, CKPT_INTERVAL=n (then COORD_HOST=, COORD_PORT=,
                    GENERATION=)
  l,  list          the processes of the job
  c,  checkpoint    start a checkpoint of the job and return
  bc, bcheckpoint   checkpoint; return when every image and the restart script are written
  kc, kcheckpoint   checkpoint, then every process exits
  i N, interval N   checkpoint every N seconds (0: only on request)
  k,  kill          kill every process of the job
  q,  quit          kill every process and the coordinator

Exit status: 0 success, 2 coordinator not found or it answered with an error, 1 usage.
"""


class UsageError(Exception):
    pass


@dataclass
class Request:
    verb: str
    value: int | None
    host: str | None
    port: str | None
    token: str | None
    as_json: bool
    token_file: str | None = None
    exact: bool = False


def _take(args: list[str], i: int, flag: str) -> str:
    if i + 1 >= len(args):
        raise UsageError(f"{flag} needs a value")
    return args[i + 1]


def parse(args: list[str]) -> Request:
    host = port = token = token_file = None
    as_json = exact = False
    verb: str | None = None
    value: int | None = None
    i = 0
    while i < len(args):
        a = args[i]
        key, eq, inline = a.partition("=")
        if a in ("-h", "--host", "--coord-host"):
            host = _take(args, i, a)
            i += 1
        elif eq and key in ("--host", "--coord-host"):
            host = inline
        elif a in ("-p", "--port", "--coord-port"):
            port = _take(args, i, a)
            i += 1
        elif eq and key in ("--port", "--coord-port"):
            port = inline
        elif re.fullmatch(r"-p\d+", a):
            port = a[2:]
        elif a in ("--token", "--coord-token"):
            token = _take(args, i, a)
            i += 1
        elif eq and key in ("--token", "--coord-token"):
            token = inline
        elif a in ("--token-file", "--coord-token-file"):
            token_file = _take(args, i, a)
            i += 1
        elif eq and key in ("--token-file", "--coord-token-file"):
            token_file = inline
        elif a == "--json":
            as_json = True
        elif a == "--exact":
            exact = True
        elif verb is None:
            if m := re.fullmatch(r"-{0,2}i(?:nterval)?=?(\d+)", a):
                verb, value = "interval", int(m.group(1))
            else:
                verb = normalize_verb(a)
                if verb is None:
                    old = OLD_VERBS.get(a.lstrip("-"))
                    hint = f" (use {old})" if old else ""
                    raise UsageError(f"unknown command {a!r}{hint}")
        elif verb in ("interval", "expect") and value is None:
            if not a.isdigit():
                raise UsageError(f"{verb} needs a number of seconds, not {a!r}")
            value = int(a)
        else:
            raise UsageError(f"unexpected argument {a!r}")
        i += 1
    if verb is None:
        raise UsageError("no command given")
    if verb in ("interval", "expect") and value is None:
        raise UsageError(f"{verb} needs a number")
    return Request(verb, value, host, port, token, as_json, token_file, exact)


def _status_lines(reply: dict[str, Any], ep: Endpoint) -> list[str]:
    return [
        f"NUM_PEERS={reply.get('num_peers')}",
        f"RUNNING={reply.get('running')}",
        f"CKPT_INTERVAL={reply.get('ckpt_interval')}",
        f"COORD_HOST={ep.host}",
        f"COORD_PORT={ep.port}",
        f"GENERATION={reply.get('generation')}",
    ]


def _list_lines(reply: dict[str, Any]) -> list[str]:
    lines = ["Client List:", "#, PROG[virtPID:realPID]@HOST, ID, STATE, LAST_GEN"]
    for n, p in enumerate(reply.get("peers") or [], 1):
        gen = "" if p.get("last_gen") is None else str(p["last_gen"])
        lines.append(
            f"{n}, {p.get('program')}[{p.get('vpid')}:{p.get('pid')}]@{p.get('host')}, "
            f"{p.get('id')}, {p.get('state')}, {gen}"
        )
    return lines


def _lines(verb: str, reply: dict[str, Any], ep: Endpoint) -> list[str]:
    if verb == "status":
        return _status_lines(reply, ep)
    if verb == "list":
        return _list_lines(reply)
    if verb in LONG_REPLY_VERBS:
        return [f"GENERATION={reply.get('generation')}", f"RESTART_SCRIPT={reply.get('script')}"]
    if verb == "interval":
        return [f"CKPT_INTERVAL={reply.get('ckpt_interval')}"]
    if verb in ("kill", "quit"):
        return [f"KILLED={reply.get('killed')}"]
    return []


def _watch(ep: Endpoint, bar: Any, done: threading.Event) -> None:
    """While a blocking checkpoint runs: the processes' phases, on the progress line."""
    while not done.wait(0.25):
        if not bar.shown:
            continue
        try:
            peers = coord_client.command(ep, "list", timeout=2.0).get("peers") or []
        except CoordError:
            continue
        counts = Counter(str(p.get("state")) for p in peers)
        states = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        bar.describe(f"checkpoint of {len(peers)} process(es): {states}")


def _send(req: Request, ep: Endpoint) -> dict[str, Any]:
    if req.verb not in LONG_REPLY_VERBS:
        return coord_client.command(ep, req.verb, req.value)
    from crac_py.cli import progress  # rich: imported only for the verbs that may wait

    bar = progress.DelayedProgress("checkpoint of the job")
    done = threading.Event()
    with bar:
        watcher = None
        if bar.enabled:
            watcher = threading.Thread(target=_watch, args=(ep, bar, done), daemon=True)
            watcher.start()
        try:
            return coord_client.command(ep, req.verb, req.value, timeout=None)
        finally:
            done.set()
            if watcher is not None:
                watcher.join(timeout=3)


# Unlike dmtcp_launch, `crac launch` without coordinator options starts none (docs/CLI.md), so a
# DMTCP user's `crac command -c` finds nothing to ask: say how such a process is checkpointed.
LONE_PROCESS_HINT = (
    "; a program launched without coordinator options has none: checkpoint it with its signal "
    "(`kill -USR2 PID`, or the one CRAC_SIGCKPT names), or launch it with --new-coordinator"
)


def _this_users_coordinator(req: Request, ep: Endpoint) -> Endpoint:
    """EP, or the coordinator of this user's that the registry lists (crac_py/coord/registry.py)
    when no host or port was given and none answers at the default one; its token when none was
    given. CoordError when several are listed: the user must choose. With --exact, EP as given."""
    if req.exact:
        return ep
    unnamed = (
        config.resolve("coord_host", req.host).source == "default"
        and config.resolve("coord_port", req.port).source == "default"
    )
    listed = registry.live()
    if unnamed and listed and not coord_client.answers(ep):
        if len(listed) > 1:
            which = ", ".join(f"{e.host}:{e.port} (pid {e.pid})" for e in listed)
            raise CoordError(
                f"coordinator not found at {ep}; this user's coordinators on this host: {which}; "
                "give one with -p PORT"
            )
        ep = Endpoint(listed[0].host, listed[0].port, ep.token)
    if not ep.token and coord_client.is_local(ep.host):
        for e in listed:
            if e.port == ep.port and e.token:
                return Endpoint(ep.host, ep.port, e.token)
    return ep


def run(args: list[str]) -> int:
    if "--help" in args:
        print(USAGE, end="")
        return EXIT_OK
    try:
        req = parse(args)
    except UsageError as exc:
        print(f"crac: error: {exc}; see `crac command --help`", file=sys.stderr)
        return EXIT_USAGE
    try:
        token = coord_client.token_option(req.token, req.token_file, "--token")
        ep: Endpoint | None = coord_client.endpoint(req.host, req.port, token)
    except config.ConfigError as exc:
        print(f"crac: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    assert ep is not None
    try:
        ep = _this_users_coordinator(req, ep)
        reply = _send(req, ep)
    except CoordinatorNotFound as exc:
        reply = {"ok": False, "error": f"{exc}{LONE_PROCESS_HINT}"}
    except CoordError as exc:
        reply = {"ok": False, "error": str(exc)}
    if req.as_json:
        print(json.dumps(reply, indent=2))
    elif reply.get("ok"):
        for line in _lines(req.verb, reply, ep):
            print(line)
    if not reply.get("ok"):
        if not req.as_json:
            print(f"crac: error: {reply.get('error')}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
