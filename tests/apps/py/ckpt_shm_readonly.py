"""ckpt_shm_readonly.py PATH STEPS — maps PATH (a file in /dev/shm the program may only read)
shared and read-only, as a program maps another's shared segment, and checks at every step that
it reads what it read first. Prints `step N` lines, then DONE with the bytes' digest."""

import hashlib
import mmap
import sys
import time

path, steps = sys.argv[1], int(sys.argv[2])
with open(path, "rb") as f:
    view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
first = hashlib.sha256(view[:]).hexdigest()
for k in range(1, steps + 1):
    if hashlib.sha256(view[:]).hexdigest() != first:
        sys.exit(f"ckpt_shm_readonly: FAIL at step {k}: the mapping changed")
    print(f"step {k}", flush=True)
    time.sleep(0.02)
print(f"DONE {first[:16]}", flush=True)
