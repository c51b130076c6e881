"""first_fork TAG [STEPS=60] [MS=30]: prints `TAG forking` once, then forks two children at once
(a process's first fork under crac starts the job's coordinator); the root and its children,
tagged TAG.r, TAG.a and TAG.b, each print `step N` STEPS times MS ms apart, then
`DONE checksum=... steps=STEPS` (ckpt_counter's checksum); the root waits for its children and
exits non-zero if one failed."""

import os
import sys
import time

from step_sum import FNV_BASIS, fnv_step


def say(line: str) -> None:
    """One write per line, so the processes' lines never mix."""
    os.write(1, f"{line}\n".encode())


def count(tag: str, steps: int, ms: int) -> None:
    h = FNV_BASIS
    for k in range(1, steps + 1):
        h = fnv_step(h, k)
        say(f"{tag} step {k}")
        time.sleep(ms / 1000)
    say(f"{tag} DONE checksum={h:016x} steps={steps}")


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    say(f"{tag} forking")
    kids = []
    for name in ("a", "b"):
        pid = os.fork()
        if pid == 0:
            count(f"{tag}.{name}", steps, ms)
            os._exit(0)
        kids.append(pid)
    count(f"{tag}.r", steps, ms)
    failed = [pid for pid in kids if os.waitpid(pid, 0)[1] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
