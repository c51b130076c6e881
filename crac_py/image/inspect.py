"""`crac inspect`: what an image holds, read from upper.core's notes (include/crac_image.h,
docs/IMAGE.md) and MANIFEST.json: regions by kind, threads, file descriptors, device state."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from crac_py.image.generation import CORE, Generation, ImageError

NT_PROCESS, NT_REGIONS, NT_THREADS, NT_FDS = 0x43520001, 0x43520002, 0x43520003, 0x43520004
REGION_KINDS = {1: "anonymous", 2: "shared anonymous", 3: "private file", 4: "shared file"}
FD_KINDS = {1: "file", 2: "directory", 3: "device", 4: "pipe", 5: "stdio", 6: "eventfd",
            7: "not restorable", 8: "message queue",
            9: "pty master", 10: "pty slave"}  # fmt: skip
# struct crac_region_rec / crac_thread_note / crac_fd_rec (little-endian, natural alignment)
REGION = struct.Struct("<IIQQIIQQQQQqIIII")
THREAD = struct.Struct("<iiiiQ")
FD = struct.Struct("<IIiIQQQIIII")


@dataclass
class Region:
    start: int
    end: int
    kind: str
    prot: str
    path: str
    saved_pages: int


def _crac_notes(core: Path) -> dict[int, bytes]:
    notes: dict[int, bytes] = {}
    try:
        with core.open("rb") as fh:
            elf = ELFFile(fh)
            for seg in elf.iter_segments():
                if seg.header.p_type != "PT_NOTE":
                    continue
                for note in seg.iter_notes():
                    if note["n_name"] == "CRAC":
                        desc = note["n_descdata"]
                        notes[int(note["n_type"])] = (
                            desc if isinstance(desc, bytes) else bytes(desc, "latin-1")
                        )
    except (ELFError, OSError, struct.error, ValueError) as exc:
        raise ImageError(f"cannot read {core}: {exc}") from None
    return notes


def _cstr(blob: bytes) -> str:
    return blob.split(b"\0", 1)[0].decode("utf-8", "replace")


def _prot(p: int) -> str:
    return ("r" if p & 1 else "-") + ("w" if p & 2 else "-") + ("x" if p & 4 else "-")


def regions(notes: dict[int, bytes]) -> list[Region]:
    out, blob, off = [], notes.get(NT_REGIONS, b""), 0
    while off + REGION.size <= len(blob):
        f = REGION.unpack_from(blob, off)
        size, kind, start, end, prot, _flags = f[0], f[1], f[2], f[3], f[4], f[5]
        saved, path_len = f[13], f[14]
        if size < REGION.size:
            break
        path = _cstr(blob[off + REGION.size : off + REGION.size + path_len])
        out.append(Region(start, end, REGION_KINDS.get(kind, str(kind)), _prot(prot), path, saved))
        off += size
    return out


def threads(notes: dict[int, bytes]) -> list[dict[str, Any]]:
    blob = notes.get(NT_THREADS, b"")
    return [
        {"tid": t[0], "kernel_tid_at_checkpoint": t[1], "main": bool(t[2])}
        for t in (
            THREAD.unpack_from(blob, o) for o in range(0, len(blob) - THREAD.size + 1, THREAD.size)
        )
    ]


def fds(notes: dict[int, bytes]) -> list[dict[str, Any]]:
    out, blob, off = [], notes.get(NT_FDS, b""), 0
    while off + FD.size <= len(blob):
        f = FD.unpack_from(blob, off)
        size, kind, fd, flags, pos = f[0], f[1], f[2], f[3], f[4]
        path = _cstr(blob[off + FD.size : off + FD.size + f[10]])
        out.append({"fd": fd, "kind": FD_KINDS.get(kind, str(kind)), "flags": oct(flags),
                    "offset": pos, "saved_copy": bool(f[8]), "path": path})  # fmt: skip
        if size < FD.size:
            break
        off += size
    return out


def describe(gen: Generation) -> dict[str, Any]:
    notes = _crac_notes(gen.path / CORE)
    regs = regions(notes)
    by_kind: dict[str, dict[str, int]] = {}
    for r in regs:
        k = by_kind.setdefault(r.kind, {"regions": 0, "bytes": 0, "saved_pages": 0})
        k["regions"] += 1
        k["bytes"] += r.end - r.start
        k["saved_pages"] += r.saved_pages
    m = gen.manifest
    return {
        "generation": gen.number,
        "path": str(gen.path),
        "program": gen.program,
        "argv": gen.argv,
        "created": m.get("created"),
        "host": m.get("host"),
        "backend": m.get("backend"),
        "regions_by_kind": by_kind,
        "regions": [r.__dict__ | {"start": hex(r.start), "end": hex(r.end)} for r in regs],
        "threads": threads(notes),
        "fds": fds(notes),
        "device": m.get("device", {"allocations": []}),
        "files": m.get("files"),
    }
