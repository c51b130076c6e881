"""Finding and checking checkpoint images (docs/ARCHITECTURE.md "Image", docs/IMAGE.md).

A *process directory* `ckpt_<prog>_<hostid>-<pid>/` holds generations `gen-NNNNNN/` and a
`latest` link; a generation holds MANIFEST.json, upper.core and optionally files/. Here we find
the generation a path means and check everything that can be checked before the loader runs; the
loader checks upper.core itself (size, header and per-region CRC-32C) while it restores.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crac_py.image import digest

FORMAT = "crac-image"
FORMAT_VERSION = 2  # crac_py/image/format.py CRAC_IMAGE_FORMAT
# Read too: format 3, an image with compressed regions (CRAC_IMAGE_FORMAT_COMPRESSED), and
# format 4, an incremental generation (CRAC_IMAGE_FORMAT_INCREMENTAL).
FORMAT_VERSIONS = (FORMAT_VERSION, 3, 4)
MANIFEST = "MANIFEST.json"
CORE = "upper.core"
_DIGEST_RE = re.compile(rb'"manifest_sha256": "([0-9a-f]{64})"')
# Files the loader verifies itself while reading (CRC-32C per region): hashing them here too
# would read the whole image twice. `crac verify` hashes everything.
DEVICE = "device.img"
_LOADER_CHECKED = frozenset({CORE, DEVICE})


class ImageError(Exception):
    """The image cannot be used; the message says why (and what to do)."""


@dataclass(frozen=True)
class Generation:
    path: Path
    manifest: dict[str, Any]

    @property
    def number(self) -> int:
        return int(self.manifest["generation"])

    @property
    def program(self) -> str:
        return str(self.manifest["process"]["program"])

    @property
    def argv(self) -> list[str]:
        return [str(a) for a in self.manifest["process"]["argv"]]

    @property
    def backend(self) -> str:
        return str(self.manifest["backend"]["name"] or "none")

    @property
    def ckpt_signal(self) -> int:
        return int(self.manifest["process"]["ckpt_signal"])

    @property
    def core_check(self) -> tuple[int, int]:
        """(size, header CRC-32C) of upper.core, which the loader checks."""
        core = self.manifest["upper_core"]
        return int(core["size"]), int(core["header_crc32c"])


def process_dirs(path: Path) -> list[Path]:
    """The ckpt_* process directories directly under a checkpoint directory."""
    return sorted(p for p in path.glob("ckpt_*") if p.is_dir())


def resolve_generation(arg: str) -> Path:
    """The generation directory that ARG names: a generation, a process directory (its latest),
    a `latest` link, or a checkpoint directory holding exactly one process directory."""
    path = Path(arg)
    if not path.exists():
        if path.is_symlink():
            raise ImageError(f"{arg} points to a generation that no longer exists")
        raise ImageError(f"{arg}: no such checkpoint")
    if not path.is_dir():
        raise ImageError(f"{arg} is not a checkpoint directory")
    path = path.resolve()
    if (path / MANIFEST).exists() or (path / CORE).exists():
        return path
    latest = path / "latest"
    if latest.is_symlink() or latest.exists():
        if not latest.exists():
            raise ImageError(f"{latest} points to a generation that no longer exists")
        return latest.resolve()
    procs = process_dirs(path)
    if len(procs) == 1:
        return resolve_generation(str(procs[0]))
    if not procs:
        raise ImageError(f"{arg} holds no checkpoint (no ckpt_* directory, no latest link)")
    if is_job(path, procs):
        names = ", ".join(p.name for p in procs[:4])
        raise ImageError(
            f"{arg} holds the {len(procs)} processes of a job ({names}...); `crac restart {arg}` "
            "restarts all of them (or run its crac_restart_script.sh), or name one process "
            "directory"
        )
    return _newest_lineage(arg, procs)


def _latest_manifest(proc: Path) -> dict[str, Any] | None:
    """The manifest of a process directory's latest complete generation, or None."""
    try:
        return load_manifest(resolve_generation(str(proc)))
    except ImageError:
        return None


def is_job(path: Path, procs: list[Path]) -> bool:
    """Whether the process directories under PATH are one job's processes (restarted together)
    rather than successive runs that reused one checkpoint directory: the job's restart script
    lists them, or their images say they ran under a coordinator."""
    from crac_py.coord.restart_script import SCRIPT_NAME, listed_generations

    if (path / SCRIPT_NAME).is_file() and listed_generations(path / SCRIPT_NAME):
        return True
    manifests = [m for m in map(_latest_manifest, procs) if m is not None]
    return bool(manifests) and all(m.get("process", {}).get("coordinated") for m in manifests)


def _newest_lineage(arg: str, procs: list[Path]) -> Path:
    """Several runs in one checkpoint directory (each launch is a lineage of its own): the newest
    when they are one program's, else a refusal that lists them."""
    runs = []
    for proc in procs:
        manifest = _latest_manifest(proc)
        if manifest is not None:
            gen = resolve_generation(str(proc))
            runs.append((str(manifest.get("created", "")), gen.stat().st_mtime, proc, manifest))
    if not runs:
        raise ImageError(f"{arg} holds no complete checkpoint")
    programs = {str(r[3].get("process", {}).get("program")) for r in runs}
    if len(programs) > 1:
        listing = ", ".join(
            f"{r[2].name} ({Path(str(r[3].get('process', {}).get('program'))).name})"
            for r in sorted(runs, key=lambda r: r[2].name)
        )
        raise ImageError(
            f"{arg} holds checkpoints of {len(programs)} different programs: {listing}; "
            f"name one: crac restart {arg}/<one of them>"
        )
    newest = max(runs, key=lambda r: (r[0], r[1]))
    if len(runs) > 1:
        print(
            f"crac: note: {arg} holds {len(runs)} runs of {Path(programs.pop()).name}; "
            f"using the newest, {newest[2].name} (name a process directory to pick another)",
            file=sys.stderr,
        )
    return resolve_generation(str(newest[2]))


def resolve_generations(arg: str) -> list[Path]:
    """Like resolve_generation, but a checkpoint directory holding a job's process directories
    gives the latest generation of each, in name order."""
    path = Path(arg)
    if path.is_dir() and not (path / MANIFEST).exists() and not (path / "latest").exists():
        procs = process_dirs(path)
        if len(procs) > 1 and is_job(path, procs):
            return [resolve_generation(str(p)) for p in procs]
    return [resolve_generation(arg)]


def _read_regular(path: Path) -> bytes:
    """PATH's bytes if it is a regular file: never through a link, never blocking on a FIFO or
    reading a device (docs/TRUST.md), whichever code path reads a manifest first."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            from crac_py.image.trust import _kind

            kind = _kind(os.fstat(fd).st_mode)
            raise ImageError(f"untrusted image: {path} is {kind} where a regular file belongs")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def load_manifest(gen: Path) -> dict[str, Any]:
    """Parse MANIFEST.json and check its own checksum and format version."""
    mpath = gen / MANIFEST
    try:
        raw = _read_regular(mpath)
    except FileNotFoundError:
        raise ImageError(f"{gen} is incomplete: {MANIFEST} is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ImageError(
                f"untrusted image: {mpath} is a symbolic link where a regular file belongs"
            ) from None
        raise ImageError(f"cannot read {mpath}: {exc.strerror}") from None
    match = _DIGEST_RE.search(raw)
    if not match:
        raise ImageError(f"image corrupted: {mpath} has no checksum")
    zeroed = raw[: match.start(1)] + b"0" * 64 + raw[match.end(1) :]
    if hashlib.sha256(zeroed).hexdigest().encode() != match.group(1):
        raise ImageError(f"image corrupted: {mpath} fails its checksum")
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError):
        # ValueError: not UTF-8, not JSON, or an integer of more than 4300 digits;
        # RecursionError: nesting deeper than the parser goes.
        raise ImageError(f"image corrupted: {mpath} is not valid JSON") from None
    if not isinstance(manifest, dict):
        raise ImageError(f"image corrupted: {mpath} is not a JSON object")
    if manifest.get("format") != FORMAT:
        raise ImageError(f"{mpath} is not a crac image manifest")
    version = manifest.get("format_version")
    if version not in FORMAT_VERSIONS:
        shown = version if isinstance(version, int) and abs(version) < 10**9 else "(garbled)"
        raise ImageError(f"{gen} uses image format {shown}; this crac reads formats 2 and 3")
    problem = schema_problem(manifest)
    if problem is not None:
        raise ImageError(f"image corrupted: {mpath}: {problem}")
    return manifest


# ---- the manifest's fields: types and ranges (docs/IMAGE.md, "MANIFEST.json") ----------------
# A manifest passes its own checksum whoever wrote it, so nothing in it is trusted: every field
# a command reads is checked here, once, so that no value (a list for an object, a 5000-digit
# number, a NUL in a path) reaches code that would crash or hang on it.

_U63 = (0, (1 << 63) - 1)
_FIELDS: dict[str, tuple[type, tuple[int, int] | None, bool]] = {
    # dotted name: (type, range for ints, required)
    "generation": (int, (1, (1 << 31) - 1), True),
    "created": (str, None, False),
    "crac_version": (str, None, False),
    "loader_sha256": (str, None, False),
    "host": (dict, None, False),
    "process": (dict, None, True),
    "process.pid": (int, (0, (1 << 31) - 1), False),
    "process.program": (str, None, True),
    "process.program_sha256": (str, None, True),
    "process.argv": (list, None, True),
    "process.threads": (int, (0, 1 << 20), False),
    "process.ckpt_signal": (int, (1, 64), True),
    "process.coordinated": (bool, None, False),
    "process.forked": (bool, None, False),
    "process.ckpt_open_files": (bool, None, False),
    "backend": (dict, None, True),
    "backend.name": (str, None, True),
    "backend.version": (str, None, False),
    "backend.driver_version": (int, (-(1 << 31), (1 << 31) - 1), False),
    "device": (dict, None, False),
    "device.allocations": (list, None, False),
    "not_saved": (list, None, False),
    "upper_core": (dict, None, True),
    "upper_core.size": (int, _U63, True),
    "upper_core.header_crc32c": (int, (0, (1 << 32) - 1), True),
    "files": (dict, None, True),
    # --incremental (docs/IMAGE.md "Incremental generations"); chain.py reads these as numbers
    "incremental": (dict, None, False),
    "incremental.full_every": (int, (0, 1 << 30), False),
    "incremental.parent": (int, (0, (1 << 31) - 1), False),
    "incremental.base": (int, (0, (1 << 31) - 1), False),
    "incremental.parent_header_crc32c": (int, (0, (1 << 32) - 1), False),
}
_DEVICE_COUNTS = ("streams", "events", "modules", "pinned")
_KIND_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}


def _field(manifest: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = manifest
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _bad_value(value: Any, kind: type, bounds: tuple[int, int] | None) -> bool:
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return not ok or (bounds is not None and not bounds[0] <= value <= bounds[1])
    return not isinstance(value, kind)


def _bad_path(text: Any) -> bool:
    return not isinstance(text, str) or not text or "\0" in text


def schema_problem(manifest: dict[str, Any]) -> str | None:
    """What is wrong with the manifest's fields (a phrase), or None."""
    for dotted, (kind, bounds, required) in _FIELDS.items():
        present, value = _field(manifest, dotted)
        if not present:
            if required:
                return f"field {dotted} is missing"
            continue
        if _bad_value(value, kind, bounds):
            what = f"an integer in {bounds[0]}..{bounds[1]}" if bounds else _KIND_NAMES[kind]
            return f"field {dotted} is not {what}"
    process = manifest["process"]
    if _bad_path(process["program"]) or not os.path.isabs(process["program"]):
        return "field process.program is not an absolute path"
    if not all(isinstance(a, str) and "\0" not in a for a in process["argv"]):
        return "field process.argv is not a list of strings"
    if not all(isinstance(x, str) for x in manifest.get("not_saved") or []):
        return "field not_saved is not a list of strings"
    device = manifest.get("device") or {}
    for name in _DEVICE_COUNTS:
        if name in device and _bad_value(device[name], int, (0, 1 << 31)):
            return f"field device.{name} is not an integer in 0..{1 << 31}"
    for alloc in device.get("allocations") or []:
        if not (
            isinstance(alloc, dict)
            and not _bad_value(alloc.get("address"), int, (0, (1 << 64) - 1))
            and not _bad_value(alloc.get("size"), int, _U63)
            and isinstance(alloc.get("kind"), str)
        ):
            return "field device.allocations holds an entry that is not {address, size, kind}"
    for rel, meta in manifest["files"].items():
        parts = rel.split("/")
        if _bad_path(rel) or rel.startswith("/") or ".." in parts or "" in parts:
            return f"field files names {rel!r}, not a path inside the generation"
        keys = ("sha256", "sha256_pages")
        digests = [meta.get(k) for k in keys] if isinstance(meta, dict) else []
        # upper.core (format 2): checked by its CRC-32C, no digest (docs/IMAGE.md "Checksums").
        crc_checked = rel == CORE and isinstance(meta, dict) and meta.get("crc32c_regions") is True
        if (
            not isinstance(meta, dict)
            or _bad_value(meta.get("size"), int, _U63)
            or not (
                crc_checked
                or any(isinstance(d, str) and re.fullmatch("[0-9a-f]{64}", d) for d in digests)
            )
        ):
            return f"field files.{rel} is not {{size, sha256}}"
    return None


def verify_files(gen: Path, manifest: dict[str, Any], full: bool) -> None:
    """Sizes of every listed file, SHA-256 of every file (of upper.core too when full)."""
    files = manifest.get("files")
    if not isinstance(files, dict) or CORE not in files:
        raise ImageError(f"image corrupted: {gen / MANIFEST} lists no {CORE}")
    for rel, meta in files.items():
        fpath = gen / rel
        if not fpath.is_file():
            raise ImageError(f"image incomplete: {fpath} is missing")
        size = fpath.stat().st_size
        if size != meta.get("size"):
            raise ImageError(
                f"image corrupted: {fpath} is {size} bytes, the manifest says {meta.get('size')}"
            )
        if (full or rel not in _LOADER_CHECKED) and not digest.matches(
            fpath, meta, manifest=manifest
        ):
            raise ImageError(f"image corrupted: {fpath} fails its checksum")


def check_program(manifest: dict[str, Any], force: bool) -> None:
    program = Path(manifest["process"]["program"])
    try:
        exists = program.is_file()
    except OSError as exc:
        raise ImageError(f"the checkpointed program {program}: {exc.strerror}") from None
    if not exists:
        raise ImageError(f"the checkpointed program {program} no longer exists")
    if not force and digest.sha256_file(program) != manifest["process"]["program_sha256"]:
        raise ImageError(
            f"the program {program} changed since the checkpoint; restarting it would run "
            "the old code with the new binary's files (use --force to try anyway)"
        )


def check_loader(manifest: dict[str, Any], loader: Path, force: bool) -> None:
    if not force and digest.sha256_file(loader) != manifest.get("loader_sha256"):
        raise ImageError(
            "this image was written by another build of crac's loader; restart it with the "
            f"crac {manifest.get('crac_version')} that wrote it (or --force)"
        )


def check_fields(gen: Generation) -> None:
    _check_fields(gen)


def check_writable(gen: Generation, force: bool) -> None:
    """The restarted program's next checkpoints go where this one is: it must be writable."""
    proc_dir = gen.path.parent
    if not force and not os.access(proc_dir, os.W_OK | os.X_OK):
        raise ImageError(
            f"{proc_dir} is not writable, so the restarted program could never be checkpointed "
            "again; copy the checkpoint directory somewhere writable and restart from there "
            "(or --force)"
        )


def _check_fields(gen: Generation) -> None:
    """Every field a restart uses is present and of the right type and range."""
    try:
        _ = (gen.number, gen.program, gen.argv, gen.backend, gen.ckpt_signal, gen.core_check)
        _ = str(gen.manifest["process"]["program_sha256"])
        _check_shapes(gen.manifest)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ImageError(
            f"image corrupted: {gen.path / MANIFEST} lacks or garbles a field ({exc})"
        ) from None


def _is_int(v: object, lo: int, hi: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _check_shapes(m: dict[str, Any]) -> None:
    """The types and ranges the code reading a manifest relies on (a manifest that passes its
    checksum may still have been written by hand: docs/TRUST.md)."""
    proc = m["process"]
    if not _is_int(proc["ckpt_signal"], 1, 64):
        raise ValueError("process.ckpt_signal")
    argv = proc["argv"]
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("process.argv")
    if not argv[0] or any("\0" in a for a in argv):  # what execve refuses
        raise ValueError("process.argv")
    program = proc["program"]
    if (
        not isinstance(program, str)
        or not program.startswith("/")
        or len(program) > 4095
        or "\0" in program
    ):
        raise ValueError("process.program")
    core = m["upper_core"]
    if not _is_int(core["size"], 0, 1 << 62) or not _is_int(core["header_crc32c"], 0, 2**32 - 1):
        raise ValueError("upper_core")
    if not _is_int(m["generation"], 0, 2**31 - 1):
        raise ValueError("generation")
    files = m["files"]
    if not isinstance(files, dict):
        raise ValueError("files")
    for rel, meta in files.items():
        parts = Path(rel).parts
        if not isinstance(meta, dict) or not _is_int(meta.get("size"), 0, 1 << 62):
            raise ValueError(f"files.{rel}")
        if Path(rel).is_absolute() or ".." in parts or not parts:
            raise ValueError(f"files.{rel}")
        # upper.core (format 2) is checked by its CRC-32C, without a digest (docs/IMAGE.md).
        crc_checked = rel == CORE and meta.get("crc32c_regions") is True
        if not crc_checked and not isinstance(meta.get("sha256", meta.get("sha256_pages")), str):
            raise ValueError(f"files.{rel}")
    lost = m.get("not_saved", [])
    if not isinstance(lost, list) or not all(isinstance(x, str) for x in lost):
        raise ValueError("not_saved")
    if not isinstance(m.get("backend"), dict) or not isinstance(m["backend"].get("name"), str):
        raise ValueError("backend.name")


def open_generation(arg: str, *, full: bool = False) -> Generation:
    from crac_py.image import trust

    path = resolve_generation(arg)
    trust.check(path)  # before a byte of it is read (docs/TRUST.md)
    manifest = load_manifest(path)
    gen = Generation(path, manifest)
    _check_fields(gen)
    verify_files(path, manifest, full)
    return gen
