"""ckpt_dupfile.py STEPS WORKDIR: one open file (no O_APPEND: one offset) behind two descriptors
of one process, as `exec >log 2>&1` makes stdout and stderr: each step writes a line through
each. At the end the file must hold every line once, whole (two separate offsets after a
restart write over each other). Prints `step K` and ends with `DONE checksum=H steps=N`."""

import os
import sys
import time

from step_sum import FNV_BASIS, fnv_step


def main() -> int:
    steps = int(sys.argv[1])
    path = os.path.join(sys.argv[2], "dup.txt")
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    again = os.dup2(out, 17)
    h = FNV_BASIS
    for k in range(1, steps + 1):
        os.write(out, f"first {k}\n".encode())
        os.write(again, f"second {k}\n".encode())
        h = fnv_step(h, k)
        print(f"step {k}", flush=True)
        time.sleep(0.02)
    with open(path) as f:
        lines = f.read().split("\n")
    want = [f"{which} {k}" for k in range(1, steps + 1) for which in ("first", "second")]
    if lines != [*want, ""]:
        print(f"FAIL: {len(lines) - 1} lines, not the {len(want)} written", file=sys.stderr)
        return 1
    print(f"DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
