"""ckpt_stdin.py — reads its input from stdin (a file the shell gives it: `< input`), one line per
step, checking that each line is the next one (`line K`); `step N` per step, then a
deterministic `DONE ...` line. Python reads stdin ahead in blocks: what it has read but not yet
used is in its memory, the file's offset past it.

Usage: python ckpt_stdin.py [MS]   (stdin: lines "line 1", "line 2", ...)
"""

import sys
import time


def main() -> int:
    ms = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    total = 0
    for step, line in enumerate(sys.stdin, 1):
        if line != f"line {step}\n":
            print(f"ckpt_stdin: FAIL: step {step} read {line!r}", file=sys.stderr)
            return 1
        total += step
        print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    print(f"DONE lines={step} total={total}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
