"""share_coproc TAG MODE [STEPS=300] [MS=20]: asyncio drives a `cat` coprocess (fork + exec of a
program nobody on the team wrote) through two pipes, one line a step, each echo checked; the
echoes accumulate in a tempfile.TemporaryFile (an O_TMPFILE file, never linked), checked whole
at the end. Prints `TAG step N`, then `TAG DONE checksum=... steps=STEPS` (ckpt_counter's
checksum); exits non-zero on a wrong echo or file. MODE: "asyncio" (the default child watcher
of Python 3.11, a thread that waits), "asyncio-pidfd" (asyncio.PidfdChildWatcher, Python
3.12's default: the loop polls a pidfd of `cat` until it ends)."""

import asyncio
import sys
import tempfile

from step_sum import FNV_BASIS, fnv_step


async def main() -> int:
    tag = sys.argv[1]
    if sys.argv[2] == "asyncio-pidfd" and sys.version_info < (3, 12):
        watcher = asyncio.PidfdChildWatcher()
        watcher.attach_loop(asyncio.get_running_loop())
        asyncio.set_child_watcher(watcher)
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    ms = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    echoes = tempfile.TemporaryFile()
    cat = await asyncio.create_subprocess_exec(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert cat.stdin is not None and cat.stdout is not None
    h = FNV_BASIS
    for k in range(1, steps + 1):
        line = f"line {k} {'y' * (k % 50)}\n".encode()
        cat.stdin.write(line)
        await cat.stdin.drain()
        got = await cat.stdout.readline()
        if got != line:
            print(f"share_coproc: FAIL at step {k}: {got!r}", file=sys.stderr)
            return 1
        echoes.write(got)
        h = fnv_step(h, k)
        print(f"{tag} step {k}", flush=True)
        await asyncio.sleep(ms / 1000)
    cat.stdin.close()
    status = await cat.wait()
    echoes.seek(0)
    want = b"".join(f"line {k} {'y' * (k % 50)}\n".encode() for k in range(1, steps + 1))
    if status != 0 or echoes.read() != want:
        print(f"share_coproc: FAIL: cat ended {status} or the file differs", file=sys.stderr)
        return 1
    print(f"{tag} DONE checksum={h:016x} steps={steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
