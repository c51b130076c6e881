"""The acceptance programs (DMTCP's acceptance set; docs/ARCHITECTURE.md "Testing") through two
checkpoint -> SIGKILL -> restart cycles each: the stitched output must equal an uninterrupted native
run's line for line, each restart must resume at the checkpointed step, and every program checks
itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ckpt_harness import CKPT_PROGRAMS, build_ckpt_apps, launch_image, run_cycles

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


# ckpt_mmap's shared file at 10 MiB, over the 4 MiB whose pages a checkpoint keeps by default.
LARGE_SHARED = ["{work}", "300", "2560"]


def test_large_shared_file_put_back_with_ckpt_open_files(ckpt_apps, tmp_path):
    """With --ckpt-open-files a checkpoint keeps the pages of a file of any size the program
    writes through a shared mapping (here with no descriptor left open) and the restart puts them
    back: the program's check of each page before it writes it holds through two restarts. It
    failed before, finding what the killed run had written after the checkpoint."""
    run_cycles(ckpt_apps["ckpt_mmap"], LARGE_SHARED, tmp_path, launch_opts=["--ckpt-open-files"])


def test_large_shared_file_is_named_at_each_checkpoint(ckpt_apps, tmp_path):
    """Without the option the file is the state, as it is: the checkpoint says, on stderr and in
    the manifest's not_saved, that what the program writes through the mapping after it stays in
    the file at a restart (its mtime cannot tell: pages already dirty are written without a
    fault). Before, nothing said so."""
    ckptdir, logs, work = tmp_path / "ckpt", tmp_path / "logs", tmp_path / "work"
    work.mkdir()
    args = [str(work), *LARGE_SHARED[1:]]
    gen = launch_image(ckpt_apps["ckpt_mmap"], args, ckptdir, out_dir=logs)
    lost = json.loads((gen / "MANIFEST.json").read_text())["not_saved"]
    assert any(f"{work}/shared.bin (10 MiB) is mapped shared and written" in x for x in lost), lost
    assert "--ckpt-open-files" in (logs / "launch.err").read_text()
