"""ckpt_numpy.py — a NumPy program (libraries from PyPI's manylinux wheels) for the checkpoint
tests: `step N` per step, a deterministic `DONE ...` line, and a self-check of its arrays.

Usage: python ckpt_numpy.py [STEPS] [MS] [PY_THREADS]
With PY_THREADS > 0, that many Python threads each run their own matrix products beside the
main loop (OpenBLAS runs its own threads under them); the main thread joins them each step.
"""

import sys
import threading
import time

import numpy as np

N = 96


def work(seed: int, rounds: int) -> float:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((N, N))
    for _ in range(rounds):
        a = np.tanh(a @ a.T / N)
    return float(np.abs(a).sum())


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    ms = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    nthreads = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = np.random.default_rng(1234)
    state = rng.standard_normal((N, N))
    keep = state.copy()  # never changed: checked every step
    digest = 0.0
    for step in range(1, steps + 1):
        results = [0.0] * nthreads

        def run(i: int, step: int = step, results: list[float] = results) -> None:
            results[i] = work(step * 100 + i, 3)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(nthreads)]
        for t in threads:
            t.start()
        state = np.tanh(state @ state.T / N + step * 1e-3)
        for t in threads:
            t.join()
        digest += float(state.sum()) + sum(results)
        if not np.array_equal(keep, np.random.default_rng(1234).standard_normal((N, N))):
            print("ckpt_numpy: FAIL: a saved array changed", file=sys.stderr)
            return 1
        print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    print(f"DONE digest={digest:.12e} steps={steps} threads={nthreads}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
