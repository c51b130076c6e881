"""ckpt_tmpfile_mmap.py STEPS: a file with no name (tempfile.TemporaryFile: O_TMPFILE) behind two
descriptors of one open file (a dup) and a shared mapping (mmap, which keeps a dup of its own),
as numpy.memmap or joblib use one. Each step writes a byte through the first descriptor and
another through the mapping, and checks that the second descriptor's offset moved with the
first's, that it reads what the first wrote, and that the file reads what the mapping wrote.
After a restart the removed file was made again once per descriptor and the mapping was memory
of its own: none of the three saw the others. Prints `step K` and ends with
`DONE checksum=H steps=N`."""

import mmap
import os
import sys
import tempfile
import time

from step_sum import FNV_BASIS, fnv_step

SIZE = 8192


def main() -> int:
    steps = int(sys.argv[1])
    f = tempfile.TemporaryFile()
    fd = f.fileno()
    os.write(fd, b"\0" * SIZE)
    again = os.dup(fd)
    mm = mmap.mmap(fd, SIZE)
    os.lseek(fd, 0, os.SEEK_SET)
    h = FNV_BASIS
    for k in range(1, min(steps, SIZE // 2) + 1):
        os.write(fd, bytes([65 + k % 26]))
        mm[SIZE // 2 + k] = 97 + k % 26
        problems = []
        if os.lseek(again, 0, os.SEEK_CUR) != k:
            problems.append("the dup's offset did not move with the first descriptor's")
        if os.pread(again, k, 0) != bytes(65 + j % 26 for j in range(1, k + 1)):
            problems.append("the dup does not read what the first descriptor wrote")
        if os.pread(fd, k, SIZE // 2 + 1) != mm[SIZE // 2 + 1 : SIZE // 2 + k + 1]:
            problems.append("the file does not read what the mapping holds")
        if problems:
            print(f"FAIL at step {k}: {'; '.join(problems)}", file=sys.stderr)
            return 1
        h = fnv_step(h, k)
        print(f"step {k}", flush=True)
        time.sleep(0.02)
    print(f"DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
