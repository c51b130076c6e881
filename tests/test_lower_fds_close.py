"""A program that closes every descriptor one by one with close() (a daemon, a close_fds child
without close_range: tests/apps/ckpt_closeall.c) leaves the lower half's own open: close answers
EBADF for them (docs/DECISIONS.md, branch sigs). Here the one seen without a coordinator: the
flock on the process's image directory that makes it the directory's only writer
(loader/image/image_lineage.c) lasts while the program goes on closing everything."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ckpt_harness import checkpoint, kill9, launch, run_cycles, wait_for_step


def _flock_holders(path: Path) -> set[int]:
    """Pids holding an flock on PATH, from /proc/locks (`N: FLOCK ADVISORY WRITE PID MAJ:MIN:INO
    ...`)."""
    st = os.stat(path)
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[5] == want:
            holders.add(int(f[4]))
    return holders


def test_closing_every_descriptor_keeps_the_image_directory_lock(apps, tmp_path):
    ckptdir = tmp_path / "ckpt"
    proc = launch(apps["ckpt_closeall"], ["400", "25"], ckptdir, out_dir=tmp_path)
    try:
        wait_for_step(proc, 3)
        gen = checkpoint(proc, ckptdir)
        assert proc.pid in _flock_holders(gen.parent), "no lock after the checkpoint"
        # Published: now every descriptor from 3 up to the limit, one by one, at the next step.
        os.kill(proc.pid, signal.SIGUSR1)
        wait_for_step(proc, proc.last_step() + 3)
        assert proc.pid in _flock_holders(gen.parent), (
            "the program's close() loop closed the lower half's lock on its image directory"
        )
        # And the next checkpoint still finds what it needs.
        checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()


def test_closing_every_descriptor_while_checkpoints_are_taken(apps, tmp_path):
    """busy: the program does nothing but close every descriptor, one by one, while checkpoints
    are taken and published. The manager's short-lived descriptors (directory scans, image files,
    the files it hashes) are opened at the numbers the program's close() is trapped at, and held
    from it until released: each checkpoint is complete and restarts."""
    run_cycles(apps["ckpt_closeall"], ["120", "25", "busy"], tmp_path, cycles=3)
