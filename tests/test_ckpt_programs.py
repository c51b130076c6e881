"""The acceptance programs (DMTCP's acceptance set; docs/ARCHITECTURE.md "Testing") through two
checkpoint -> SIGKILL -> restart cycles each: the stitched output must equal an uninterrupted native
run's line for line, each restart must resume at the checkpointed step, and every program checks
itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ckpt_harness import CKPT_PROGRAMS, build_ckpt_apps, run_cycles

# name -> its arguments (`{work}` is a fresh directory per run). Each runs ~2-4 s natively.
PROGRAMS = {
    "ckpt_counter": [],
    "ckpt_busy_file": ["{work}/busy.txt"],
    "ckpt_threads": [],
    "ckpt_signals": [],
    "ckpt_timers": [],
    "ckpt_env_cwd": ["{work}"],
    "ckpt_tids": [],
    "ckpt_files": ["{work}"],
    "ckpt_mmap": ["{work}"],
    # MADV_DONTFORK / MADV_WIPEONFORK memory is saved, and the advice holds after a restart
    "ckpt_forkadvice": [],
    # longer: its image is 1 GiB (sparse) and is published while the program runs on
    "ckpt_sparse": ["400"],
    "ckpt_detached": [],
    "ckpt_poll": [],
    # the checkpoint signal never shows to the program, nor reaches its own handler
    "ckpt_sighide": [],
    "ckpt_sigown": [],
    # queued signals keep their siginfo and count across a checkpoint
    "ckpt_sigqueue": [],
    # and so do signals queued to one thread (pthread_sigqueue, pthread_kill)
    "ckpt_sigthread": [],
    # a close() of every descriptor, one by one, leaves crac's own open
    "ckpt_closeall": [],
    # /proc/<getpid()>/... by libc and by raw system calls, after a restart too
    "ckpt_procpid": [],
}


@pytest.fixture(scope="session")
def ckpt_apps(tmp_path_factory):
    return build_ckpt_apps(tmp_path_factory)


def test_every_program_is_listed():
    assert sorted(CKPT_PROGRAMS) == sorted(PROGRAMS)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_two_cycles(name, ckpt_apps, tmp_path):
    run_cycles(ckpt_apps[name], PROGRAMS[name], tmp_path, cycles=2)


def test_shared_file_gone_at_restart_is_made_again(ckpt_apps, tmp_path):
    """ckpt_mmap's DIR/shared.bin, which only its shared mapping keeps, is gone while the job is
    down: removed before the first restart (as a JVM removes a dead pid's hsperfdata), its whole
    directory before the second (another node). Each restart makes it again as the checkpoint saw
    it; the program's read of the file at its end checks every page."""
    cycle = iter(range(2))

    def lose_the_file(work: Path) -> None:
        if next(cycle) == 0:
            (work / "shared.bin").unlink()
        else:
            shutil.rmtree(work)

    run_cycles(ckpt_apps["ckpt_mmap"], ["{work}"], tmp_path, cycles=2, between=lose_the_file)
