"""Restarting a process tree (docs/DECISIONS.md "Process trees"): `crac restart` of a tree's root
forks one process per descendant, in tree order, before any of them execs the loader, so each
restarted process is the kernel's child of its restarted parent. Each process then restarts its
own image; the loader learns the new pids of its children (`--child-pid VPID:PID`) and its
parent's pid as the program knew it (`--parent-pid VPID`), and translates them
(loader/confine/confine_trap.c)."""

from __future__ import annotations

import json
import os
import signal
import sys
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
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise TreeError(f"{path}: no process ids in MANIFEST.json ({type(exc).__name__})") from exc
    return Member(path, vpid, vppid, zombies)


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


def roots_and_members(gens: list[Path]) -> list[tuple[Path, list[Path]]]:
    """For the restart script: each root of the job (a process whose parent is not in it) with
    the descendants it restarts itself. Generations whose ids cannot be read are roots."""
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
    return [(r, out[r]) for r in gens if r in out]


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
    children and its parent are. With the COORDINATOR the restarted job joins, connections to
    processes of other trees are made again first (crac_py/launch/xconn.py)."""
    me = member(root)
    rest = [member(g) for g in others]
    shared = _shared_objects([me, *rest])
    made = {
        (g, int(value.split(":")[0]))
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
    parent = 0
    while True:
        kids = [m for m in rest if m.vppid == me.vpid and m.gen != me.gen]
        forked: list[str] = []
        for kid in kids:
            pid = os.fork()
            if pid == 0:  # the child restarts KID and, in turn, its children
                parent, me = me.vpid, kid
                break
            forked += ["--child-pid", f"{kid.vpid}:{pid}"]
        else:
            for vpid, status in me.zombies:
                pid = os.fork()
                if pid == 0:
                    _end_as(status)
                forked += ["--child-pid", f"{vpid}:{pid}"]
            own = share.keep(shared, me.gen) if shared else []
            return str(me.gen), forked + (["--parent-pid", str(parent)] if parent else []) + own
