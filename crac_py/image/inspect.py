"""`crac inspect`: what an image holds, read from upper.core's notes, device.img's index and
MANIFEST.json. Every record is decoded with the layouts of crac_py/image/format.py, the one
definition of the format (docs/IMAGE.md), into named fields."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.construct.core import ConstructError
from elftools.elf.elffile import ELFFile

from crac_py.image import format as fmt
from crac_py.image.generation import CORE, DEVICE, Generation, ImageError

REGION_KINDS = fmt.ENUM["crac_region_kind"].labels
FD_KINDS = fmt.ENUM["crac_fd_kind"].labels
DEV_KINDS = fmt.ENUM["crac_dev_kind"].labels
# a crac_pty_rec follows the path of these
_PTY_KINDS = tuple(
    fmt.ENUM["crac_fd_kind"].value(c) for c in ("CRAC_FD_PTY_MASTER", "CRAC_FD_PTY_SLAVE")
)

REGION = fmt.RECORD["crac_region_rec"]
THREAD = fmt.RECORD["crac_thread_note"]
FD = fmt.RECORD["crac_fd_rec"]
PTY = fmt.RECORD["crac_pty_rec"]


class _Short(Exception):
    """A note ends inside a record."""


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
                    if note["n_name"] == fmt.NOTE_NAME:
                        desc = note["n_descdata"]
                        notes[int(note["n_type"])] = (
                            desc if isinstance(desc, bytes) else bytes(desc, "latin-1")
                        )
    except (ELFError, ConstructError, OSError, struct.error, ValueError) as exc:
        raise ImageError(f"cannot read {core}: {exc}") from None
    return notes


def _cstr(blob: bytes) -> str:
    return blob.split(b"\0", 1)[0].decode("utf-8", "replace")


def _prot(p: int) -> str:
    return ("r" if p & 1 else "-") + ("w" if p & 2 else "-") + ("x" if p & 4 else "-")


def _rec(rec: fmt.Record, blob: bytes, off: int) -> dict[str, Any]:
    """One record as JSON-ready fields (byte arrays in hex); _Short when BLOB ends inside it."""
    if off + rec.size > len(blob):
        raise _Short(f"{rec.name} at offset {off}")
    return {k: v.hex() if isinstance(v, bytes) else v for k, v in rec.unpack(blob, off).items()}


def _array(rec: fmt.Record, blob: bytes, off: int, n: int) -> list[dict[str, Any]]:
    return [_rec(rec, blob, off + i * rec.size) for i in range(n)]


def _sized(blob: bytes, rec: fmt.Record) -> list[tuple[dict[str, Any], int]]:
    """Variable-length records that start with their `size`: (fields, offset) of each."""
    out, off = [], 0
    while off < len(blob):
        f = _rec(rec, blob, off)
        if f["size"] < rec.size or off + f["size"] > len(blob):
            raise _Short(f"{rec.name} at offset {off} (size {f['size']})")
        out.append((f, off))
        off += f["size"]
    return out


def _process(blob: bytes) -> dict[str, Any]:
    f = _rec(fmt.RECORD["crac_process_rec"], blob, 0)
    start = fmt.RECORD["crac_process_rec"].size
    return f | {"cwd": _cstr(blob[start : start + f["cwd_len"]])}


def _regions(blob: bytes) -> list[dict[str, Any]]:
    out = []
    for f, off in _sized(blob, REGION):
        path_at = off + REGION.size
        f["path"] = _cstr(blob[path_at : path_at + f["path_len"]])
        f["kind_name"] = REGION_KINDS.get(f["kind"], str(f["kind"]))
        out.append(f)
    return out


def _threads(blob: bytes) -> list[dict[str, Any]]:
    if len(blob) % THREAD.size:
        raise _Short(f"{THREAD.name} array of {len(blob)} bytes")
    return _array(THREAD, blob, 0, len(blob) // THREAD.size)


def _fds(blob: bytes) -> list[dict[str, Any]]:
    out = []
    for f, off in _sized(blob, FD):
        path_at = off + FD.size
        f["path"] = _cstr(blob[path_at : path_at + f["path_len"]])
        f["kind_name"] = FD_KINDS.get(f["kind"], str(f["kind"]))
        if f["kind"] in _PTY_KINDS:
            f["pty"] = _rec(PTY, blob, path_at + f["path_len"])
        out.append(f)
    return out


def _signals(blob: bytes) -> list[dict[str, Any]]:
    """Signals 1..64 (the note is indexed by signal number; record 0 is unused)."""
    rec = fmt.RECORD["crac_signal_rec"]
    recs = _array(rec, blob, 0, len(blob) // rec.size)
    return [{"signo": i} | r for i, r in enumerate(recs) if i > 0]


def _timers(blob: bytes) -> dict[str, Any]:
    head = fmt.RECORD["crac_timers_rec"]
    f = _rec(head, blob, 0)
    return f | {"posix": _array(fmt.RECORD["crac_posix_timer_rec"], blob, head.size, f["n_posix"])}


def _pending(blob: bytes) -> dict[str, Any]:
    head = fmt.RECORD["crac_pending_rec"]
    f = _rec(head, blob, 0)
    thread = fmt.RECORD["crac_pending_thread"]
    threads = _array(thread, blob, head.size, f["n_threads"])
    infos_at = head.size + f["n_threads"] * thread.size
    info = fmt.RECORD["crac_pending_info"]
    infos = _array(info, blob, infos_at, f["n_infos"])
    at = infos_at + f["n_infos"] * info.size
    for t in threads:  # each thread's own instances follow, thread by thread
        t["infos"] = _array(info, blob, at, t["n_infos"])
        at += t["n_infos"] * info.size
    for i in [*infos, *(i for t in threads for i in t["infos"])]:
        # si_signo, si_errno, si_code lead every siginfo_t; the rest depends on si_code
        signo, _, code = struct.unpack_from("<3i", bytes.fromhex(i["info"]))
        i["signo"], i["code"] = signo, code
    return f | {"threads": threads, "infos": infos}


def _rlimits(blob: bytes) -> list[dict[str, Any]]:
    rec = fmt.RECORD["crac_rlimit_rec"]
    return [{"resource": i} | r for i, r in enumerate(_array(rec, blob, 0, len(blob) // rec.size))]


def _file_ids(blob: bytes) -> list[dict[str, Any]]:
    rec = fmt.RECORD["crac_file_id_rec"]
    out = []
    for f, off in _sized(blob, rec):
        path_at = off + rec.size
        f["path"] = _cstr(blob[path_at : path_at + f["path_len"]])
        # _rec writes byte arrays in hex: the field holds the digest's hex characters
        f["sha256"] = bytes.fromhex(f["sha256"]).decode("ascii", "replace") if f["hashed"] else ""
        out.append(f)
    return out


_LOCK_KINDS = {1: "fcntl", 2: "OFD", 3: "flock"}


def _lock_text(lock: dict[str, Any]) -> str:
    """One lock of the FILE_LOCKS note as `crac inspect` shows it: "fcntl write 10-19"."""
    kind = _LOCK_KINDS.get(lock["kind"], f"kind {lock['kind']}")
    mode = "write" if lock["write"] else "read"
    if lock["kind"] == 3:
        return f"{kind} {mode}"
    end = lock["start"] + lock["len"] - 1 if lock["len"] else "end"
    return f"{kind} {mode} {lock['start']}-{end}"


def _file_locks(blob: bytes) -> list[dict[str, Any]]:
    rec = fmt.RECORD["crac_file_lock_rec"]
    return _array(rec, blob, 0, len(blob) // rec.size)


def _thread_sched(blob: bytes) -> list[dict[str, Any]]:
    rec = fmt.RECORD["crac_thread_sched_rec"]
    return _array(rec, blob, 0, len(blob) // rec.size)


# One decoder per note type of the spec (tests check that none is missing).
def _seccomp(blob: bytes) -> dict[str, Any]:
    """The header, each filter's record (its instructions counted, not listed), each thread's."""
    head = _rec(fmt.RECORD["crac_seccomp_rec"], blob, 0)
    frec, trec = fmt.RECORD["crac_seccomp_filter_rec"], fmt.RECORD["crac_seccomp_thread_rec"]
    off, filters = fmt.RECORD["crac_seccomp_rec"].size, []
    for _ in range(head["n_filters"]):
        f = _rec(frec, blob, off)
        filters.append(f)
        off += frec.size + 8 * f["n_insns"]
    return {**head, "filters": filters, "threads": _array(trec, blob, off, head["n_threads"])}


def _page_crcs(blob: bytes) -> list[dict[str, Any]]:
    """Each region's bounds and how many page CRC-32Cs it has (not the values: 1 per 4 KiB)."""
    rec, off, out = fmt.RECORD["crac_page_crcs_rec"], 0, []
    while off + rec.size <= len(blob):
        r = _rec(rec, blob, off)
        pages = max(0, (r["end"] - r["start"]) // 4096)
        out.append(r | {"pages": pages})
        off += rec.size + (4 * pages + 7) // 8 * 8
    if off > len(blob):
        raise _Short("a page_crcs record")
    return out


DECODERS: dict[str, Callable[[bytes], Any]] = {
    "CRAC_NT_PROCESS": _process,
    "CRAC_NT_REGIONS": _regions,
    "CRAC_NT_THREADS": _threads,
    "CRAC_NT_FDS": _fds,
    "CRAC_NT_SIGNALS": _signals,
    "CRAC_NT_TIMERS": _timers,
    "CRAC_NT_PENDING": _pending,
    "CRAC_NT_RLIMITS": _rlimits,
    "CRAC_NT_FILE_IDS": _file_ids,
    "CRAC_NT_PRCTL": lambda blob: _rec(fmt.RECORD["crac_prctl_rec"], blob, 0),
    "CRAC_NT_SECCOMP": _seccomp,
    "CRAC_NT_PARENT": lambda blob: _rec(fmt.RECORD["crac_parent_rec"], blob, 0),
    "CRAC_NT_PAGE_CRCS": _page_crcs,
    "CRAC_NT_FILE_LOCKS": _file_locks,
    "CRAC_NT_THREAD_SCHED": _thread_sched,
}


def decode_notes(notes: dict[int, bytes], core: Path) -> tuple[dict[str, Any], list[str]]:
    """({note name: decoded}, [types of notes this crac does not know, in hex])."""
    out: dict[str, Any] = {}
    unknown = []
    for ntype, blob in sorted(notes.items()):
        note = fmt.NOTE_TYPES.get(ntype)
        if note is None:
            unknown.append(hex(ntype))
            continue
        name = note.cname.removeprefix("CRAC_NT_").lower()
        try:
            out[name] = DECODERS[note.cname](blob)
        except _Short as exc:
            raise ImageError(f"image corrupted: the {name} note of {core} ends inside {exc}")
    return out, unknown


def device_image(path: Path) -> dict[str, Any] | None:
    """device.img's header and index of allocations (None when the image has no device.img)."""
    head, rec = fmt.RECORD["crac_dev_header"], fmt.RECORD["crac_dev_record"]
    try:
        with path.open("rb") as fh:
            blob = fh.read(head.size)
            h = _rec(head, blob, 0)
            if bytes.fromhex(h["magic"]) != fmt.DEV_MAGIC or h["version"] != fmt.DEV_VERSION:
                raise ImageError(f"image corrupted: {path} is not a crac device image")
            index = fh.read(h["n"] * rec.size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ImageError(f"cannot read {path}: {exc}") from None
    except _Short:
        raise ImageError(f"image corrupted: {path} is shorter than its header") from None
    try:
        allocations = _array(rec, index, 0, h["n"])
    except _Short:
        raise ImageError(f"image corrupted: {path} is truncated inside its index") from None
    for a in allocations:
        a["kind_name"] = DEV_KINDS.get(a["kind"], str(a["kind"]))
    return {"header": h | {"magic": fmt.DEV_MAGIC.decode()}, "allocations": allocations}


def _chain(gen: Generation) -> list[dict[str, Any]]:
    """An incremental generation's chain, itself first, down to its full generation (or to the
    first link missing, with the reason)."""
    from crac_py.image import chain

    if chain.parent_of(gen.manifest) is None:
        return []
    out: list[dict[str, Any]] = [{"generation": gen.number, "status": "incremental"}]
    try:
        gens = chain.links(gen.path, gen.manifest)
    except ImageError as exc:
        return [*out, {"generation": None, "status": f"broken: {exc}"}]
    for i, link in enumerate(gens):
        last = i == len(gens) - 1
        out.append({"generation": int(link.name[4:]), "status": "full" if last else "incremental"})
    return out


def describe(gen: Generation) -> dict[str, Any]:
    notes, unknown = decode_notes(_crac_notes(gen.path / CORE), gen.path / CORE)
    regs = [
        Region(r["start"], r["end"], r["kind_name"], _prot(r["prot"]), r["path"], r["saved_pages"])
        for r in notes.get("regions", [])
    ]
    by_kind: dict[str, dict[str, int]] = {}
    for r in regs:
        k = by_kind.setdefault(r.kind, {"regions": 0, "bytes": 0, "saved_pages": 0})
        k["regions"] += 1
        k["bytes"] += r.end - r.start
        k["saved_pages"] += r.saved_pages
    excluded = sum(
        r["end"] - r["start"] for r in notes.get("regions", []) if r["flags"] & fmt.REGION_DONTDUMP
    )
    m = gen.manifest
    return {
        "chain": _chain(gen),
        "generation": gen.number,
        "excluded_bytes": excluded,
        "not_saved": [str(x) for x in m.get("not_saved") or []],
        "path": str(gen.path),
        "program": gen.program,
        "argv": gen.argv,
        "created": m.get("created"),
        "host": m.get("host"),
        "backend": m.get("backend"),
        "regions_by_kind": by_kind,
        "regions": [r.__dict__ | {"start": hex(r.start), "end": hex(r.end)} for r in regs],
        "threads": [
            {"tid": t["tid"], "kernel_tid_at_checkpoint": t["real_tid"], "main": bool(t["is_main"])}
            for t in notes.get("threads", [])
        ],
        "fds": [
            {
                "fd": f["fd"],
                "kind": f["kind_name"],
                "flags": oct(f["open_flags"]),
                "offset": f["pos"],
                "saved_copy": bool(f["saved"]),
                "path": f["path"],
                "locks": [_lock_text(k) for k in notes.get("file_locks", []) if k["fd"] == f["fd"]],
            }
            for f in notes.get("fds", [])
        ],  # fmt: skip
        "device": m.get("device", {"allocations": []}),
        "files": m.get("files"),
        "notes": notes,
        "unknown_notes": unknown,
        "device_image": device_image(gen.path / DEVICE),
    }
