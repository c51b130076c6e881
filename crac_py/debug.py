"""`crac gdb PID`: gdb attached to a program under crac, with the program's symbols.

gdb attached to a crac process finds the loader (/proc/PID/exe) and the lower half's libraries
(the loader's r_debug), not the program: the program, its ld.so and libraries are mapped by the
upper half's own ld.so inside the window W (docs/ARCHITECTURE.md "Windows"). Their load addresses
are read from /proc/PID/maps and given to gdb as `add-symbol-file FILE -o BIAS`; crac's SIGSYS
traps are passed to the program without stopping (docs/DECISIONS.md "gdb on a program under
crac").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

W_START = 0x2000_0000_0000  # include/crac_layout.h CRAC_W_START
W_END = 0x3000_0000_0000  # CRAC_W_END
PAGE = 4096


class DebugError(Exception):
    """The process cannot be debugged this way; the message says why."""


@dataclass(frozen=True)
class Loaded:
    path: str
    bias: int  # load address minus the file's first PT_LOAD address


def _first_load_vaddr(path: str) -> int | None:
    """The page-aligned address of the file's first PT_LOAD, or None for a file that is not an
    ELF object (a data file the program mapped)."""
    try:
        with open(path, "rb") as fh:
            loads = [s["p_vaddr"] for s in ELFFile(fh).iter_segments() if s["p_type"] == "PT_LOAD"]
    except (OSError, ELFError):
        return None
    return min(loads) & ~(PAGE - 1) if loads else None


def upper_objects(pid: int) -> list[Loaded]:
    """The ELF files the upper half has mapped (the program, its ld.so and libraries, crac's
    upper runtime), each with its load bias, in address order."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except FileNotFoundError:
        raise DebugError(f"no process {pid}") from None
    except PermissionError:
        raise DebugError(
            f"cannot read /proc/{pid}/maps: not your process, or ptrace is restricted"
        ) from None
    first: dict[str, int] = {}
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        start = int(fields[0].split("-")[0], 16)
        if W_START <= start < W_END and int(fields[2], 16) == 0:
            first.setdefault(fields[5], start)
    objects = []
    for path, start in first.items():
        vaddr = _first_load_vaddr(path)
        if vaddr is not None:
            objects.append(Loaded(path, start - vaddr))
    if not objects:
        raise DebugError(f"process {pid} is not a program under crac (nothing in its window W)")
    return objects


def _gdb_quote(path: str) -> str:
    """A path as one argument of a gdb command (gdb splits them as a shell would)."""
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gdb_commands(pid: int) -> list[str]:
    """The gdb commands that make PID's program debuggable."""
    lines = ["handle SIGSYS nostop noprint pass"]
    lines += [f"add-symbol-file {_gdb_quote(o.path)} -o {o.bias:#x}" for o in upper_objects(pid)]
    return lines
