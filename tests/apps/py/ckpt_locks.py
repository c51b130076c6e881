"""ckpt_locks.py — a program holding file locks of every kind for the checkpoint tests: an fcntl
write lock (lockf) on a pid file opened write-only, an fcntl read lock on bytes 10-19 of a data
file, an OFD write lock and a shared flock. Every step it checks, in /proc/self/fdinfo, that it
still holds each (a lock lost at a checkpoint or a restart fails it), and prints `step N`; then a
deterministic `DONE ...` line. With `fork`, a child shares the open files of the OFD lock and the
flock (both belong to the open file, so the child lists them too) and sleeps through the steps.

Usage: python ckpt_locks.py DIR [STEPS] [MS] [fork]
"""

import fcntl
import os
import struct
import sys
import time


def ofd_lock(fd: int) -> None:
    # struct flock on x86-64: l_type, l_whence (short), l_start, l_len (off_t), l_pid (int)
    whole = struct.pack("hh4xqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, whole)


def held(fd: int) -> list[str]:
    """The locks fdinfo shows on fd: 'KIND RW START END' each."""
    with open(f"/proc/self/fdinfo/{fd}") as f:
        return [
            " ".join(line.split()[2:3] + line.split()[4:5] + line.split()[7:9])
            for line in f
            if line.startswith("lock:")
        ]


def main() -> int:
    d = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    ms = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    forking = len(sys.argv) > 4 and sys.argv[4] == "fork"
    pid_file = open(f"{d}/app.pid", "w")  # noqa: SIM115 - held for the whole run
    pid_file.write("1234\n")
    pid_file.flush()
    fcntl.lockf(pid_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    data = open(f"{d}/data", "w+")  # noqa: SIM115
    data.write("x" * 100)
    data.flush()
    fcntl.lockf(data, fcntl.LOCK_SH | fcntl.LOCK_NB, 10, 10)
    ofd = os.open(f"{d}/ofd", os.O_RDWR | os.O_CREAT, 0o600)
    ofd_lock(ofd)
    shared = os.open(f"{d}/shared", os.O_RDONLY | os.O_CREAT, 0o600)
    fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)
    want = {
        pid_file.fileno(): ["POSIX WRITE 0 EOF"],
        data.fileno(): ["POSIX READ 10 19"],
        ofd: ["OFDLCK WRITE 0 EOF"],
        shared: ["FLOCK READ 0 EOF"],
    }
    child = os.fork() if forking else -1
    if child == 0:
        time.sleep(steps * ms / 1000)
        os._exit(0)
    for step in range(1, steps + 1):
        for fd, locks in want.items():
            if held(fd) != locks:
                print(f"ckpt_locks: FAIL: step {step}: fd {fd} holds {held(fd)}", file=sys.stderr)
                return 1
        print(f"step {step}", flush=True)
        time.sleep(ms / 1000)
    if child > 0 and os.waitpid(child, 0)[1] != 0:
        print("ckpt_locks: FAIL: the child failed", file=sys.stderr)
        return 1
    print(f"DONE steps={steps} locks={sum(len(v) for v in want.values())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
