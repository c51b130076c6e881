"""share_openfile TAG MODE [STEPS=300] [MS=20]: one open file (no O_APPEND: one offset) written by
three processes of a tree, as a shell's `cmd > file` is by every command it runs (xargs -P,
make -j): the parent opens it, dups it, forks two children; each step every process writes its
line at the shared offset (the parent through either of its two descriptors). At the end the
parent reads the file back: every line of every process, once, whole. The parent prints `TAG
step N`, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's checksum); exits 1 on a lost,
doubled or torn line (what separate offsets after a restart give). MODE is unused."""

import os
import shutil
import sys
import tempfile
import time

from step_sum import FNV_BASIS, fnv_step


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    where = tempfile.mkdtemp(prefix="share_openfile-")
    path = os.path.join(where, "out.txt")
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    again = os.dup(out)
    kids = []
    for who in ("c0", "c1"):
        pid = os.fork()
        if pid == 0:
            for k in range(1, steps + 1):
                os.write(out, f"{who} {k}\n".encode())
                time.sleep(ms / 1000)
            os._exit(0)
        kids.append(pid)
    h = FNV_BASIS
    for k in range(1, steps + 1):
        os.write(out if k % 2 else again, f"p {k}\n".encode())
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    status = 0
    for pid in kids:
        _, st = os.waitpid(pid, 0)
        status = status or os.waitstatus_to_exitcode(st)
    with open(path) as f:
        lines = f.read().split("\n")
    shutil.rmtree(where)
    want = sorted(f"{who} {k}" for who in ("p", "c0", "c1") for k in range(1, steps + 1))
    if lines[-1] != "" or sorted(lines[:-1]) != want:
        missing = sorted(set(want) - set(lines))
        why = f"{len(lines) - 1} lines, missing {missing[:6]}"
        print(f"share_openfile: FAIL: {why}", file=sys.stderr)
        return 1
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
