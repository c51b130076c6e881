"""usr2_group.py: makes its own process group, forks a child, then sends SIGUSR2 (crac's checkpoint
signal's number) to the whole group, once by kill(0) and once by killpg(): each process's handler
must run twice. Prints `parent usr2 2` and `child usr2 2` once each process's handler has run
twice, then `DONE`; exits non-zero if a handler did not run within 60 s."""

import os
import signal
import sys
import time

runs = 0


def on_usr2(_sig: int, _frame: object) -> None:
    global runs
    runs += 1


def wait_runs(n: int, who: str) -> None:
    deadline = time.monotonic() + 60
    while runs < n:
        if time.monotonic() > deadline:
            print(f"{who}: the handler ran {runs} times, not {n}", file=sys.stderr, flush=True)
            os._exit(1)
        time.sleep(0.01)
    print(f"{who} usr2 {n}", flush=True)


def child_acked(fd: int) -> None:
    """The child is ready, or its handler has run once more (a classic signal sent again before
    the first ran would be merged into it)."""
    if os.read(fd, 1) != b"k":
        print("parent: the child is gone", file=sys.stderr, flush=True)
        os._exit(1)


def main() -> int:
    os.setpgid(0, 0)  # a group of its own: kill(0) must not reach whoever started it
    signal.signal(signal.SIGUSR2, on_usr2)
    acks, ack = os.pipe()
    child = os.fork()
    if child == 0:
        os.write(ack, b"k")  # past Python's after-fork reset of the signals it had noted
        for n in (1, 2):
            wait_runs(n, "child")
            os.write(ack, b"k")
        os._exit(0)
    child_acked(acks)
    os.kill(0, signal.SIGUSR2)
    wait_runs(1, "parent")
    child_acked(acks)
    os.killpg(os.getpgrp(), signal.SIGUSR2)
    wait_runs(2, "parent")
    child_acked(acks)
    _, status = os.waitpid(child, 0)
    if status != 0:
        print(f"parent: the child ended with status {status}", file=sys.stderr, flush=True)
        return 1
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
