"""mpi4py_ring.py — an mpi4py program (PyPI's mpi4py over the system's Open MPI or MPICH) for the
MPI tests: each step a pickled value goes round the ring of ranks (sendrecv: a matched probe and
receive), the ranks' sums are reduced as Python objects (allreduce: mpi4py's duplicate of the
communicator, found through an attribute) and as a numpy buffer (Allreduce), rank 0 broadcasts a
dict, the two halves of a split (named) sum their ranks, objects are gathered, scattered, exchanged
all to all and scanned (the v collectives below), numpy buffers of a different length per rank
gathered (Allgatherv), a dict sent with isend, and values shifted along a periodic Cartesian grid,
and records (a struct datatype) and a block of a matrix (a subarray datatype), both made before the
first checkpoint and used after each restart. Each step's pause comes between a matched probe and
its receive (comm.mprobe, then msg.recv()), so checkpoints find a message matched and not yet
received, and a nonblocking allreduce in flight (Iallreduce, waited for after the pause and a
barrier, where a cut holds the program: the cut completes it). Rank 0 prints `step N` and a
deterministic `DONE TOTAL`. Each rank writes its pid to DIR/pid.RANK first. With TEST_END_GATE set,
the ranks wait for that file before the end (tests/job_harness.py gated_env).

Usage: python mpi4py_ring.py DIR [STEPS] [MS]
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI


def wait_end_gate() -> None:
    gate = os.environ.get("TEST_END_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.05)


def main() -> int:
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    half = comm.Split(rank % 2, rank)
    half.Set_name(f"half-{rank % 2}")  # checked at every step: a restart keeps it
    grid = comm.Create_cart(MPI.Compute_dims(size, 2), periods=[True, True])
    record = np.dtype([("n", "<i8"), ("x", "<f8")])
    record_type = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.INT64_T, MPI.DOUBLE]).Commit()
    block_type = MPI.INT64_T.Create_subarray([4, 4], [2, 2], [1, 2]).Commit()
    with open(f"{sys.argv[1]}/pid.{rank}", "w") as f:
        f.write(str(os.getpid()))
    acc = total = 0
    vec = np.zeros(4, dtype=np.int64)
    for step in range(1, steps + 1):
        got = comm.sendrecv(acc + rank, dest=(rank + 1) % size, source=(rank - 1) % size)
        acc = (acc + got * 7 + step) % 1000003
        total = comm.allreduce(acc)
        mine = np.array([acc, step, rank, total % 97], dtype=np.int64)
        comm.Allreduce(mine, vec, op=MPI.SUM)
        info = comm.bcast({"step": step, "sum": int(vec.sum())} if rank == 0 else None, root=0)
        if half.Get_name() != f"half-{rank % 2}":
            raise SystemExit(f"rank {rank}: the split's name is {half.Get_name()!r}")
        halves = half.allreduce(rank)
        total = (total + info["sum"] * 3 + halves) % 1000003
        gathered = comm.gather(acc % 1000, root=0)
        part = comm.scatter([i * step for i in range(size)] if rank == 0 else None, root=0)
        everyone = comm.allgather(rank + step)
        swapped = comm.alltoall([rank * 10 + i for i in range(size)])
        counts = list(range(1, size + 1))
        ragged = np.zeros(sum(counts), dtype=np.int64)
        comm.Allgatherv(np.full(rank + 1, step + rank, dtype=np.int64), [ragged, counts])
        prefix, before = comm.scan(rank + step), comm.exscan(rank + step) or 0
        req = comm.isend({"rank": rank, "step": step}, dest=(rank + 1) % size, tag=7)
        note = comm.recv(source=(rank - 1) % size, tag=7)
        req.wait()
        mixed = sum(gathered or []) + part + sum(everyone) + sum(swapped) + int(ragged.sum())
        total = (total + mixed * 5 + prefix * 11 + before * 13 + note["rank"]) % 1000003
        mine_r = np.array([(step, rank + 0.5), (total, -1.0)], dtype=record)
        got_r = np.zeros(2, dtype=record)
        comm.Sendrecv([mine_r, 2, record_type], (rank + 1) % size, 3,
                      [got_r, 2, record_type], (rank - 1) % size, 3)  # fmt: skip
        matrix = np.arange(16, dtype=np.int64).reshape(4, 4) * (step + rank)
        block = np.zeros((4, 4), dtype=np.int64)
        comm.Sendrecv([matrix, 1, block_type], (rank + 1) % size, 4,
                      [block, 1, block_type], (rank - 1) % size, 4)  # fmt: skip
        total = (
            total + int(got_r["n"].sum()) + int(got_r["x"].sum() * 2) + int(block.sum())
        ) % 1000003
        for axis in (0, 1):
            src, dst = grid.Shift(axis, 1)
            total = (total + grid.sendrecv(total + grid.rank, dest=dst, source=src)) % 1000003
        if rank == 0:
            print(f"step {step}", flush=True)
        summed = np.zeros(2, dtype=np.int64)
        pending = comm.Iallreduce(np.array([step, rank * step], dtype=np.int64), summed)
        held = comm.isend(step * 100 + rank, dest=(rank + 1) % size, tag=9)
        matched = comm.mprobe(source=(rank - 1) % size, tag=9)
        time.sleep(ms / 1000)
        total = (total + matched.recv()) % 1000003
        held.wait()
        half.Barrier()  # held there by a cut, with the Iallreduce still not waited for
        pending.Wait()
        total = (total + int(summed[0]) * 17 + int(summed[1])) % 1000003
    wait_end_gate()
    comm.Barrier()
    if rank == 0:
        print(f"DONE {total}", flush=True)
    half.Free()
    grid.Free()
    record_type.Free()
    block_type.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
