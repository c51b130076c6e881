"""Programs built with MPICH's mpicc (docs/MPI.md, "Programs built against MPICH"): the program
links libmpich.so.12, crac preloads its MPICH-ABI shim (a translation layer over the Open MPI-ABI
one), the job runs under MPICH's mpiexec, is checkpointed, SIGKILLed and restarted under MPICH
and under Open MPI, its output compared with an uninterrupted native run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ckpt_harness import WAIT_TIMEOUT, base_env
from conftest import crac_cmd
from test_mpi import MPI_ENV, _build, _require_mpich_program, _require_openmpi, run_mpi_cycles


def test_mpich_program_ring_two_cycles(tmp_path: Path) -> None:
    """Ring (MPI_Sendrecv) and MPI_Allreduce/MPI_Bcast with a message in flight, built with
    MPICH, 2 ranks: two cycles under MPICH."""
    run_mpi_cycles(
        "mpi_ring", ["150", "40"], tmp_path, restarts=("mpich", "mpich"), built_with="mpich"
    )


# name -> (arguments, ranks): mpi_jacobi, pending MPI_Irecv, MPI_Isend/MPI_Waitall, derived
# datatypes and MPI_Comm_split; mpi_vcolls (tests/test_mpi.py's, built with MPICH here: the
# MPICH-ABI shim's translations of each), v collectives, scans, reduce-scatters, synchronous and
# ready sends, nonblocking collectives, a named duplicate disconnected (refused at launch before
# upperhalf/mpich/mpich_colls.c); mpi_grid (tests/test_mpi.py's too), Cartesian grids, error
# handlers, more datatypes and nonblocking collectives, a cancel (refused at launch before
# upperhalf/mpich/mpich_topo.c and mpich_types.c).
_SEVERAL_RANKS = {
    "mpi_jacobi": (["120", "20"], 4),
    "mpi_vcolls": (["60", "30"], 3),
    "mpi_grid": (["60", "30"], 4),
}


@pytest.mark.parametrize("name", list(_SEVERAL_RANKS))
def test_mpich_program_several_ranks(tmp_path: Path, name: str) -> None:
    """Built with MPICH, on 3 or 4 ranks: two cycles under MPICH."""
    args, ranks = _SEVERAL_RANKS[name]
    run_mpi_cycles(
        name, args, tmp_path, ranks=ranks, restarts=("mpich", "mpich"), built_with="mpich"
    )


@pytest.mark.parametrize("ranks", [2, 4])
def test_mpich_program_collectives_different_at_the_cut(tmp_path: Path, ranks: int) -> None:
    """The halves of a split in different collectives at once, a message in flight, built with
    MPICH: two cycles under MPICH on 2 and 4 ranks."""
    run_mpi_cycles(
        "mpi_colls",
        ["200", "30"],
        tmp_path,
        ranks=ranks,
        restarts=("mpich", "mpich"),
        built_with="mpich",
    )


def test_mpich_program_thread_multiple(tmp_path: Path) -> None:
    """MPI_THREAD_MULTIPLE, two threads per rank on their own communicators, built with MPICH:
    two cycles under MPICH."""
    run_mpi_cycles(
        "mpi_threads", ["300", "30"], tmp_path, restarts=("mpich", "mpich"), built_with="mpich"
    )


def test_mpich_program_request_functions(tmp_path: Path) -> None:
    """MPI_Waitany/Waitsome/Testany/Testall and persistent requests (MPICH's integer request
    handles kept across MPI_Start), built with MPICH: two cycles under MPICH."""
    run_mpi_cycles(
        "mpi_requests", ["150", "30"], tmp_path, restarts=("mpich", "mpich"), built_with="mpich"
    )


def test_mpich_program_user_operations(tmp_path: Path) -> None:
    """MPI_Op_create: the program's function, called back through the shim, gets its own MPICH
    datatype handle; built with MPICH, two cycles under MPICH."""
    run_mpi_cycles(
        "mpi_userop", ["150", "30"], tmp_path, restarts=("mpich", "mpich"), built_with="mpich"
    )


def test_mpich_program_gpu_ranks(tmp_path: Path) -> None:
    """GPU + MPI ranks (the CUDA runtime on the sim device) built with MPICH: device memory and
    MPI state restored together, two cycles under MPICH."""
    run_mpi_cycles(
        "mpi_gpu", ["120", "30"], tmp_path, restarts=("mpich", "mpich"), built_with="mpich"
    )


def test_mpich_program_restarts_on_open_mpi(tmp_path: Path) -> None:
    """The other way: an MPICH-built job (Comm_split, derived types, pending receives)
    checkpointed under MPICH, restarted under Open MPI's mpirun (Open MPI in the lower half, the
    program keeping MPICH's ABI), checkpointed there, and restarted under MPICH again."""
    run_mpi_cycles(
        "mpi_jacobi",
        ["120", "20"],
        tmp_path,
        ranks=2,
        restarts=("mpirun", "mpich"),
        built_with="mpich",
    )


_GROUPS_ARGS = {"mpi_groups": ["150", "30"], "mpi_intercomm": ["150", "30", "3"]}


@pytest.mark.parametrize("name", ["mpi_groups", "mpi_intercomm"])
def test_mpich_program_groups_intercomm_four_ranks(tmp_path: Path, name: str) -> None:
    """Groups (MPICH's integer group handles, MPI_GROUP_EMPTY, translate_ranks' MPI_UNDEFINED,
    compare results), MPI_Comm_create/_create_group and inter-communicators, built with MPICH:
    4 ranks, two cycles under MPICH."""
    run_mpi_cycles(
        name,
        _GROUPS_ARGS[name],
        tmp_path,
        ranks=4,
        restarts=("mpich", "mpich"),
        built_with="mpich",
    )


@pytest.mark.parametrize("name", ["mpi_groups", "mpi_intercomm"])
def test_mpich_program_groups_intercomm_restart_on_open_mpi(tmp_path: Path, name: str) -> None:
    """The MPICH-built groups and inter-communicator programs restarted under Open MPI (the
    program's group handles kept, its communicators rebuilt on Open MPI), then under MPICH."""
    run_mpi_cycles(
        name,
        _GROUPS_ARGS[name],
        tmp_path,
        ranks=2,
        restarts=("mpirun", "mpich"),
        built_with="mpich",
    )


@pytest.mark.parametrize("built_with", ["mpich", "openmpi"])
def test_mpi_abi_values_across_libraries(tmp_path: Path, built_with: str) -> None:
    """The values an ABI defines (MPI_ANY_SOURCE, MPI_PROC_NULL statuses, MPI_IN_PLACE,
    MPI_UNDEFINED, error classes, thread level, Testsome/Waitsome, counts, pack/unpack), checked
    by the program each step, built with MPICH (restarted on Open MPI, then on MPICH) and with
    Open MPI (restarted on MPICH, then on Open MPI): one restart each way for each."""
    other_then_same = ("mpirun", "mpich") if built_with == "mpich" else ("mpich", "mpirun")
    if built_with == "openmpi":
        _require_mpich_program()
    run_mpi_cycles(
        "mpi_abi", ["120", "20"], tmp_path, restarts=other_then_same, built_with=built_with
    )


def test_mpich_program_unsupported_function_refused(tmp_path: Path) -> None:
    """An MPICH-built program calling an MPI function the MPICH-ABI shim lacks is refused at
    launch, by name, in one line."""
    _require_openmpi()
    exe = _build("mpi_unsupported", tmp_path, _require_mpich_program())
    cp = subprocess.run(
        [*crac_cmd(), "launch", "--no-coordinator", str(exe)],
        capture_output=True,
        text=True,
        env=base_env(MPI_ENV),
        cwd=tmp_path,
        timeout=WAIT_TIMEOUT,
    )
    assert cp.returncode != 0
    assert cp.stderr.startswith("crac: error: ") and "MPI_Win_create" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_mpich_sonames_pick_the_mpich_shim() -> None:
    """A program linking MPICH's library under either soname gets the MPICH-ABI shim, and is a
    rank under Hydra (PMI_RANK); Open MPI's keeps its own."""
    from crac_py.launch import mpi

    for soname in ("libmpich.so.12", "libmpi.so.12"):
        assert mpi.shim_args(["libc.so.6", soname]) == ["--mpi-shim", soname]
        assert mpi.is_rank({"PMI_RANK": "1"})
    assert mpi.shim_args(["libmpi.so.40"]) == ["--mpi-shim", "libmpi.so.40"]
