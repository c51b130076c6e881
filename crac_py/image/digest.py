"""The checksums MANIFEST.json records (docs/IMAGE.md, "Checksums"): plain SHA-256 of a file, the
page digest of device.img, which skips its holes instead of hashing them as zeros, and upper.core's
CRC-32C checks."""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE = 4096
CHUNK_PAGES = 16384  # 64 MiB: SHA256_PAGES_CHUNK in loader/image/sha256.h
_BLOCK = 1 << 20
_ZERO_BLOCK = bytes(_BLOCK)
_ZERO_PAGE = bytes(PAGE)

Advance = Callable[[int], None]


def _ignore(_: int) -> None:
    pass


def sha256_file(path: Path, advance: Advance = _ignore) -> str:
    """SHA-256 of the file's bytes, as `sha256sum` prints it."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
            advance(len(block))
    return h.hexdigest()


def _hash_pages(h: Any, fd: int, first: int, last: int, advance: Advance) -> None:
    """Pages [first, last) of fd that are not all zeros: index (u64 LE), then the page."""
    step = _BLOCK // PAGE
    for start in range(first, last, step):
        n = min(step, last - start)
        buf = os.pread(fd, n * PAGE, start * PAGE)
        advance(n * PAGE)
        if len(buf) < n * PAGE:  # the end of the file: the last page is padded with zeros
            buf += bytes(n * PAGE - len(buf))
        if buf == _ZERO_BLOCK[: n * PAGE]:
            continue
        view = memoryview(buf)
        for i in range(n):
            page = view[i * PAGE : (i + 1) * PAGE]
            if page != _ZERO_PAGE:
                h.update(struct.pack("<Q", start + i))
                h.update(page)


def _chunk_digest(fd: int, chunk: int, pages: int, advance: Advance) -> bytes:
    """One chunk's digest: its non-zero pages, only the data extents read."""
    h = hashlib.sha256()
    done = chunk * CHUNK_PAGES
    end = min(done + CHUNK_PAGES, pages)
    while done < end:
        try:
            data = os.lseek(fd, done * PAGE, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            break
        try:
            hole = os.lseek(fd, data, os.SEEK_HOLE)
        except OSError:
            hole = end * PAGE
        first = max(data // PAGE, done)
        if first >= end:
            break
        last = max(min(-(-hole // PAGE), end), first + 1)
        advance((first - done) * PAGE)
        _hash_pages(h, fd, first, last, advance)
        done = last
    advance((end - done) * PAGE)
    return h.digest()


def sha256_pages(path: Path, advance: Advance = _ignore) -> str:
    """The page digest: SHA-256 over the digests of the file's 64 MiB chunks
    (loader/image/sha256.h)."""
    with path.open("rb") as fh:
        fd = fh.fileno()
        pages = -(-os.fstat(fd).st_size // PAGE)
        chunks = -(-pages // CHUNK_PAGES)
        digests = b"".join(_chunk_digest(fd, k, pages, advance) for k in range(chunks))
    return hashlib.sha256(digests).hexdigest()


def core_crcs_match(path: Path, size: int, header_crc: int) -> bool:
    """Whether upper.core passes the checks a restart makes of it: the CRC-32C of its headers and
    of each region's saved pages (`crac-loader --check-core`, loader/image/image_check.c: native,
    as the CRC-32C instruction is)."""
    from crac_py import paths

    cp = subprocess.run(
        [str(paths.loader()), "--check-core", str(path), str(header_crc), str(size)],
        capture_output=True,
        text=True,
    )
    return cp.returncode == 0


def matches(
    path: Path, meta: dict[str, Any], advance: Advance = _ignore, manifest: Any = None
) -> bool:
    """Whether the file has the digest its MANIFEST.json entry records (MANIFEST: the whole
    manifest, for upper.core's CRC-32C checks)."""
    if not isinstance(meta, dict):
        return False
    if meta.get("crc32c_regions") is True:
        try:
            core = manifest["upper_core"]
            size, header_crc = int(core["size"]), int(core["header_crc32c"])
        except (KeyError, TypeError, ValueError):
            return False
        ok = core_crcs_match(path, size, header_crc)
        advance(size)
        return ok
    if "sha256_pages" in meta:
        return sha256_pages(path, advance) == meta["sha256_pages"]
    return sha256_file(path, advance) == meta.get("sha256")


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) as loader/image/crc32c.c computes it: the manifest's
    upper_core.header_crc32c (tools that rewrite an image's headers, bench/fuzz_image.py)."""
    c = crc ^ 0xFFFFFFFF
    table = _CRC32C
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
