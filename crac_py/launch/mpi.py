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

# Where launchers put a process's rank in MPI_COMM_WORLD (Open MPI, MPICH/Hydra, PMIx, Slurm); the
# front and the loader read the same (include/crac_launcher.h).
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")

RANK_FILE = "mpi_rank"  # in each process directory, written by the shim at MPI_Init


def shim_args(needed: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The loader's `--mpi-shim SONAME` when the program links an MPI library crac stands in for,
    or was started by an MPI launcher: a program that loads MPI itself later (Python's mpi4py)
    must find crac's Open MPI-ABI shim already loaded under the soname it asks for (docs/MPI.md,
    "mpi4py")."""
    for soname in SHIM_SONAMES:
        if soname in needed:
            return ["--mpi-shim", soname]
    if launcher_rank(environ) is not None:
        return ["--mpi-shim", SHIM_SONAMES[0]]
    return []


class MpiUnsupported(Exception):
    """The program calls MPI functions the shim does not have: it would die at the first call."""


def _dynsyms(path: Path, undefined: bool) -> set[str]:
    """PATH's undefined dynamic symbols, or those it defines strongly: the shim's weak
    definitions are the functions it refuses (crac_py/codegen/mpi_spec.py, refusals_source)."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(path, "rb") as fh:
        dynsym = ELFFile(fh).get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            return set()
        return {
            s.name
            for s in dynsym.iter_symbols()
            if s.name
            and (s["st_shndx"] == "SHN_UNDEF") == undefined
            and (undefined or s["st_info"]["bind"] != "STB_WEAK")
        }


def check_supported(program: Path, shim: Path) -> None:
    """MpiUnsupported naming the MPI functions and objects PROGRAM imports that SHIM lacks or
    refuses."""
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


def loader_args(program: Path, needed: Sequence[str], shim_dir: Path) -> list[str]:
    """shim_args, checked: MpiUnsupported (or OSError) when PROGRAM links an MPI library and uses
    what the shim lacks or it is not built; none for a program not linking MPI where it is not."""
    args = shim_args(needed)
    if not args:
        return []
    if not any(soname in needed for soname in SHIM_SONAMES):
        return args if (shim_dir / args[1]).is_file() else []
    check_supported(program, shim_dir / args[1])
    return args


def launcher_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """This process's MPI rank as its launcher gave it, or None outside an MPI launcher."""
    env = os.environ if environ is None else environ
    for name in RANK_VARS:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def is_rank(environ: Mapping[str, str] | None = None) -> bool:
    """A process an MPI launcher started: a rank of the job, whether its program links MPI or
    loads it later (mpi4py), checkpointed with the others through one coordinator."""
    return launcher_rank(environ) is not None


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
