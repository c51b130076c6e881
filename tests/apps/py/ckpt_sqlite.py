"""ckpt_sqlite.py — a program of Python's standard library for the checkpoint tests: a SQLite
database in WAL mode (its write-ahead log grows, and every third step is folded back into the
database and the log truncated; the index of the log is a file SQLite maps shared), `step N` per
step, a deterministic `DONE ...` line, and a self-check of the rows every step. With BIG_MIB, the
database first gets a table of that many 64 KiB rows, far more than SQLite's page cache holds, and
each step changes one of them from what it holds (its first byte plus the step): a row read from a
file the killed run changed after the checkpoint is not what the program's memory expects.

Usage: python ckpt_sqlite.py DIR [STEPS] [MS] [BIG_MIB]
"""

import sqlite3
import sys
import time


def main() -> int:
    path = sys.argv[1] + "/data.db"
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    big = int(sys.argv[4]) * 16 if len(sys.argv) > 4 else 0  # 64 KiB rows
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("create table rows(k integer primary key, v text)")
    db.execute("create table total(id integer primary key, n integer, s integer)")
    db.execute("insert into total values (1, 0, 0)")
    db.execute("create table big(k integer primary key, b blob)")
    db.execute("begin")
    for k in range(1, big + 1):
        db.execute("insert into big values (?, ?)", (k, bytes([k % 251]) * 65536))
    db.execute("commit")
    expect = {k: k % 251 for k in range(1, big + 1)}
    for step in range(1, steps + 1):
        db.execute("begin immediate")
        if big:
            k = step * 7 % big + 1
            have = db.execute("select b from big where k = ?", (k,)).fetchone()[0][0]
            if have != expect[k]:
                print(
                    f"ckpt_sqlite: FAIL: step {step}: big row {k} holds {have}, not {expect[k]}",
                    file=sys.stderr,
                )
                return 1
            expect[k] = (have + step) % 256
            db.execute("update big set b = ? where k = ?", (bytes([expect[k]]) * 65536, k))
        db.execute("insert into rows(v) values (?)", (f"row {step} " + "x" * (step % 97),))
        db.execute("update total set n = n + 1, s = s + ? where id = 1", (step * step,))
        db.execute("commit")
        if step % 3 == 0:
            db.execute("pragma wal_checkpoint(TRUNCATE)")
        n, s = db.execute("select n, s from total").fetchone()
        count = db.execute("select count(*) from rows").fetchone()[0]
        want = sum(k * k for k in range(1, step + 1))
        if n != step or count != step or s != want:
            print(f"ckpt_sqlite: FAIL: step {step}: n {n} rows {count} sum {s}", file=sys.stderr)
            return 1
        print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    check = db.execute("pragma integrity_check").fetchone()[0]
    last = db.execute("select v from rows order by k desc limit 1").fetchone()[0]
    print(
        f"DONE rows={steps} integrity={check} last={last.split()[1]} big={sum(expect.values())}",
        flush=True,
    )
    return 0 if check == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
