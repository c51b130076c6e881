"""ckpt_lmdb.py — a program built on LMDB (the `lmdb` package from PyPI, its own liblmdb) for the
checkpoint tests: the database opened with writemap, so LMDB writes its pages in place through a
shared mapping of a file as large as its map (256 MiB, almost all holes), `step N` per step, a
self-check of the totals every step, and a deterministic `DONE ...` line.

Usage: python ckpt_lmdb.py DIR [STEPS] [MS]
"""

import hashlib
import sys
import time

import lmdb

KEYS = 3000


def main() -> int:
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    env = lmdb.open(sys.argv[1] + "/db", map_size=256 << 20, writemap=True)
    want = 0
    for step in range(1, steps + 1):
        with env.begin(write=True) as txn:
            for k in range(200):
                key = b"k%05d" % ((step * 37 + k) % KEYS)
                txn.put(key, b"%d" % (int(txn.get(key) or b"0") + step))
            txn.put(b"steps", b"%d" % step)
        want += 200 * step
        with env.begin() as txn:
            done = int(txn.get(b"steps"))
            total = sum(int(v) for k, v in txn.cursor() if k.startswith(b"k"))
        if done != step or total != want:
            print(
                f"ckpt_lmdb: FAIL: step {step}: steps {done} total {total} want {want}",
                file=sys.stderr,
            )
            return 1
        print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    h = hashlib.sha256()
    with env.begin() as txn:
        for k, v in txn.cursor():
            h.update(k + b"=" + v + b"\n")
    print(f"DONE steps={steps} total={want} digest={h.hexdigest()[:16]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
