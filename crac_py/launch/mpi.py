"""MPI jobs (docs/MPI.md): which upper MPI shim a program needs, and which image a rank that an
MPI launcher (mpirun, srun) starts restarts from."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from crac_py.image import generation as image

# The MPI libraries the shim stands in for, by the soname programs link
# (crac_py/codegen/mpi_spec.py): Open MPI's, and MPICH's (Debian's and upstream's), whose shim is
# a translation layer over Open MPI's (docs/MPI.md, "Programs built against MPICH").
SHIM_SONAMES = ("libmpi.so.40", "libmpich.so.12", "libmpi.so.12")

# Where launchers put a process's rank in MPI_COMM_WORLD (Open MPI, MPICH/Hydra, PMIx, Slurm).
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")

RANK_FILE = "mpi_rank"  # in each process directory, written by the shim at MPI_Init


def shim_args(needed: Sequence[str]) -> list[str]:
    """The loader's `--mpi-shim SONAME` when the program links an MPI library crac stands in for."""
    for soname in SHIM_SONAMES:
        if soname in needed:
            return ["--mpi-shim", soname]
    return []


class MpiUnsupported(Exception):
    """The program calls MPI functions the shim does not have: it would die at the first call."""


def _dynsyms(path: Path, undefined: bool) -> set[str]:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(path, "rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            return set()
        return {
            s.name
            for s in dynsym.iter_symbols()
            if s.name and (s["st_shndx"] == "SHN_UNDEF") == undefined
        }


def check_supported(program: Path, shim: Path) -> None:
    """MpiUnsupported naming the MPI functions and objects PROGRAM imports that SHIM lacks."""
    wanted = {
        n for n in _dynsyms(program, True) if n.startswith(("MPI_", "PMPI_", "ompi_", "MPIX_"))
    }
    missing = sorted(wanted - _dynsyms(shim, False))
    if missing:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        raise MpiUnsupported(
            f"{program.name} uses MPI functions crac's MPI shim does not have yet: {shown} "
            f"(docs/MPI.md, what works)"
        )


def launcher_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's MPI rank as its launcher gave it, or None outside an MPI launcher."""
    env = os.environ if environ is None else environ
    for name in RANK_VARS:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def is_rank(needed: Sequence[str], environ: Mapping[str, str] | None = None) -> bool:
    """A program linking an MPI library crac stands in for, started by an MPI launcher."""
    return bool(shim_args(needed)) and launcher_rank(environ) is not None


def recorded_rank(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / RANK_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def rank_process_dir(path: str, rank: int) -> Path | None:
    """The process directory of rank RANK in checkpoint directory PATH (None when PATH holds no
    MPI job's images); ImageError when it holds a job's but none of that rank."""
    base = Path(path)
    if not base.is_dir() or (base / image.MANIFEST).exists() or (base / "latest").exists():
        return None
    procs = [p for p in image.process_dirs(base) if recorded_rank(p) is not None]
    if not procs:
        return None
    for p in procs:
        if recorded_rank(p) == rank:
            return p
    ranks = sorted(r for p in procs if (r := recorded_rank(p)) is not None)
    raise image.ImageError(
        f"{path} holds the images of MPI ranks {ranks}, none of rank {rank} (restart the job "
        f"with as many ranks as it had)"
    )
