"""`crac verify`: everything about an image that can be checked without restarting it.

MANIFEST.json's own SHA-256 and format version, the fields a restart reads, every file's size and
SHA-256 (upper.core: the CRC-32C checks `crac restart` makes, run by the loader), and the
program binary (still there, same SHA-256). A different build of the loader is a warning: the
image is intact, but only that build (or `crac restart --force`) restarts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crac_py import paths
from crac_py.image import chain, digest, trust
from crac_py.image import generation as image

OK, FAIL, WARN = "OK", "FAIL", "WARN"


@dataclass
class Check:
    name: str
    status: str
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class Report:
    target: str
    generation: Path | None = None
    checks: list[Check] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.generation is not None and all(c.status != FAIL for c in self.checks)

    @property
    def reason(self) -> str | None:
        bad = next((c for c in self.checks if c.status == FAIL), None)
        if bad is None:
            return None
        return bad.detail if bad.name == "checkpoint" else f"{bad.name}: {bad.detail}"

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "generation": str(self.generation) if self.generation else None,
            "valid": self.valid,
            "reason": self.reason,
            "checks": [c.as_json() for c in self.checks],
        }


def total_bytes(gen: Path) -> int:
    """Bytes verify will hash in GEN (for a progress bar); 0 if unknown."""
    try:
        trust.check(gen)  # a FIFO in place of the manifest would hang the read
        files = image.load_manifest(gen).get("files") or {}
        return sum(int(m.get("size") or 0) for m in files.values())
    except (image.ImageError, AttributeError, TypeError, ValueError):
        return 0


def _files(gen: Path, manifest: dict[str, Any], advance: Callable[[int], None]) -> list[Check]:
    files = manifest.get("files")
    if not isinstance(files, dict) or image.CORE not in files:
        return [Check("files", FAIL, f"the manifest lists no {image.CORE}")]
    checks = []
    for rel, meta in sorted(files.items()):
        path = gen / rel
        if not path.is_file():
            checks.append(Check(rel, FAIL, "missing"))
            continue
        size = path.stat().st_size
        want = meta.get("size") if isinstance(meta, dict) else None
        if size != want:
            checks.append(Check(rel, FAIL, f"{size} bytes, the manifest says {want}"))
            continue
        if not digest.matches(path, meta, advance, manifest):
            kind = "CRC-32C" if meta.get("crc32c_regions") is True else "SHA-256"
            checks.append(Check(rel, FAIL, f"fails its {kind} checksum"))
            continue
        checks.append(Check(rel, OK, f"{size} bytes, checksum matches"))
    return checks


def _structure(info: image.Generation) -> Check:
    """The structural checks a restart runs first (one implementation: the loader's)."""
    try:
        trust.check_structure(info.path, *info.core_check)
    except image.ImageError as exc:
        return Check("structure", FAIL, str(exc))
    return Check("structure", OK, "regions, threads, fds and notes within bounds")


def _chain(gen: Path, manifest: dict[str, Any], advance: Callable[[int], None]) -> list[Check]:
    """An incremental generation: every generation it builds on is there, is the one it was
    built on, and passes the same checks (docs/IMAGE.md "Incremental generations")."""
    if chain.parent_of(manifest) is None:
        inc = manifest.get("incremental")
        full = isinstance(inc, dict) and inc.get("full_every")  # a chain's base (or compacted)
        return [Check("chain", OK, "full")] if full else []
    try:
        gens = chain.links(gen, manifest)
    except image.ImageError as exc:
        return [Check("chain", FAIL, str(exc))]
    for link in gens:
        try:
            trust.check(link)
            m = image.load_manifest(link)
            image.check_fields(image.Generation(link, m))
        except image.ImageError as exc:
            return [Check("chain", FAIL, f"{link.name}, which {gen.name} builds on: {exc}")]
        bad = [c for c in [*_files(link, m, advance), _structure(image.Generation(link, m))]
               if c.status == FAIL]  # fmt: skip
        if bad:
            return [
                Check(
                    "chain",
                    FAIL,
                    f"{link.name}, which {gen.name} builds on, is damaged: "
                    f"{bad[0].name}: {bad[0].detail}",
                )
            ]
    names = ", ".join(g.name for g in gens)
    return [Check("chain", OK, f"builds on {names} (full): all present and intact")]


def _program(manifest: dict[str, Any]) -> Check:
    program = Path(manifest["process"]["program"])
    try:
        exists = program.is_file()
    except OSError as exc:
        return Check("program", FAIL, f"{program}: {exc.strerror}")
    if not exists:
        return Check("program", FAIL, f"{program} no longer exists")
    if digest.sha256_file(program) != manifest["process"]["program_sha256"]:
        return Check("program", FAIL, f"{program} changed since the checkpoint")
    return Check("program", OK, f"{program} unchanged")


def _loader(manifest: dict[str, Any]) -> Check:
    try:
        loader = paths.loader()
    except paths.NativeMissingError as exc:
        return Check("loader", WARN, str(exc))
    if digest.sha256_file(loader) != manifest.get("loader_sha256"):
        return Check(
            "loader",
            WARN,
            f"written by another build of crac's loader (crac {manifest.get('crac_version')}); "
            "restart it with that build, or with --force",
        )
    return Check("loader", OK, "same loader build")


def verify_generation(gen: Path, target: str, advance: Callable[[int], None]) -> Report:
    report = Report(target, gen)
    try:
        trust.check(gen)  # docs/TRUST.md: nothing of an untrusted image is read
    except image.ImageError as exc:
        report.checks.append(Check("trust", FAIL, str(exc)))
        return report
    try:
        manifest = image.load_manifest(gen)
        report.checks.append(
            Check(image.MANIFEST, OK, f"checksum and format {manifest['format_version']}")
        )
        info = image.Generation(gen, manifest)
        image.check_fields(info)
    except image.ImageError as exc:
        report.checks.append(Check(image.MANIFEST, FAIL, str(exc)))
        return report
    report.checks.append(
        Check("generation", OK, f"{info.number} of {info.program} ({info.backend} backend)")
    )
    report.checks += _files(gen, manifest, advance)
    report.checks.append(_structure(info))
    report.checks += _chain(gen, manifest, advance)
    report.checks.append(_program(manifest))
    report.checks.append(_loader(manifest))
    # What the checkpoint could not save: the image is intact, but a restart lacks these.
    for loss in manifest.get("not_saved") or []:
        report.checks.append(Check("not saved", WARN, str(loss)))
    return report


def verify(target: str, advance: Callable[[int], None] = lambda n: None) -> list[Report]:
    """One report per generation TARGET names (a job directory: every process's latest)."""
    try:
        gens = image.resolve_generations(target)
    except image.ImageError as exc:
        report = Report(target)
        report.checks.append(Check("checkpoint", FAIL, str(exc)))
        return [report]
    return [verify_generation(gen, target, advance) for gen in gens]
