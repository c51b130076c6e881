"""`crac compact`: an incremental chain made into one full generation (docs/IMAGE.md
"Compaction"). Python only finds and checks the generation; the loader reads the chain's memory
and writes the full generation (`crac-loader --compact`, loader/ckpt/ckpt_compact.c)."""

from __future__ import annotations

import subprocess

from crac_py import paths
from crac_py.image import chain
from crac_py.image import generation as image
from crac_py.launch.runner import crac_command

# --keep not given: nothing is removed (the loader's rotation keeps this many).
KEEP_ALL = 100000


def _tree_member(gen: image.Generation) -> str | None:
    """Why GEN's process is one of a process tree or a job (restarted together, each by its own
    generation number), or None for a run of its own."""
    process = gen.manifest.get("process") or {}
    if process.get("coordinated"):
        return "it is one process of a job run under a coordinator"
    if process.get("children"):
        return "it is the parent of a process tree checkpointed with it"
    vpid = process.get("vpid")
    for proc in image.process_dirs(gen.path.parent.parent):
        if proc == gen.path.parent:
            continue
        try:
            other = image.load_manifest(image.resolve_generation(str(proc)))
        except image.ImageError:
            continue
        if vpid in ((other.get("process") or {}).get("children") or []):
            return f"it is a child in the process tree of {proc.name}"
    return None


def compact(target: str, keep: int | None) -> int:
    """Compacts the newest generation TARGET names; the loader's exit status."""
    gen = image.open_generation(target)
    why = _tree_member(gen)
    if why is not None:
        raise image.ImageError(
            f"{gen.path.parent.name} cannot be compacted: {why}; compact is for a run of its own"
        )
    chain.links(gen.path, gen.manifest)  # every link there and the one it was built on
    core_size, header_crc = gen.core_check
    loader = paths.loader()
    argv = [str(loader), "--compact", str(gen.path), str(core_size), str(header_crc)]
    argv += [str(keep if keep is not None else KEEP_ALL), crac_command()]
    return subprocess.run(argv, check=False).returncode
