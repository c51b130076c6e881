"""share_pty TAG MODE [STEPS=300] [MS=20]: a pseudo-terminal between a parent and its child, as
pexpect and `script` use one: pty.fork() (the child in a session of its own, the slave its stdin,
stdout, stderr and controlling terminal). The child turns the terminal's echo off and says so; each
step the parent writes `go K` to the master and the child, checking that its stdin and stdout are
terminals and that /dev/tty opens, answers `ok K K*K`; the parent prints `TAG step K` once K's
answer came. Bytes in the pair at a checkpoint are not kept (docs/DECISIONS.md), so the parent asks
again after half a second without an answer and the child answers again: a restart that left the
ends unconnected left the parent asking for ever, and one that lost the terminal's settings echoed
the questions back (the parent fails on that). Then `TAG DONE checksum=... steps=STEPS`; exit 1 when
an answer was wrong or the child failed. MODE job: the child has a process of a foreground group of
its own answer (job()); else the child answers."""

import os
import pty
import select
import sys
import termios
import time

from step_sum import FNV_BASIS, fnv_step


def job() -> int:
    """MODE job, in the child: as a shell runs a command, the answering is done by a process of
    a group of its own, made the terminal's foreground group (a background group that reads from
    the terminal is stopped); the child waits for it."""
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        while os.tcgetpgrp(0) != os.getpgrp():  # its parent makes it the foreground
            time.sleep(0.01)
        os._exit(answer())
    os.setpgid(pid, pid)  # as the shell does too: whichever of the two comes first
    os.tcsetpgrp(0, pid)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def answer() -> int:
    attrs = termios.tcgetattr(0)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(0, termios.TCSANOW, attrs)
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words == ["end"]:
            return 0
        k = int(words[1])
        if not (os.isatty(0) and os.isatty(1)):
            print("not a terminal", flush=True)
            return 1
        try:  # its controlling terminal, as pty.fork made it, and its group in the foreground
            os.close(os.open("/dev/tty", os.O_RDWR))
            foreground = os.tcgetpgrp(0) == os.getpgrp()
        except OSError as exc:
            print(f"no controlling terminal: {exc}", flush=True)
            return 1
        if not foreground:
            print("not in the foreground", flush=True)
            return 1
        print(f"ok {k} {k * k}", flush=True)
    return 0


def ask(master: int, k: int, pending: bytearray) -> bool:
    """Asks for K's answer until it comes; False when the answer is wrong or echoed."""
    while True:
        os.write(master, f"go {k}\n".encode())
        while select.select([master], [], [], 0.5)[0]:
            pending += os.read(master, 4096)
            while b"\n" in pending:
                line, _, rest = bytes(pending).partition(b"\n")
                pending[:] = rest
                words = line.decode(errors="replace").split()
                if words[:1] != ["ok"] or len(words) != 3:
                    print(f"share_pty: FAIL: {line!r} from the child", file=sys.stderr)
                    return False
                if int(words[1]) == k:
                    return int(words[2]) == k * k
                if int(words[1]) > k:
                    print(f"share_pty: FAIL: an answer for {words[1]} to {k}", file=sys.stderr)
                    return False


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    pid, master = pty.fork()
    if pid == 0:
        os._exit(job() if sys.argv[2] == "job" else answer())
    pending = bytearray()
    while b"ready\r\n" not in pending:  # echo is off from there on
        pending += os.read(master, 4096)
    del pending[: pending.index(b"ready\r\n") + 7]
    h = FNV_BASIS
    for k in range(1, steps + 1):
        if not ask(master, k, pending):
            return 1
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    os.write(master, b"end\n")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        print(f"share_pty: FAIL: the child ended with {status}", file=sys.stderr)
        return 1
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
