"""mpi4py_pool.py — an mpi4py.futures pool for the MPI tests, run as `python -m mpi4py.futures
mpi4py_pool.py STEPS MS` under mpirun (no spawn: rank 0 runs this script, the other ranks serve
its tasks). Each step maps a batch of tasks (each sleeps MS ms and returns a value of its
arguments) over the pool and prints `step N`; at the end `DONE TOTAL`, after waiting for
TEST_END_GATE where it is set (tests/job_harness.py gated_env). The pool's end disconnects its
communicators (MPI_Comm_disconnect).
"""

import os
import sys
import time

from mpi4py.futures import MPIPoolExecutor


def task(step: int, k: int, ms: int) -> int:
    time.sleep(ms / 1000)
    return (step * 31 + k) * (k + 1)


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    ms = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    total = 0
    with MPIPoolExecutor() as pool:
        for step in range(1, steps + 1):
            total += sum(pool.map(task, [step] * 4, range(4), [ms] * 4))
            print(f"step {step}", flush=True)
        gate = os.environ.get("TEST_END_GATE")
        while gate and not os.path.exists(gate):
            time.sleep(0.05)
    print(f"DONE {total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
