"""Jobs that span hosts (docs/HOSTS.md): finding a process's image on the host it restarts on.

An image written into a node-local directory on one host is copied by the user (or the batch
script) to wherever that process restarts; the restart script then names a path that may not
exist here. `crac restart --search-dir DIR` looks for the generation under DIR by its last two
components (`ckpt_<prog>_<id>-<pid>/gen-NNNNNN`), and when it is nowhere, says which host wrote it
(the restart script's `# crac-job-host:` lines) and where to copy it."""

from __future__ import annotations

import json
from pathlib import Path

from crac_py.coord import restart_script


def _written_on(search_dir: Path, gen: Path) -> str | None:
    """The host the restart script in SEARCH_DIR says GEN's process ran on."""
    script = search_dir / restart_script.SCRIPT_NAME
    try:
        text = script.read_bytes().decode(errors="surrogateescape")
    except OSError:
        return None
    want = f"{gen.parent.name}/{gen.name}"
    for line in text.splitlines():
        if not line.startswith(restart_script.HOST_MARK):
            continue
        try:
            rec = json.loads(line[len(restart_script.HOST_MARK) :])
            proc = str(rec["process"])
            place = restart_script.Placement(str(rec["host"]), str(rec.get("addr") or ""))
        except (ValueError, KeyError, TypeError):
            continue
        if proc == want or proc.endswith("/" + want):
            return place.describe()
    return None


class ImageNotHere(Exception):
    pass


def locate(path: str, search_dir: str | None) -> str:
    """PATH if it exists; else the same generation under SEARCH_DIR; else ImageNotHere saying
    what to copy where. Without SEARCH_DIR, PATH unchanged (the usual errors follow)."""
    if not search_dir or Path(path).exists():
        return path
    gen = Path(path)
    base = Path(search_dir)
    candidate = base / gen.parent.name / gen.name
    if candidate.exists():
        return str(candidate)
    host = _written_on(base, gen)
    where = f" (written on host {host})" if host else ""
    raise ImageNotHere(
        f"the image {path}{where} is not on this host: copy its process directory "
        f"{gen.parent.name}/ into {base}/ (or onto the same path) before restarting"
    )
