"""share_readers TAG MODE [STEPS=300] [MS=20]: a pipe whose writing end no process holds any more,
read by two processes of a tree, as `git clone`'s upload-pack and the shell that started it
hold the read end of its request pipe after git closed the other: the parent writes STEPS
16-byte records into a pipe, closes its writing end and forks a child; both keep the reading
end, the child reads one record a step and then expects end of file. A restart that left a
writing end open anywhere in the tree left the child waiting for ever. The parent prints `TAG
step N`, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum); exits 1 when the
child read a wrong record or no end of file. MODE is unused."""

import os
import sys
import time

from step_sum import FNV_BASIS, fnv_step

RECORD = 16


def child(r: int, steps: int, ms: int) -> int:
    for k in range(1, steps + 1):
        got = os.read(r, RECORD)
        if got != f"{k:015d}\n".encode():
            print(f"share_readers: FAIL: record {k} read as {got!r}", file=sys.stderr)
            return 1
        time.sleep(ms / 1000)
    rest = os.read(r, RECORD)
    if rest:
        print(f"share_readers: FAIL: {rest!r} after the last record", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    r, w = os.pipe()
    data = b"".join(f"{k:015d}\n".encode() for k in range(1, steps + 1))
    if len(data) > 65536:
        print("share_readers: STEPS too large for one pipe", file=sys.stderr)
        return 2
    os.write(w, data)
    os.close(w)
    pid = os.fork()
    if pid == 0:
        os._exit(child(r, steps, ms))
    h = FNV_BASIS
    for k in range(1, steps + 1):
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    _, st = os.waitpid(pid, 0)
    os.close(r)
    if os.waitstatus_to_exitcode(st) != 0:
        return 1
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
