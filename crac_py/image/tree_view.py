"""A job's process tree as its images record it (docs/DECISIONS.md "Process groups, sessions and
tree images"): `crac inspect JOBDIR` draws it, `crac verify JOBDIR` refuses one that is incomplete.

The job's generation set is the one its coordinator recorded in the restart script (its
`# crac-job-process:` lines, written after each complete job checkpoint); without a script, each
process directory's latest. Each member's MANIFEST.json gives its pid and parent's pid, group
and session as the program knew them, and the children checkpointed with it
(`process.children`). Connections between processes are shown from whatever records of them the
manifests hold (`connections`, a list of objects), field by field, so new kinds show unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crac_py.image import generation as image


@dataclass
class TreeMember:
    gen: Path
    generation: int
    program: str
    vpid: int
    vppid: int
    pgid: int
    sid: int
    children: list[int] = field(default_factory=list)
    zombies: list[int] = field(default_factory=list)
    connections: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "generation_dir": str(self.gen),
            "generation": self.generation,
            "program": self.program,
            "vpid": self.vpid,
            "vppid": self.vppid,
            "pgid": self.pgid,
            "sid": self.sid,
            "children": self.children,
            "zombies": self.zombies,
            "connections": self.connections,
        }


@dataclass
class Tree:
    job_dir: Path
    script: Path | None
    members: list[TreeMember]
    problems: list[str]  # each makes the tree image incomplete: one line each

    def roots(self) -> list[TreeMember]:
        vpids = {m.vpid for m in self.members}
        return [m for m in self.members if m.vppid not in vpids]

    def kids(self, parent: TreeMember) -> list[TreeMember]:
        return [m for m in self.members if m.vppid == parent.vpid and m is not parent]

    def as_json(self) -> dict[str, Any]:
        return {
            "job_dir": str(self.job_dir),
            "restart_script": str(self.script) if self.script else None,
            "members": [m.as_json() for m in self.members],
            "problems": self.problems,
        }


def is_tree(arg: str) -> bool:
    """Whether ARG is a job directory (two or more process directories of one job)."""
    path = Path(arg)
    if not path.is_dir() or (path / image.MANIFEST).exists() or (path / "latest").exists():
        return False
    procs = image.process_dirs(path)
    return len(procs) > 1 and image.is_job(path, procs)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _member(gen: Path) -> TreeMember:
    from crac_py.image import trust

    trust.check(gen)  # nothing of an untrusted image is read (docs/TRUST.md)
    m = image.load_manifest(gen)
    proc = m.get("process")
    if not isinstance(proc, dict):
        raise image.ImageError(f"{gen}: MANIFEST.json has no process")
    conns = m.get("connections")
    return TreeMember(
        gen=gen,
        generation=_int(m.get("generation")),
        program=str(proc.get("program", "?")),
        vpid=_int(proc.get("vpid")),
        vppid=_int(proc.get("vppid")),
        pgid=_int(proc.get("pgid")),
        sid=_int(proc.get("sid")),
        children=[_int(c) for c in proc.get("children") or [] if _int(c)],
        zombies=[_int(z.get("vpid")) for z in proc.get("zombies") or [] if isinstance(z, dict)],
        connections=[c for c in conns if isinstance(c, dict)] if isinstance(conns, list) else [],
    )


def read_tree(job_dir: Path) -> Tree:
    """The job's members and what makes its tree image incomplete (never raises ImageError for
    a member: that member's problem is listed instead)."""
    from crac_py.coord.restart_script import SCRIPT_NAME, listed_generations

    script = job_dir / SCRIPT_NAME
    problems: list[str] = []
    if script.is_file():
        gens = listed_generations(script, job_dir)
        listed_procs = {g.parent.resolve() for g in gens}
        for proc in image.process_dirs(job_dir):
            if proc.resolve() not in listed_procs:
                continue
            latest = proc / "latest"
            if latest.exists():
                want = next(g for g in gens if g.parent.resolve() == proc.resolve())
                if latest.resolve() != want.resolve():
                    problems.append(
                        f"{proc}: its latest generation ({latest.resolve().name}) is not of the "
                        f"job's checkpoint, whose restart script lists {want.name}: the tree's "
                        "generations do not belong together"
                    )
    else:
        script = None
        gens = []
        for proc in image.process_dirs(job_dir):
            try:
                gens.append(image.resolve_generation(str(proc)))
            except image.ImageError as exc:
                problems.append(str(exc))
    members: list[TreeMember] = []
    for gen in gens:
        if not gen.is_dir():
            problems.append(
                f"tree member {gen} (listed in {SCRIPT_NAME}) is missing: its image directory or "
                "generation was removed"
            )
            continue
        try:
            members.append(_member(gen))
        except image.ImageError as exc:
            problems.append(f"tree member {gen}: {exc}")
    vpids = {m.vpid for m in members}
    for m in members:
        for kid in m.children:
            if kid not in vpids:
                problems.append(
                    f"process {kid}, a child of process {m.vpid} ({m.gen}) checkpointed with it, "
                    "has no image in the job: the tree is incomplete"
                )
    return Tree(job_dir, script, members, problems)
