"""lingering_child RELEASE FORK_AT STEPS [MS]: prints `step N` STEPS times; at step FORK_AT it forks
a child that prints nothing and waits for the file RELEASE, so that it outlives its parent when the
parent is killed. At its end the parent releases the child and waits for it, then prints
`DONE steps=STEPS`."""

import os
import sys
import time
from pathlib import Path


def main() -> int:
    release = Path(sys.argv[1])
    fork_at, steps = int(sys.argv[2]), int(sys.argv[3])
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    child = 0
    for k in range(1, steps + 1):
        if k == fork_at:
            child = os.fork()
            if child == 0:
                while not release.exists():
                    time.sleep(0.02)
                os._exit(0)
        print(f"step {k}", flush=True)
        time.sleep(ms / 1000)
    if child:
        release.touch()
        _, status = os.waitpid(child, 0)
        if status != 0:
            print(f"lingering_child: the child ended with {status}", file=sys.stderr)
            return 1
    print(f"DONE steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
