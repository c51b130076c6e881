"""share_pty TAG MODE [STEPS=300] [MS=20]: a pseudo-terminal between a parent and its child, as
pexpect and `script` use one: pty.fork() (the child in a session of its own, the slave its stdin,
stdout, stderr and controlling terminal). The child turns the terminal's echo off and says so; each
step the parent writes `go K` to the master and the child, checking that its stdin and stdout are
terminals, that /dev/tty opens and that it is in the foreground, answers `ok K K*K`, and 5 ms later
`late K`, which waits in the pair while the parent sleeps between steps (where checkpoints fall):
the parent fails on an answer that comes before the previous step's late line. What the slave has
not read is not kept (docs/DECISIONS.md), so the parent asks again after half a second without an
answer and the child answers again. A restart that left the ends unconnected left the parent asking
for ever, one that lost the terminal's settings echoed the questions back, one that lost what the
master had not read lost a late line (the parent fails on both). Then `TAG DONE checksum=...
steps=STEPS`; exit 1 when an answer was wrong or the child failed. MODE job: the child has a process
of a foreground group of its own answer (job()); else the child answers."""

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
        time.sleep(0.005)  # the parent has its answer: this line waits in the pair meanwhile
        print(f"late {k}", flush=True)
    return 0


def ask(master: int, k: int, pending: bytearray) -> bool:
    """Asks for K's answer until it comes; False when the answer is wrong or echoed, or comes
    before the child's `late K-1` (lost: it waited in the pair while a checkpoint was taken)."""
    late = k == 1
    while True:
        os.write(master, f"go {k}\n".encode())
        while select.select([master], [], [], 0.5)[0]:
            pending += os.read(master, 4096)
            while b"\n" in pending:
                line, _, rest = bytes(pending).partition(b"\n")
                pending[:] = rest
                words = line.decode(errors="replace").split()
                said = words[0] if len(words) in (2, 3) and words[1].isdigit() else ""
                if said not in ("ok", "late") or (said == "ok") != (len(words) == 3):
                    print(f"share_pty: FAIL: {line!r} from the child", file=sys.stderr)
                    return False
                j = int(words[1])
                if said == "late":  # again after each answer asked again: only K-1's counts
                    late = late or j == k - 1
                    continue
                if j == k and not late:
                    print(
                        f"share_pty: FAIL: the answer to {k} before `late {k - 1}`", file=sys.stderr
                    )
                    return False
                if j == k:
                    return int(words[2]) == k * k
                if j > k:
                    print(f"share_pty: FAIL: an answer for {j} to {k}", file=sys.stderr)
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
