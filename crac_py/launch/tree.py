"""Restarting a process tree (docs/DECISIONS.md "Process trees"): `crac restart` of a tree's root
forks one process per descendant, in tree order, before any of them execs the loader, so each
restarted process is the kernel's child of its restarted parent. Each process then restarts its
own image; the loader learns the new pids of its children (`--child-pid VPID:PID`) and its
parent's pid as the program knew it (`--parent-pid VPID`), and translates them
(loader/confine/confine_trap.c)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import termios
from dataclasses import dataclass, field
from pathlib import Path

from crac_py.coord.client import Endpoint
from crac_py.image.generation import ImageError, resolve_generation
from crac_py.launch import share, xconn


class TreeError(Exception):
    pass


@dataclass(frozen=True)
class Member:
    gen: Path
    vpid: int
    vppid: int
    zombies: list[tuple[int, int]] = field(default_factory=list)  # (vpid, wait status)
    # process group and session as the program knew them: 0 where their leader was outside its
    # pid namespace (getsid answers 0: a container's CI job), None where not recorded
    pgid: int | None = None
    sid: int | None = None
    # made by a fork in the job (not by crac launch): its restart says so to the loader
    forked: bool = False
    # a session leader's controlling terminal: which of its fds 0-2 it was and its foreground
    # group as the program knew it (None: none of those fds)
    ctty: tuple[int, int] | None = None


def member(gen: str | Path) -> Member:
    """A generation's process and parent ids as the program knew them (its MANIFEST.json)."""
    try:
        path = resolve_generation(str(gen))
        from crac_py.image import trust

        trust.check(path)  # before a byte of it is read: a FIFO there would hang (docs/TRUST.md)
    except ImageError as exc:
        raise TreeError(str(exc)) from exc
    try:
        proc = json.loads((path / "MANIFEST.json").read_text())["process"]
        vpid, vppid = int(proc["vpid"]), int(proc["vppid"])
        zombies = [(int(z["vpid"]), int(z["status"])) for z in proc.get("zombies") or []]
        pgid, sid = (None if proc.get(k) is None else int(proc[k]) for k in ("pgid", "sid"))
        forked = proc.get("forked") is True
        ctty = _ctty(proc.get("ctty"))
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise TreeError(f"{path}: no process ids in MANIFEST.json ({type(exc).__name__})") from exc
    return Member(path, vpid, vppid, zombies, pgid, sid, forked, ctty)


def _ctty(saved: object) -> tuple[int, int] | None:
    """The manifest's process.ctty as (fd, foreground group), None when absent or malformed."""
    if not isinstance(saved, dict):
        return None
    fd, foreground = saved.get("fd"), saved.get("foreground")
    if type(fd) is not int or not 0 <= fd <= 2 or type(foreground) is not int:
        return None
    return fd, foreground


def _end_as(status: int) -> None:
    """In a recreated child that had ended but was not waited for: end the same way."""
    sig = status & 0x7F
    if sig:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    os._exit((status >> 8) & 0xFF)


def roots_and_members(gens: list[Path]) -> list[tuple[Path, list[Path], bool]]:
    """For the restart script: each root of the job (a process whose parent is not in it) with
    the descendants it restarts itself, and whether a fork in the job made it (its parent in the
    job ended: a daemon's double fork, which its launch did not wait for). Generations whose ids
    cannot be read are roots, not forked."""
    members: dict[Path, Member] = {}
    for g in gens:
        try:
            members[g] = member(g)
        except TreeError:
            pass
    by_vpid = {m.vpid: g for g, m in members.items()}

    def root_of(g: Path) -> Path:
        seen = {g}
        while g in members and members[g].vppid in by_vpid:
            g = by_vpid[members[g].vppid]
            if g in seen:  # a cycle cannot be a tree: stop at it
                break
            seen.add(g)
        return g

    out: dict[Path, list[Path]] = {}
    for g in gens:
        r = root_of(g)
        out.setdefault(r, [])
        if r != g:
            out[r].append(g)
    return [(r, out[r], r in members and members[r].forked) for r in gens if r in out]


def _shared_objects(members: list[Member]) -> dict[Path, list[tuple[str, str, int]]]:
    """The pipes and connections between processes of the tree, made once before the fork
    (crac_py/launch/share.py)."""
    if len(members) < 2:
        return {}
    try:
        return share.plan([(m.gen, m.vpid) for m in members])
    except (share.ShareError, ImageError, OSError) as exc:
        raise TreeError(str(exc)) from exc


def fork_tree(
    root: str, others: list[str], coordinator: Endpoint | None = None
) -> tuple[str, list[str]]:
    """Forks the processes of the tree rooted at ROOT (OTHERS: its descendants' generations).
    Returns, in each process, the generation it restarts and the loader options saying who its
    children and its parent are, and which group and session ids it knew. With the COORDINATOR
    the restarted job joins, connections to processes of other trees are made again first
    (crac_py/launch/xconn.py)."""
    me = member(root)
    rest = [member(g) for g in others]
    shared = _shared_objects([me, *rest])
    # share.plan's items are (option, value, descriptor); xconn's pairs (program fd, descriptor)
    made = {
        (g, int(value.split(":", 1)[0]))
        for g, items in shared.items()
        for opt, value, _ in items
        if opt == "--shared-fd"
    }
    try:
        others_made = xconn.reconnect([(m.gen, m.vpid) for m in (me, *rest)], made, coordinator)
    except (xconn.ConnError, ImageError, OSError) as exc:
        # The program runs on; those connections fail as dropped ones (the loader warns).
        print(f"crac: warning: {exc}", file=sys.stderr)
        others_made = {}
    for g, pairs in others_made.items():
        shared.setdefault(g, []).extend(("--shared-fd", f"{fd}:{h}", h) for fd, h in pairs)
    if rest or me.zombies:
        _hold_signals()
    groups = _Groups(me, rest)
    parent = 0
    while True:
        # Ended children first: their SIGCHLD is taken back before a restarted child can end.
        forked = _recreate_zombies(me)
        kids = [m for m in rest if m.vppid == me.vpid and m.gen != me.gen]
        for kid in kids:
            pid = os.fork()
            if pid == 0:  # the child restarts KID and, in turn, its children
                parent, me = me.vpid, kid
                _own_session(me)
                _own_terminal(me, shared.get(me.gen, []))
                break
            forked += ["--child-pid", f"{kid.vpid}:{pid}"]
        else:
            forked += groups.enter(me)
            own = share.keep(shared, me.gen) if shared else []
            own += ["--forked", "1"] if me.forked else []
            return str(me.gen), forked + (["--parent-pid", str(parent)] if parent else []) + own


# Signals a process of a restarted tree holds back until its program's mask is restored: a
# process restored first may signal another (kill(-pgid), a child's end) still on its way.
# Synchronous faults and SIGSYS (the loader's trap) are never blocked.
_NOT_HELD = {
    signal.SIGKILL,
    signal.SIGSTOP,
    signal.SIGSYS,
    signal.SIGSEGV,
    signal.SIGBUS,
    signal.SIGILL,
    signal.SIGFPE,
    signal.SIGTRAP,
}


def _hold_signals() -> None:
    """Blocked here, inherited by every forked process and kept across the exec: the loader keeps
    them blocked (loader/restart/restart.c) until each thread gets the program's own mask back;
    then what came meanwhile is delivered to the program's handlers."""
    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - _NOT_HELD)


def _recreate_zombies(me: Member) -> list[str]:
    """Children that had ended and were not waited for end again, the same way. Their SIGCHLD was
    the program's at the checkpoint already (delivered, or pending in the image: pending.c), so
    the one they send now is taken back before any other child exists."""
    out: list[str] = []
    for vpid, status in me.zombies:
        pid = os.fork()
        if pid == 0:
            _end_as(status)
        out += ["--child-pid", f"{vpid}:{pid}"]
        _wait_ended(pid)
    if me.zombies and signal.SIGCHLD in signal.pthread_sigmask(signal.SIG_BLOCK, []):
        signal.sigtimedwait([signal.SIGCHLD], 0)
    return out


def _wait_ended(pid: int) -> None:
    """Until the recreated zombie PID has ended (it stays unreaped for the program)."""
    while True:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def _own_session(me: Member) -> None:
    """A session leader (its sid is its pid) makes its session again, before it forks the
    processes that were in it; the others keep the session they are forked into (their
    parent's, as at their fork). Never the root: it stays in the group and session it is
    restarted in (a terminal's job control keeps working), mapped to the ids it knew."""
    if me.sid and me.sid == me.vpid:
        try:
            os.setsid()
        except OSError:
            raise TreeError(f"{me.gen}: cannot make its session again") from None


def _own_terminal(me: Member, mine: list[tuple[str, str, int]]) -> None:
    """A session leader whose controlling terminal was a pseudo-terminal of the tree (pty.fork,
    `script`, pexpect: share.py makes the pair again and gives it the slave as fd ME.ctty) makes
    the new slave its terminal again, before it forks the processes of its session: /dev/tty
    opens, and the terminal's signals reach its foreground group, which is its own group now."""
    if me.ctty is None or not (me.sid and me.sid == me.vpid):
        return
    fd = me.ctty[0]
    held = next((h for opt, v, h in mine if opt == "--shared-fd" and v.startswith(f"{fd}:")), None)
    if held is None:
        return  # not the tree's: the restart's own stdio, a terminal the invocation gave
    try:
        fcntl.ioctl(held, termios.TIOCSCTTY, 0)
    except OSError as exc:
        print(
            f"crac: warning: {me.gen}: its terminal cannot be its own again: {exc}", file=sys.stderr
        )


def _to_foreground(me: Member) -> None:
    """ME's new group made the foreground group of its session's terminal, as it was (a shell's
    job: in the background, its reads from the terminal would stop it). SIGTTOU is held."""
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return  # the session has no terminal of the tree's (_own_terminal)
    try:
        os.tcsetpgrp(fd, os.getpgid(0))
    except OSError as exc:
        print(
            f"crac: warning: {me.gen}: its group cannot be in the foreground: {exc}",
            file=sys.stderr,
        )
    finally:
        os.close(fd)


class _Groups:
    """Process groups made again, leaders first. For each group of the tree one member makes it
    (the root, which stays in the group it is restarted in; else the process whose pid the
    group's id is; else the first member) and tells the others its kernel id through a pipe the
    whole tree inherits; each of them joins it. A process does this once it has forked its own
    children, so no wait depends on a process not yet forked. Each process then tells its
    loader how the group and session ids it knew map to the kernel's now (--group-id,
    --session-id)."""

    def __init__(self, root: Member, rest: list[Member]) -> None:
        members = [root, *rest]
        self.maker: dict[int, int] = {}  # group id -> vpid of the member that makes it
        self.joiners: dict[int, int] = {}  # group id -> how many members join it
        for pgid in dict.fromkeys(m.pgid for m in members if m.pgid):
            inside = [m for m in members if m.pgid == pgid]
            leader = [m for m in inside if m.vpid == pgid]
            first = root if root.pgid == pgid else leader[0] if leader else inside[0]
            self.maker[pgid] = first.vpid
            self.joiners[pgid] = len(inside) - 1
        # os.pipe() is close-on-exec: the loaders do not inherit these.
        self.pipes = {g: os.pipe() for g, n in self.joiners.items() if n}
        self.root = root.vpid
        # session id -> the foreground group of its leader's terminal (_own_terminal)
        self.foreground = {m.vpid: m.ctty[1] for m in members if m.ctty and m.sid == m.vpid}

    def enter(self, me: Member) -> list[str]:
        pgid = me.pgid
        for g, (r, w) in self.pipes.items():  # what this process no longer needs
            if g != pgid or self.maker[g] == me.vpid:
                os.close(r)
            if g != pgid or self.maker[g] != me.vpid:
                os.close(w)
        if pgid:
            if self.maker[pgid] == me.vpid:
                if pgid == me.vpid and me.vpid != self.root:
                    try:
                        os.setpgid(0, 0)
                    except OSError:  # a session leader already leads its group
                        pass
                if pgid in self.pipes:
                    w = self.pipes[pgid][1]
                    os.write(w, os.getpgid(0).to_bytes(4, "little") * self.joiners[pgid])
                    os.close(w)
            else:
                r = self.pipes[pgid][0]
                got = os.read(r, 4)
                os.close(r)
                if len(got) != 4:
                    raise TreeError(f"{me.gen}: the process making its group {pgid} failed")
                try:
                    os.setpgid(0, int.from_bytes(got, "little"))
                except OSError as exc:
                    raise TreeError(f"{me.gen}: cannot join its process group: {exc}") from exc
            if (
                self.maker[pgid] == me.vpid
                and pgid != me.sid
                and self.foreground.get(me.sid) == pgid
            ):
                _to_foreground(me)
        out: list[str] = []
        for opt, vid, real in (
            ("--group-id", pgid, os.getpgid(0)),
            ("--session-id", me.sid, os.getsid(0)),
        ):
            if vid is not None and vid != real:
                out += [opt, f"{vid}:{real}"]
        return out
