"""tree_daemon TAG RELEASE [MAIN_STEPS=40] [MS=20]: a daemon's double fork (fork, setsid, fork,
the middle process exits) and a main process that goes on. The main process prints
`TAG.m step N` MAIN_STEPS times, then `TAG.m DONE steps=MAIN_STEPS` and exits 0; the daemon
prints `TAG.d step N` until the file RELEASE exists (and at least MAIN_STEPS times), then
`TAG.d DONE steps=N`. As natively, whatever started the main process does not wait for the
daemon."""

import os
import sys
import time


def say(line: str) -> None:
    """One write per line: with PYTHONUNBUFFERED, print() writes the line and its newline
    apart, and the other process's line may land between them."""
    os.write(1, f"{line}\n".encode())


def main() -> int:
    tag, release = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            k = 0
            while k < steps or not os.path.exists(release):
                k += 1
                say(f"{tag}.d step {k}")
                time.sleep(ms / 1000)
            say(f"{tag}.d DONE steps={k}")
        os._exit(0)
    _, status = os.wait()
    if status != 0:
        print(f"tree_daemon: the middle process ended with {status}", file=sys.stderr)
        return 1
    for k in range(1, steps + 1):
        say(f"{tag}.m step {k}")
        time.sleep(ms / 1000)
    say(f"{tag}.m DONE steps={steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
