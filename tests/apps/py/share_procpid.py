"""share_procpid TAG joblib [STEPS=300] [MS=20]: a program that reads /proc by the pids Python
gives it, as psutil and joblib do: each step it maps a function over a few numbers with
`joblib.Parallel(n_jobs=2)` (loky's reusable workers, spawned, which check their own memory through
`psutil.Process(os.getpid())`), reads its own `/proc/<getpid()>/cwd` and `stat`, and asks psutil
for the status and command line of a forked child (`/proc/<child.pid>/...`), for its own children
(a listing of /proc and each process's parent in its `stat`), its child's parent and its own
threads (`/proc/<pid>/task`); every tenth step procps' `pgrep -P <getpid()>` names the child.
`psutil.Process` objects made before the first step, of the child and of itself, must still be
running each step, with the start times they had (psutil's test against a reused pid).
After a restart the kernel's ids are new; what the program reads must still name these processes
by the ids it knows. Prints `TAG step N`, then `TAG DONE checksum=... steps=STEPS`
(ckpt_counter's checksum). Exits non-zero on a wrong result."""

import multiprocessing
import os
import subprocess
import sys
import threading
import time

import psutil
from joblib import Parallel, delayed
from step_sum import FNV_BASIS, fnv_step


def work(x: int) -> int:
    return x * x + 7


def idle(conn) -> None:  # noqa: ANN001 - a Connection
    conn.recv()


def fail(k: int, what: str) -> int:
    print(f"share_procpid: FAIL at step {k}: {what}", file=sys.stderr, flush=True)
    return 1


def main() -> int:
    tag = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context("fork").Process(target=idle, args=(theirs,))
    child.start()
    # Kept across steps, as a monitor of its children keeps them: after a restart they must
    # still be the same processes to psutil (pid and start time), not "PID reused".
    kept = [psutil.Process(child.pid), psutil.Process(os.getpid())]
    started = [p.create_time() for p in kept]
    h = FNV_BASIS
    for k in range(1, steps + 1):
        for p, start in zip(kept, started):
            if not p.is_running() or psutil.Process(p.pid).create_time() != start:
                return fail(k, f"psutil says {p.pid} is not the process that started at {start}")
        xs = list(range(k, k + 4))
        got = Parallel(n_jobs=2)(delayed(work)(x) for x in xs)
        if got != [work(x) for x in xs]:
            return fail(k, f"joblib gave {got}")
        me = os.getpid()
        if os.readlink(f"/proc/{me}/cwd") != os.getcwd():
            return fail(k, f"/proc/{me}/cwd is {os.readlink(f'/proc/{me}/cwd')}")
        with open(f"/proc/{me}/stat") as f:
            if f.read().split(") ", 1)[1][0] not in "RS":
                return fail(k, f"/proc/{me}/stat says it is not running")
        kid = psutil.Process(child.pid)
        if kid.status() not in ("sleeping", "running") or "python" not in kid.cmdline()[0]:
            return fail(k, f"psutil says the child {child.pid} is {kid.status()}")
        if psutil.Process(me).memory_info().rss <= 0:
            return fail(k, "psutil says it has no memory")
        children = [p.pid for p in psutil.Process(me).children()]
        if child.pid not in children or kid.ppid() != me or str(me) not in os.listdir("/proc"):
            return fail(
                k, f"psutil says its children are {children}, the child's parent {kid.ppid()}"
            )
        with open(f"/proc/{me}/status") as f:
            fields = dict(line.split(":\t", 1) for line in f.read().splitlines())
        if fields["Pid"].strip() != str(me) or fields["Tgid"].strip() != str(me):
            return fail(k, f"/proc/{me}/status says Pid {fields['Pid']} Tgid {fields['Tgid']}")
        if threading.get_native_id() not in [t.id for t in psutil.Process(me).threads()]:
            return fail(k, f"thread {threading.get_native_id()} not among its threads")
        if k % 10 == 0:
            found = subprocess.run(
                ["pgrep", "-P", str(me)],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            if str(child.pid) not in found:
                return fail(k, f"pgrep -P {me} found {found}, not the child {child.pid}")
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        time.sleep(ms / 1000)
    ours.send(None)
    child.join()
    if child.exitcode != 0:
        return fail(steps, f"the child ended with {child.exitcode}")
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
