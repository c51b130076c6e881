"""MPI jobs under crac (docs/MPI.md): the MPI library in the lower half, the upper libmpi shim,
`mpirun -np N crac launch` and `mpirun -np N crac restart DIR`, two checkpoint -> SIGKILL ->
restart cycles, output identical to an uninterrupted native run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    WAIT_TIMEOUT,
    CracProc,
    Segment,
    assert_same_output,
    base_env,
    check_resume_point,
    check_steps_contiguous,
    complete_generations,
    fail,
    stitch,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd, describe, native_dir, require_native
from coord_harness import free_port, wait_until
from job_harness import end_gate, gated_env

MPI_APPS = APPS_DIR / "mpi"
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "CRAC_MPIRUN_ARGS": "--oversubscribe --bind-to none",  # for the restart script's mpirun
}


def _require_openmpi() -> tuple[str, str]:
    mpicc = shutil.which("mpicc.openmpi") or shutil.which("mpicc")
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if not mpicc or not mpirun:
        pytest.skip("Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    if not (native_dir() / "shim" / "libmpi.so.40").exists():
        pytest.fail("Open MPI is installed but crac has no MPI shim: rebuild (build_native.py)")
    return mpicc, mpirun


def _free_port() -> int:
    return free_port()  # below the ephemeral range (coord_harness.py)


def _build(name: str, out_dir: Path, mpicc: str) -> Path:
    exe = out_dir / name
    cmd = [mpicc, "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", str(exe)]
    cmd.append(str(MPI_APPS / f"{name}.c"))
    if name == "mpi_gpu":  # the CUDA runtime too: crac's sim libcudart.so.13, as examples/
        from crac_py.codegen import sim_toolchain

        try:
            cmd += [*sim_toolchain.cflags(), *sim_toolchain.libs()]
        except sim_toolchain.ToolchainError as exc:
            pytest.skip(f"no CUDA runtime headers for the sim: {exc}")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        pytest.fail(f"cannot build {name}:\n{' '.join(cmd)}\n{res.stderr}")
    return exe


def _mpirun(mpirun: str, n: int) -> list[str]:
    return [mpirun, "-np", str(n), "--oversubscribe", "--bind-to", "none"]


def _mpiexec_mpich(n: int) -> list[str]:
    mpiexec = shutil.which("mpiexec.mpich")
    if not mpiexec:
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    return [mpiexec, "-n", str(n)]


def _require_mpich_program() -> str:
    """MPICH's mpicc, and crac's shim for the programs it builds (docs/MPI.md)."""
    mpicc = shutil.which("mpicc.mpich")
    if not mpicc or not shutil.which("mpiexec.mpich"):
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    if not (native_dir() / "shim" / "libmpich.so.12").exists():
        pytest.fail("MPICH is installed but crac has no libmpich.so.12 shim: rebuild")
    return mpicc


def _coord(port: int, *verb: str, timeout: float = WAIT_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*crac_cmd(), "command", "-p", str(port), *verb],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=timeout,
    )


def _request(port: int, verb: str) -> dict:
    """A command on the coordinator's socket, from this process: through the CLI (a Python
    start, 3-8 s on the loaded machine) a restarted job sometimes ran to its end before the
    checkpoint or the kill came, and the test failed (docs/DECISIONS.md, "MPI, part 2")."""
    from crac_py.coord import client

    return client.command(client.Endpoint("localhost", port), verb, timeout=WAIT_TIMEOUT)


def _kill_job(port: int) -> None:
    """SIGKILLs every rank (the coordinator's kill)."""
    reply = _request(port, "kill")
    assert reply.get("ok") and reply.get("killed"), reply


def _stop(proc: CracProc, port: int) -> None:
    """Kills the job's ranks through its coordinator, then mpirun."""
    if proc.poll() is None:
        _coord(port, "quit")
    proc.stop()


def run_mpi_cycles(
    name: str,
    args: Sequence[str],
    tmp_path: Path,
    *,
    ranks: int = 2,
    restarts: Sequence[str] = ("mpirun", "script"),
    built_with: str = "openmpi",
    launch_args: Sequence[str] = (),
    at_launch: Callable[[CracProc, int], int] | None = None,
    command: Sequence[str] = (),
) -> None:
    """Launch under Open MPI's mpirun, then per entry of RESTARTS: checkpoint the job, SIGKILL
    every rank, restart with "mpirun" (Open MPI's), "mpich" (MPICH's mpiexec: MPICH in the lower
    half) or "script" (the restart script the coordinator wrote). BUILT_WITH "mpich": the
    program built with MPICH's mpicc (crac's libmpich.so.12 shim), run natively and launched
    under MPICH's mpiexec. LAUNCH_ARGS: appended to ARGS for the crac launch only. AT_LAUNCH(proc,
    port), called right after the launch, returns how many job checkpoints it completed.
    COMMAND: the program to run instead of tests/apps' NAME built with mpicc (a Python one)."""
    cycles = len(restarts)
    mpicc, mpirun = _require_openmpi()
    require_native()
    launch = _mpirun(mpirun, ranks)
    if built_with == "mpich":
        mpicc, launch = _require_mpich_program(), _mpiexec_mpich(ranks)
    program = list(command) or [str(_build(name, tmp_path, mpicc))]
    env = base_env({**MPI_ENV, "CRAC_MPIRUN": mpirun})
    native = subprocess.run(
        [*launch, *program, *args],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=RUN_TIMEOUT,
    )
    if native.returncode != 0:
        pytest.fail(f"{name} fails natively under mpirun\n{describe(native)}")
    ref = native.stdout.decode().splitlines()
    steps = check_steps_contiguous(ref, "native run")
    assert ref and ref[-1].startswith("DONE"), f"no DONE line\n{describe(native)}"
    n_steps = steps[-1]

    ckptdir = tmp_path / "ckpt"
    logs = tmp_path / "logs"
    # Under crac the job ends only once the test opens its gate: on a loaded machine a checkpoint
    # could otherwise find a rank gone at its end.
    gate = tmp_path / "end_gate"
    env = gated_env(env, gate)
    # Each port is picked just before it is used: picked at the start, one was sometimes taken
    # by then by another test's process (two suites side by side), and the restart refused it.
    port = _free_port()
    argv = [*launch, *crac_cmd(), "launch", "-p", str(port)]
    argv += ["-c", str(ckptdir), *program, *args, *launch_args]
    proc = CracProc(argv, out_dir=logs, label="launch", env=env, cwd=tmp_path)
    segments: list[Segment] = []
    try:
        earlier = at_launch(proc, port) if at_launch else 0
        for i in range(cycles):
            wait_for_step(proc, max(1, n_steps * (i + 2) // (cycles + 4)))
            before_signal = proc.last_step()
            peers = _request(port, "list")["peers"]
            assert sorted(p.get("mpi_rank") for p in peers) == list(range(ranks)), peers
            reply = _request(port, "bcheckpoint")
            if not reply.get("ok"):
                fail(f"checkpoint {i + 1} failed: {reply}", proc)
            at_complete = proc.last_step()
            gens = complete_generations(ckptdir)
            assert len(gens) == ranks, f"{len(gens)} process directories for {ranks} ranks"
            assert set(gens.values()) == {earlier + i + 1}, (
                f"generations after checkpoint {i + 1}: {gens}"
            )
            wait_for_step(proc, min(at_complete + 2, n_steps))
            # SIGKILL every rank (the coordinator's kill), then mpirun notices and ends.
            _kill_job(port)
            wait_exit(proc, WAIT_TIMEOUT)
            seg = Segment(proc.label, proc.lines(), before_signal, at_complete)
            check_steps_contiguous(seg.lines, seg.label)
            segments.append(seg)
            port = _free_port()
            if restarts[i] == "script":  # the coordinator's script runs mpirun the same way
                argv = ["/bin/sh", str(ckptdir / "crac_restart_script.sh"), "-p", str(port)]
            else:  # the way MPI users restart
                launcher = _mpiexec_mpich(ranks) if restarts[i] == "mpich" else None
                argv = [*(launcher or _mpirun(mpirun, ranks)), *crac_cmd(), "restart"]
                argv += ["-p", str(port), str(ckptdir)]
            proc = CracProc(argv, out_dir=logs, label=f"restart{i + 1}", env=env, cwd=tmp_path)
            wait_for_step(proc, 1)
            check_resume_point(Segment(proc.label, proc.lines()), seg)
        end_gate(gate)
        status = wait_exit(proc)
        if status != 0:
            fail(f"{proc.label} exited with status {status}", proc)
        last = Segment(proc.label, proc.lines())
        check_steps_contiguous(last.lines, last.label)
        segments.append(last)
        assert_same_output(stitch(segments), ref, "the stitched checkpoint/restart output")
    except BaseException:
        _stop(proc, port)
        raise


def test_mpi_ring_allreduce_two_cycles(tmp_path: Path) -> None:
    """A ring with MPI_Sendrecv and an MPI_Allreduce/MPI_Bcast loop on 2 ranks: checkpointed
    twice (the whole job, through the coordinator), SIGKILLed, restarted with mpirun each time."""
    run_mpi_cycles("mpi_ring", ["150", "40"], tmp_path)


def test_mpi_restart_wrong_rank_count(tmp_path: Path) -> None:
    """A rank the images do not have is refused with one clear line."""
    _require_openmpi()
    ckptdir = tmp_path / "ckpt"
    for r in range(2):
        d = ckptdir / f"ckpt_app_00000000-{100 + r}"
        d.mkdir(parents=True)
        (d / "mpi_rank").write_text(f"{r} 2\n")
    cp = subprocess.run(
        [*crac_cmd(), "restart", str(ckptdir)],
        capture_output=True,
        text=True,
        env=base_env({"OMPI_COMM_WORLD_RANK": "2"}),
        timeout=WAIT_TIMEOUT,
    )
    assert cp.returncode != 0
    assert cp.stderr.startswith("crac: error: ") and "none of rank 2" in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_mpi_launcher_rank() -> None:
    """Outside an MPI launcher no rank is read (restarts of ordinary jobs are unchanged)."""
    from crac_py.launch import mpi

    assert mpi.launcher_rank({}) is None
    assert mpi.launcher_rank({"PMI_RANK": "3"}) == 3
    assert mpi.launcher_rank({"OMPI_COMM_WORLD_RANK": "1", "PMI_RANK": "3"}) == 1
    # Every process a launcher starts is a rank of the job, and gets the shim: a program that
    # does not link MPI may load it later (mpi4py).
    assert mpi.is_rank({"PMIX_RANK": "0"})
    assert not mpi.is_rank({})
    assert mpi.shim_args(["libc.so.6"], {"PMIX_RANK": "0"}) == ["--mpi-shim", "libmpi.so.40"]
    assert mpi.shim_args(["libc.so.6"], {}) == []


def test_mpi_jacobi_split_types_four_ranks(tmp_path: Path) -> None:
    """Halo exchange with MPI_Irecv posted before uneven work and MPI_Isend/MPI_Waitall after it,
    derived datatypes, MPI_Comm_split with collectives on the halves, on 4 ranks: checkpoints
    land while ranks wait in different calls, with receives pending; two cycles."""
    run_mpi_cycles("mpi_jacobi", ["120", "20"], tmp_path, ranks=4)


def test_mpi_unsupported_function_refused(tmp_path: Path) -> None:
    """A program calling an MPI function the shim lacks is refused at launch, by name."""
    mpicc, _ = _require_openmpi()
    exe = _build("mpi_unsupported", tmp_path, mpicc)
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


def test_mpi_thread_multiple(tmp_path: Path) -> None:
    """MPI_THREAD_MULTIPLE: two threads per rank communicate at once on their own communicators;
    checkpoints cut both (each thread held in its own call), two cycles."""
    run_mpi_cycles("mpi_threads", ["300", "30"], tmp_path)


def test_mpi_open_mpi_job_restarts_on_mpich(tmp_path: Path) -> None:
    """The headline: an Open MPI job (Comm_split, derived types, pending receives) checkpointed,
    restarted under MPICH's mpiexec with MPICH in the lower half (the shim keeps the program's
    Open MPI ABI and translates), checkpointed there, and restarted on Open MPI again."""
    _mpiexec_mpich(2)
    run_mpi_cycles("mpi_jacobi", ["120", "20"], tmp_path, ranks=2, restarts=("mpich", "mpirun"))


@pytest.mark.parametrize("ranks", [2, 4])
def test_mpi_collectives_different_at_the_cut(tmp_path: Path, ranks: int) -> None:
    """MPI_Alltoall/MPI_Allreduce/MPI_Bcast loops on the world, then the two halves of a split
    in different collectives at once (Allreduce on one, Alltoall on the other) with a message
    in flight across all of them, one rank late to the world's collectives each step: two
    cycles on 2 and 4 ranks."""
    run_mpi_cycles("mpi_colls", ["200", "30"], tmp_path, ranks=ranks)


def test_mpi_request_functions_and_persistent(tmp_path: Path) -> None:
    """MPI_Waitany, MPI_Waitsome, MPI_Testany, MPI_Testall and persistent requests
    (MPI_Send_init/MPI_Recv_init/MPI_Startall/MPI_Request_free), checkpoints landing while the
    persistent ring is started (its receive cancelled and posted again): two cycles."""
    run_mpi_cycles("mpi_requests", ["150", "30"], tmp_path)


def test_mpi_user_operations(tmp_path: Path) -> None:
    """MPI_Op_create/MPI_Op_free: a commutative sum and a non-commutative matrix product (on a
    derived type) in MPI_Allreduce/MPI_Reduce; the program's functions, called back by the
    library below, use TLS and libc and check their datatype; operations freed and created
    again every 10 steps; two cycles (the operations created again at each restart)."""
    run_mpi_cycles("mpi_userop", ["150", "30"], tmp_path)


def test_mpi_gpu_ranks(tmp_path: Path) -> None:
    """GPU + MPI in one process: each rank updates an array in device memory with a kernel (the
    CUDA runtime on the sim device) and the ranks allreduce the device results; the job of such
    ranks checkpointed and restarted twice (device memory and MPI state both restored)."""
    run_mpi_cycles("mpi_gpu", ["120", "30"], tmp_path)


def test_mpi_checkpoint_during_finalize_refused(tmp_path: Path) -> None:
    """A checkpoint asked for while the job is in MPI_Finalize (rank 0 already leaving, rank 1
    held between the finalize barrier and the ranks' agreement by the shim's test knob): either
    taken or refused with one line, never a hang; the job then finishes normally, its output
    identical to the native run's."""
    mpicc, mpirun = _require_openmpi()
    require_native()
    exe = _build("mpi_ring", tmp_path, mpicc)
    env = base_env({**MPI_ENV, "CRAC_MPI_TEST_FINALIZE_DELAY_MS": "10000"})
    args = ["5", "0"]
    native = subprocess.run(
        [*_mpirun(mpirun, 2), str(exe), *args], capture_output=True, env=env, timeout=RUN_TIMEOUT
    )
    assert native.returncode == 0, describe(native)
    port = _free_port()
    argv = [*_mpirun(mpirun, 2), *crac_cmd(), "launch", "-p", str(port)]
    argv += ["-c", str(tmp_path / "ckpt"), str(exe), *args]
    proc = CracProc(argv, out_dir=tmp_path / "logs", label="launch", env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + WAIT_TIMEOUT
        while not any(line.startswith("DONE") for line in proc.lines()):  # rank 0 in Finalize
            if proc.poll() is not None or time.monotonic() > deadline:
                fail("no DONE line before MPI_Finalize", proc)
            time.sleep(0.05)
        reply = _request(port, "bcheckpoint")  # the CLI's start would outlast the window
        status = wait_exit(proc, WAIT_TIMEOUT)
        if status != 0:
            fail(f"the job ended with status {status} after a checkpoint in MPI_Finalize", proc)
        assert proc.stdout_text() == native.stdout.decode(), proc.report()
        if not reply.get("ok"):  # refused: said so, once per refusing rank, in one line each
            refusals = [
                line for line in proc.stderr_text().splitlines() if "checkpoint refused" in line
            ]
            assert refusals and all("MPI_Finalize" in line for line in refusals), (
                f"{reply}\n{proc.report()}"
            )
    except BaseException:
        _stop(proc, port)
        raise


def test_mpi_groups_four_ranks(tmp_path: Path) -> None:
    """Groups made before the first checkpoint (range_incl, incl, excl, range_excl, union,
    intersection, difference, MPI_GROUP_EMPTY) checked and used after each restart: communicators
    made from them with MPI_Comm_create every step, the evens' (MPI_Comm_create), the odds'
    (MPI_Comm_create_group) and the reversed world's communicators rebuilt with a message in
    flight on the last; MPI_Group_compare/MPI_Comm_compare; 4 ranks, two cycles."""
    run_mpi_cycles("mpi_groups", ["150", "30"], tmp_path, ranks=4)


def test_mpi_intercomm_four_ranks(tmp_path: Path) -> None:
    """Two halves of the world exchanging over an inter-communicator every step (a message in
    flight on it at each checkpoint, drained and counted for the right rank), an allreduce on
    its MPI_Intercomm_merge'd communicator, and a second pair made and freed every 3 steps,
    after restarts too: 4 ranks, two cycles."""
    run_mpi_cycles("mpi_intercomm", ["150", "30", "3"], tmp_path, ranks=4)


@pytest.mark.parametrize("name", ["mpi_groups", "mpi_intercomm"])
def test_mpi_groups_intercomm_restart_on_mpich(tmp_path: Path, name: str) -> None:
    """The groups and inter-communicator programs restarted under MPICH (the groups are upper
    memory; communicators and inter-communicators rebuilt on MPICH from their descriptions),
    then on Open MPI again: 2 ranks."""
    _mpiexec_mpich(2)
    run_mpi_cycles(name, ["120", "30"], tmp_path, ranks=2, restarts=("mpich", "mpirun"))


def test_mpi_pingpong_one_crossing_per_send(tmp_path: Path) -> None:
    """8-byte MPI_Send/MPI_Recv ping-pongs, checkpointed and restarted twice; under crac each
    eager blocking send costs one crossing, its post and first tests together (docs/DECISIONS.md,
    "MPI: fewer crossings per message"): the program counts them and fails unless most do."""
    run_mpi_cycles("mpi_pingpong", ["100", "40"], tmp_path)


def _checkpoint_before_mpi_init(tmp_path: Path) -> Callable[[CracProc, int], int]:
    """AT_LAUNCH for mpi_preinit: a job checkpoint while rank 1 waits for its gate file before
    MPI_Init (rank 0 meanwhile inside MPI_Init, waiting for it); then the gate opens. The
    checkpoint must end, taken, refused with one line naming MPI_Init, or called off after the
    suspension's timeout (rank 0 entered MPI_Init only after its suspension began), never hang."""

    def at_launch(proc: CracProc, port: int) -> int:
        gate = tmp_path / "gate"
        waiting = tmp_path / "gate.waiting"
        deadline = time.monotonic() + WAIT_TIMEOUT
        # Rank 1 at its gate and both ranks joined (the coordinator would wait for a missing rank
        # itself; waiting here also gives rank 0 time to enter MPI_Init).
        while not waiting.exists() or _request(port, "status").get("num_peers") != 2:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail("rank 1 never reached its gate before MPI_Init", proc)
            time.sleep(0.05)
        reply = _request(port, "bcheckpoint")
        gate.touch()
        if reply.get("ok"):
            return 1
        # Rank 0 not yet inside MPI_Init when its suspension began (a loaded machine), then
        # entering it: its thread stays in the lower half, the suspension gives up after its
        # timeout and the checkpoint is called off; the job goes on, as with a refusal.
        stayed = "threads did not suspend" in str(reply.get("error"))
        want = "a thread stayed inside the lower half" if stayed else "refused"
        # The rank's line travels through mpiexec's forwarding: it may come after the reply.
        deadline = time.monotonic() + WAIT_TIMEOUT
        while not (refusals := [ln for ln in proc.stderr_text().splitlines() if want in ln]):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert refusals and (stayed or all("MPI_Init" in line for line in refusals)), (
            f"{reply}\n{proc.report()}"
        )
        return 0

    return at_launch


@pytest.mark.parametrize("built_with", ["openmpi", "mpich"])
def test_mpi_checkpoint_before_every_rank_reached_init(tmp_path: Path, built_with: str) -> None:
    """A checkpoint asked for while rank 1 has not called MPI_Init yet (it waits for a file) and
    rank 0 is inside MPI_Init waiting for it: taken or refused with one line, never a hang (the
    job goes on); then two ordinary checkpoint -> SIGKILL -> restart cycles, output identical to
    the native run's. Under Open MPI, and for a program built with MPICH under MPICH's mpiexec."""
    if built_with == "mpich":
        _require_mpich_program()
    gate = tmp_path / "gate"
    run_mpi_cycles(
        "mpi_preinit",
        ["120", "30"],
        tmp_path,
        restarts=("mpirun", "mpirun") if built_with == "openmpi" else ("mpich", "mpich"),
        built_with=built_with,
        launch_args=[str(gate)],
        at_launch=_checkpoint_before_mpi_init(tmp_path),
    )


MPI4PY_RING = APPS_DIR / "py" / "mpi4py_ring.py"


def _require_mpi4py() -> None:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install '.[test]')")


def test_mpi4py_job_two_cycles(tmp_path: Path) -> None:
    """mpi4py (PyPI's wheel) on 4 ranks behind crac's shim: Python loads mpi4py's extension, whose
    libmpi.so.40 is the shim crac preloaded in every process the launcher started; pickled objects
    round a ring (matched probes), reduced through mpi4py's cached duplicate of the communicator
    (attributes), numpy buffers reduced, a dict broadcast, a split's halves reduced. Checkpointed
    twice, killed, restarted with mpirun and with the restart script; the output matches an
    uninterrupted run's. Before, the real library was loaded into the program and its restart
    failed (PMIx's segment under /tmp gone)."""
    _require_mpi4py()
    command = [sys.executable, str(MPI4PY_RING)]
    run_mpi_cycles("mpi4py_ring", [str(tmp_path), "90", "40"], tmp_path, ranks=4, command=command)


def test_mpi4py_job_restarts_on_mpich(tmp_path: Path) -> None:
    """The mpi4py job of test_mpi4py_job_two_cycles, launched under Open MPI, restarted under
    MPICH's mpiexec (MPICH in the lower half: its error handlers, predefined attribute keys and
    matched probes behind the Open MPI ABI mpi4py was loaded with), then under Open MPI again."""
    _require_mpi4py()
    _mpiexec_mpich(2)
    command = [sys.executable, str(MPI4PY_RING)]
    run_mpi_cycles(
        "mpi4py_ring", [str(tmp_path), "90", "40"], tmp_path, restarts=("mpich", "mpirun"),
        command=command,
    )  # fmt: skip


# A program loading Open MPI's real library itself, by path, outside any launcher (no shim).
DLOPEN_MPI = """
import ctypes, os, sys, time
ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
for step in range(1, 100000):
    print(f"step {step}", flush=True)
    time.sleep(0.02)
"""


def test_mpi_library_loaded_by_path_is_named_at_checkpoint(tmp_path: Path) -> None:
    """A program that dlopens the real libmpi.so.40 by path gets it in its own half, where its
    connections cannot be made again: a checkpoint says so on stderr and in the manifest's
    not_saved (loader/state/mapped_losses.c)."""
    require_native()
    library = Path("/usr/lib/x86_64-linux-gnu/libmpi.so.40")
    if not library.exists():
        pytest.skip("Open MPI is not installed (apt-get install libopenmpi-dev)")
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    argv = [*crac_cmd(), "launch", "--no-coordinator", "-c", str(ckptdir)]
    argv += [sys.executable, "-c", DLOPEN_MPI, str(library)]
    proc = CracProc(argv, out_dir=logs, label="launch", env=base_env({}), cwd=tmp_path)
    try:
        wait_for_step(proc, 3)
        os.kill(proc.pid, signal.SIGUSR2)
        manifest = wait_until(lambda: list(ckptdir.glob("*/gen-000001/MANIFEST.json")), "image")
        lost = json.loads(manifest[0].read_text())["not_saved"]
        assert len(lost) == 1 and str(library) in lost[0] and "dlopen" in lost[0], lost
        wait_until(lambda: "the program loaded the MPI library" in proc.stderr_text(), "warning")
    finally:
        proc.stop()


def test_mpi4py_job_execed_by_a_script(tmp_path: Path) -> None:
    """A job script under mpirun that ends in `exec python app.py`: the shell is the rank crac
    launched, and the exec under crac keeps crac's MPI shim for the Python it becomes (before,
    that Python loaded the real library and its checkpoint could not be restarted)."""
    _require_mpi4py()
    command = ["/bin/sh", "-c", 'exec "$0" "$@"', sys.executable, str(MPI4PY_RING)]
    run_mpi_cycles(
        "mpi4py_ring", [str(tmp_path), "60", "40"], tmp_path, restarts=("mpirun",), command=command
    )


# A program with no MPI in it that tells its rank from the launcher's environment only.
RANK_STEPS = """
import os, sys, time
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("PMI_RANK") or 0)
total = 0
for step in range(1, int(sys.argv[1]) + 1):
    total += step * (rank + 1)
    if rank == 0:
        print(f"step {step}", flush=True)
    time.sleep(int(sys.argv[2]) / 1000)
gate = os.environ.get("TEST_END_GATE")
while gate and not os.path.exists(gate):
    time.sleep(0.05)
if rank == 0:
    print(f"DONE {total}", flush=True)
"""


def test_job_without_mpi_under_mpirun(tmp_path: Path) -> None:
    """Processes an MPI launcher starts that never call MPI (a Python script telling its rank from
    the environment) are the job's ranks all the same: checkpointed through the coordinator,
    killed, restarted with `mpirun -np 2 crac restart DIR` and with the restart script, each
    process finding its own image by the launcher's rank."""
    command = [sys.executable, "-c", RANK_STEPS]
    run_mpi_cycles("rank_steps", ["90", "40"], tmp_path, command=command)


MPI4PY_POOL = APPS_DIR / "py" / "mpi4py_pool.py"


def test_mpi4py_futures_pool(tmp_path: Path) -> None:
    """mpi4py.futures' MPIPoolExecutor as `python -m mpi4py.futures` runs it under mpirun (rank 0
    the script, the others its workers, pickled tasks and results between them), checkpointed
    while tasks run, killed, restarted with mpirun and with the restart script; the pool's end
    disconnects its communicators. Before, MPI_Comm_disconnect was refused and every rank raised
    at the end."""
    _require_mpi4py()
    command = [sys.executable, "-m", "mpi4py.futures", str(MPI4PY_POOL)]
    run_mpi_cycles("mpi4py_pool", ["70", "20"], tmp_path, ranks=3, command=command)


def test_mpi_v_collectives_scans_and_sync_sends(tmp_path: Path) -> None:
    """v collectives at a moving root, scans, reduce-scatters, synchronous and ready sends,
    nonblocking collectives across the pause and a named duplicate disconnected at the end, built
    with Open MPI, 3 ranks: checkpointed twice, killed, restarted with mpirun and the script."""
    run_mpi_cycles("mpi_vcolls", ["60", "30"], tmp_path, ranks=3)


def test_mpi_cartesian_grid_types_and_error_handlers(tmp_path: Path) -> None:
    """A 2-D Cartesian grid (shifts off its open edges, a row sub-grid), MPI_Topo_test,
    MPI_Comm_split_type, MPI_ERRORS_RETURN kept across the restarts (a send to no rank returns an
    error each step), struct/subarray/indexed/hvector types, a cancelled receive, MPI_Alloc_mem
    and seven nonblocking collectives across the pause, one on a row and one on the grid
    (tests/apps/mpi/mpi_grid.c: the cut lets a rank held at its row's collective through when it
    owes the grid one; without that one run in three hung beside two CPU hogs), built with Open
    MPI, 4 ranks: checkpointed twice, killed, restarted with mpirun and the script."""
    run_mpi_cycles("mpi_grid", ["60", "30"], tmp_path, ranks=4)
