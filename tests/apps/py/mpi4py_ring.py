"""mpi4py_ring.py — an mpi4py program (PyPI's mpi4py over the system's Open MPI) for the MPI tests:
each step a value goes round the ring of ranks and the ranks' sums are reduced; rank 0 prints
`step N` and a deterministic `DONE TOTAL`. Each rank writes its pid to DIR/pid.RANK first.

Usage: python mpi4py_ring.py DIR [STEPS] [MS]
"""

import os
import sys
import time

from mpi4py import MPI


def main() -> int:
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    with open(f"{sys.argv[1]}/pid.{rank}", "w") as f:
        f.write(str(os.getpid()))
    acc = total = 0
    for step in range(1, steps + 1):
        got = comm.sendrecv(acc + rank, dest=(rank + 1) % size, source=(rank - 1) % size)
        acc = (acc + got * 7 + step) % 1000003
        total = comm.allreduce(acc)
        if rank == 0:
            print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    if rank == 0:
        print(f"DONE {total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
