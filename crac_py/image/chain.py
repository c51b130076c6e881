"""Incremental chains (docs/IMAGE.md "Incremental generations"): the generations an incremental
generation builds on, each named by its number and identified by its upper.core's header CRC-32C
(the manifest's `incremental` object; the PARENT note holds the same for the loader)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crac_py.image.generation import MANIFEST, ImageError, load_manifest


def parent_of(manifest: dict[str, Any]) -> tuple[int, int] | None:
    """(parent generation, its header CRC-32C) of an incremental generation, None for a full one."""
    inc = manifest.get("incremental")
    if not isinstance(inc, dict) or not inc.get("parent"):
        return None
    return int(inc["parent"]), int(inc.get("parent_header_crc32c", -1))


def links(gen: Path, manifest: dict[str, Any]) -> list[Path]:
    """The generations GEN builds on, its parent first and the full one last; ImageError names
    the first link that is missing, unreadable or not the generation its child was built on."""
    out: list[Path] = []
    path, m = gen, manifest
    while (parent := parent_of(m)) is not None:
        number, crc = parent
        ppath = path.parent / f"gen-{number:06d}"
        if number >= int(m.get("generation", 0)) or len(out) > 4096:
            raise ImageError(f"image corrupted: {path.name} names {ppath.name} as its parent")
        if not (ppath / MANIFEST).is_file():
            raise ImageError(
                f"{gen.name} is incremental and builds on {ppath.name}"
                f"{'' if path == gen else f' (through {path.name})'}, which is missing: "
                "the chain is broken; restart from a complete generation"
            )
        try:
            pm = load_manifest(ppath)
        except ImageError as exc:
            raise ImageError(f"{ppath.name}, which {gen.name} builds on, is damaged: {exc}")
        if int((pm.get("upper_core") or {}).get("header_crc32c", -1)) != crc:
            raise ImageError(
                f"{ppath.name} is not the generation {path.name} was built on (its upper.core "
                "differs): the chain is broken; restart from a complete generation"
            )
        out.append(ppath)
        path, m = ppath, pm
    return out
