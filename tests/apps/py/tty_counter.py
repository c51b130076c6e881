"""tty_counter TAG [STEPS=300] [MS=20]: prints `TAG step N` STEPS times while its stdout is a
terminal, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum); `TAG lost N` and
exit 1 once its stdout is not one (a restart that gave a program run by util-linux `script` the
restart's own stdout instead of its terminal's slave)."""

import os
import sys
import time

from step_sum import FNV_BASIS, fnv_step


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    h = FNV_BASIS
    for k in range(1, steps + 1):
        if not os.isatty(1):
            print(f"{tag} lost {k}", flush=True)
            return 1
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
