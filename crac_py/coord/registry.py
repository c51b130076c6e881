"""This user's coordinators on this host, so that `crac command` finds one it was not told of.

A job launched without a coordinator gets one on a free port with a random token at its first
fork (loader/ckpt/tree_coord.c), and `crac launch --new-coordinator -p 0` likewise: nothing the
user typed names them. Each coordinator writes `coord-<port>.json` (host, port, pid, its start
time, token) into a directory only its user can open, and removes it when it stops; `crac command`
given no host or port, with nobody at the default port, takes the one live coordinator listed
there (docs/CLI.md "crac command").
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    host: str
    port: int
    pid: int
    token: str
    path: Path
    start: int | None = None  # the process's start time (clock ticks since boot); older: None


def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (after the command, which may hold spaces and parentheses)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return int(text[text.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def directory() -> Path:
    """$XDG_RUNTIME_DIR/crac when that is set, else /tmp/crac-<uid>."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "crac"
    return Path("/tmp") / f"crac-{os.getuid()}"


def _private_dir(create: bool) -> Path | None:
    """The directory, made 0700 when CREATE; None when it is missing, or not this user's alone
    (a directory another user planted in /tmp is never trusted, nor written into)."""
    path = directory()
    if create:
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700, parents=False)
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return path


def connect_host(bound: str) -> str:
    """Where a client on this host reaches a coordinator bound to BOUND."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(bound, bound)


def entry_path(port: int) -> Path | None:
    """Where the coordinator at PORT lists itself (coord/run.py writes it, atomically, with
    entry_text); None when the directory cannot be used: the coordinator serves anyway,
    unlisted."""
    try:
        d = _private_dir(create=True)
    except OSError:
        return None
    return None if d is None else d / f"coord-{port}.json"


def entry_text(host: str, port: int, token: str | None) -> str:
    """This process's entry as the coordinator bound to HOST:PORT."""
    pid = os.getpid()
    entry = {"host": connect_host(host), "port": port, "pid": pid, "token": token or ""}
    start = _start_time(pid)
    if start is not None:
        entry["start"] = start
    return json.dumps(entry)


def unregister(path: Path | None) -> None:
    """Removes PATH if it still lists this process (another coordinator may have the port now)."""
    if path is None:
        return
    entry = _read(path)
    if entry is not None and entry.pid == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def _read(path: Path) -> Entry | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as fh:
            raw = json.loads(fh.read(4096))
        start = raw.get("start")
        return Entry(
            str(raw["host"]),
            int(raw["port"]),
            int(raw["pid"]),
            str(raw["token"]),
            path,
            None if start is None else int(start),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _alive(entry: Entry) -> bool:
    """Its process runs: the pid, and the start time where the entry has one (a coordinator
    killed with SIGKILL leaves its entry, and pids come round again: 32768 of them, by default)."""
    try:
        os.kill(entry.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return entry.start is None or _start_time(entry.pid) in (entry.start, None)


def live() -> list[Entry]:
    """The listed coordinators whose process is alive, by port; a dead one's entry is removed
    (a coordinator killed with SIGKILL could not)."""
    d = _private_dir(create=False)
    if d is None:
        return []
    found = []
    for path in sorted(d.glob("coord-*.json")):
        entry = _read(path)
        if entry is not None and _alive(entry):
            found.append(entry)
        elif entry is not None:
            with contextlib.suppress(OSError):
                path.unlink()
    return sorted(found, key=lambda e: e.port)
