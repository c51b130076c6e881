"""ckpt_api.py — a Python program that uses crac_py.api: hooks before each checkpoint and after
each restart (logged, in order), a buffer excluded from images, and its own checkpoint at step
CKPT_AT through crac.checkpoint(). Prints `step N` lines and a deterministic DONE line.

Usage: python ckpt_api.py STEPS CKPT_AT LOG [EXCLUDE_MIB]
"""

import mmap
import sys
import time

import crac_py.api as crac

steps, ckpt_at, log_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
exclude_mib = int(sys.argv[4]) if len(sys.argv) > 4 else 0


def log(line: str) -> None:
    with open(log_path, "a") as fh:
        fh.write(line + "\n")


@crac.before_checkpoint
def first_before() -> None:
    log("before 1")


@crac.before_checkpoint
def second_before() -> None:
    log("before 2")


@crac.after_restart
def first_after() -> None:
    log("after 1")


@crac.after_restart
def second_after() -> None:
    log("after 2")


cache = mmap.mmap(-1, exclude_mib << 20) if exclude_mib else bytearray()
if exclude_mib:
    excluded = crac.exclude(cache)
    cache[:] = b"\x5a" * len(cache)  # what a restart must not bring back
    log(f"excluded {excluded}")

outcomes = []
for step in range(1, steps + 1):
    if step == ckpt_at:
        outcome = crac.checkpoint()
        outcomes.append(outcome or "none")
        if outcome == "restart" and exclude_mib and any(cache[:: 1 << 12]):
            print("ckpt_api: FAIL: the excluded buffer came back", file=sys.stderr)
            sys.exit(1)
        log(f"checkpoint at {step}: {outcome} (generation {crac.generation()})")
    print(f"step {step}", flush=True)
    time.sleep(0.01)
print(f"DONE steps={steps}", flush=True)
