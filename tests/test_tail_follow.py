"""`tail -f` (GNU coreutils: a program nobody on the team wrote) following a log under crac: the
log, longer than the 64 KiB a checkpoint hashes whole of a file the program reads, is appended to
while the program runs, between its checkpoint and its restart, and after the restart. The
restart is not refused for the log's growth (it was, as a changed input), and what the
restarted `tail` prints is exactly the lines added after the checkpoint, none lost or twice."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from ckpt_harness import WAIT_TIMEOUT, checkpoint, kill9, launch, restart
from coord_harness import wait_until

FIRST = 8000  # lines at the start: 88 KB


def _append(log: Path, start: int, stop: int) -> None:
    with log.open("a") as f:
        f.write("".join(f"line {i:05d}\n" for i in range(start, stop)))


def test_tail_follows_a_log_across_a_restart(tmp_path):
    tail = shutil.which("tail")
    if tail is None:
        pytest.skip("no tail(1) on this machine")
    log, ckptdir = tmp_path / "log.txt", tmp_path / "ckpt"
    _append(log, 0, FIRST)
    proc = launch(tail, ["-f", str(log)], ckptdir, out_dir=tmp_path)
    try:
        wait_until(lambda: f"line {FIRST - 1:05d}" in proc.stdout_text(), "tail's first lines")
        _append(log, FIRST, FIRST + 50)
        wait_until(lambda: f"line {FIRST + 49:05d}" in proc.stdout_text(), "tail following")
        gen = checkpoint(proc, ckptdir)
        kill9(proc)
    finally:
        proc.stop()
    _append(log, FIRST + 50, FIRST + 100)
    again = restart(gen, out_dir=tmp_path, label="restart")
    try:
        wait_until(lambda: "appended to since the checkpoint" in again.stderr_text(), "the note")
        # The lines added while it was down have no inotify event of their own in the restored
        # watch: the next append wakes it, as a stopped tail would be woken by the queued ones.
        # One line at a time until one shows: an append before the watch is back wakes nobody.
        last = FIRST + 100
        deadline = time.monotonic() + WAIT_TIMEOUT
        while f"line {last - 1:05d}" not in again.stdout_text():
            assert time.monotonic() < deadline and again.poll() is None, again.report()
            _append(log, last, last + 1)
            last += 1
            time.sleep(0.2)
        wait_until(lambda: f"line {last - 1:05d}" in again.stdout_text(), "tail's last line")
        expected = [f"line {i:05d}" for i in range(FIRST + 50, last)]
        assert again.stdout_text().splitlines() == expected, again.report()
    finally:
        again.stop()
