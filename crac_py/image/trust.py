"""Whether an image may be trusted at all (docs/TRUST.md): restarting one runs its memory as the
restarting user's program, so only an image that user (or root) owns, and that no one else could
have written, is read. `crac restart`, `crac inspect` and `crac verify` call `check` before they
read a byte of it.

Checked with lstat (a link is never followed): the generation directory and its process
directory (owner, no group/other write), and every entry of the generation and of its files/
(a regular file or, for files/, the directory itself; owner; no group/other write). A FIFO in
place of upper.core would hang a reader, a device node would read forever or do worse, a symlink
would let the image name a file of someone else's.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crac_py.image.generation import ImageError

FILES_DIR = "files"


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def _owned(path: Path, st: os.stat_result) -> None:
    uid = os.geteuid()
    if st.st_uid not in (uid, 0):
        raise ImageError(
            f"untrusted image: {path} is owned by uid {st.st_uid}, not by you (uid {uid}) or "
            "root; restarting it would run someone else's program as you (docs/TRUST.md)"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ImageError(
            f"untrusted image: {path} is writable by others (mode "
            f"{stat.S_IMODE(st.st_mode):04o}); chmod go-w it if its contents are yours "
            "(docs/TRUST.md)"
        )


def _lstat(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError as exc:
        raise ImageError(f"cannot examine {path}: {exc.strerror}") from None


def _directory(path: Path) -> None:
    st = _lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ImageError(f"untrusted image: {path} is {_kind(st.st_mode)}, not a directory")
    _owned(path, st)


def _entries(directory: Path, allow_dirs: frozenset[str]) -> None:
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise ImageError(f"cannot list {directory}: {exc.strerror}") from None
    for name in names:
        path = directory / name
        st = _lstat(path)
        if name in allow_dirs and stat.S_ISDIR(st.st_mode):
            _owned(path, st)
            _entries(path, frozenset())
            continue
        if not stat.S_ISREG(st.st_mode):
            raise ImageError(
                f"untrusted image: {path} is {_kind(st.st_mode)} where a regular file belongs"
            )
        _owned(path, st)


def check(gen: Path) -> None:
    """Raise ImageError (one line) unless GEN, a resolved generation directory, is trusted."""
    _directory(gen)
    _directory(gen.parent)
    _entries(gen, frozenset({FILES_DIR}))


CHECK_TIMEOUT_S = 120.0


def check_structure(gen: Path, core_size: int, header_crc: int) -> None:
    """The loader's own structural checks of upper.core (`crac-loader --check-image`, the code a
    restart runs before it acts: loader/restart/restart_check.c), so `crac verify` and `crac
    inspect` never call VALID what a restart refuses. Raises ImageError with its one line."""
    import subprocess

    from crac_py import paths

    try:
        loader = paths.loader()
    except paths.NativeMissingError as exc:
        raise ImageError(str(exc)) from None
    try:
        res = subprocess.run(
            [str(loader), "--check-image", str(gen), str(core_size), str(header_crc)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise ImageError(f"image corrupted: checking {gen} did not finish") from None
    except OSError as exc:
        raise ImageError(f"cannot run {loader}: {exc.strerror}") from None
    if res.returncode == 0:
        return
    lines = res.stderr.decode(errors="replace").strip().splitlines()
    line = lines[-1] if lines else f"the loader's check ended with status {res.returncode}"
    raise ImageError(line.removeprefix("crac: error: "))
