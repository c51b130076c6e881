"""share_pool TAG pool|executor|manager|respawn[-spawn|-forkserver] [STEPS=300] [MS=20]: Python's
process pools in a loop: `multiprocessing.Pool(2).map` or
`concurrent.futures.ProcessPoolExecutor(2).map` (their pipes, a SimpleQueue, POSIX semaphores in
/dev/shm, the pool's threads), with the fork start method or the one named (spawn: workers
exec'd, each opening the named semaphores in /dev/shm; forkserver: forked by a server process,
Python 3.14's default); `manager`: a Pool(2) whose workers store their results in a
`multiprocessing.Manager().dict()` (each task's proxy connects to the manager's listening Unix
socket); `respawn`: an executor whose workers are replaced after 10 tasks each
(`max_tasks_per_child`; spawn or forkserver only), so new workers open the pool's named
semaphores after every restart. Each step maps a function over a few numbers, checks the results
and prints `TAG step N`; then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum).
Exits non-zero on a wrong result."""

import concurrent.futures
import multiprocessing
import sys
import time

from step_sum import FNV_BASIS, fnv_step


def work(x: int) -> int:
    return x * x + 7


def store(job: tuple) -> int:
    """Puts work(x) in the managed dict; a pool task of the manager mode."""
    results, x = job
    results[x] = work(x)
    return x


def main() -> int:
    tag, (mode, _, start) = sys.argv[1], sys.argv[2].partition("-")
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    multiprocessing.set_start_method(start or "fork")
    manager = multiprocessing.Manager() if mode == "manager" else None
    results = manager.dict() if manager else None
    if mode in ("pool", "manager"):
        pool = multiprocessing.Pool(2)
    elif mode == "respawn":
        pool = concurrent.futures.ProcessPoolExecutor(2, max_tasks_per_child=10)
    else:
        pool = concurrent.futures.ProcessPoolExecutor(2)
    h = FNV_BASIS
    with pool:
        for k in range(1, steps + 1):
            # CPython 3.11's executor with max_tasks_per_child can deadlock by itself when the
            # batches vary in size (fixed in 3.12): respawn's are of 4.
            xs = list(range(k, k + (4 if mode == "respawn" else k % 5 + 2)))
            if results is None:
                got = list(pool.map(work, xs))
            else:
                pool.map(store, [(results, x) for x in xs])
                got = [results.pop(x) for x in xs]
            if got != [work(x) for x in xs]:
                print(f"share_pool: FAIL at step {k}: {got}", file=sys.stderr)
                return 1
            h = fnv_step(h, k)
            print(f"{tag} step {k}", flush=True)
            time.sleep(ms / 1000)
    if manager:
        manager.shutdown()
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
