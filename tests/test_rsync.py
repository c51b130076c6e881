"""rsync (a program nobody on the team wrote) copying a directory under crac: its three processes
(sender, generator, receiver) are checkpointed mid-copy by the signal to the root, SIGKILLed,
restarted from the restart script, and the copy ends with rsync's status 0 and every file equal
to its source. At the end rsync's generator tells its receiver to exit with SIGUSR2, the
checkpoint signal's number: a crac process's own signal to another, which reaches the program's
handler instead of starting a checkpoint (the copy hung there, checkpointed again and again)."""

from __future__ import annotations

import os
import random
import shutil
import signal

import pytest
from ckpt_harness import (
    RUN_TIMEOUT,
    CracProc,
    base_env,
    complete_generations,
    kill_tree,
    tree,
    wait_exit,
)
from conftest import crac_cmd, require_native
from coord_harness import free_port, wait_until
from job_harness import ScriptRun

FILES = 24
SIZE = 256 * 1024
BWLIMIT_KBPS = 1000  # about 6 s for the whole copy


def test_rsync_copy_restarted_mid_transfer_completes(tmp_path):
    require_native()
    rsync = shutil.which("rsync")
    if rsync is None:
        pytest.skip("no rsync(1) on this machine (Debian package rsync)")
    src, dst, ckptdir = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    src.mkdir()
    rng = random.Random(1)
    for i in range(FILES):
        (src / f"f{i:02d}").write_bytes(rng.randbytes(SIZE))
    argv = [rsync, "-a", f"--bwlimit={BWLIMIT_KBPS}", f"{src}/", str(dst)]
    root = CracProc(
        [*crac_cmd(), "launch", "-c", str(ckptdir), "--", *argv],
        out_dir=tmp_path / "logs",
        label="launch",
        env=base_env(),
    )
    run = None
    try:
        wait_until(lambda: len(list(dst.glob("f*"))) >= 3, "rsync's first files")
        os.kill(root.pid, signal.SIGUSR2)
        script = ckptdir / "crac_restart_script.sh"
        wait_until(script.exists, "the restart script")
        assert len(complete_generations(ckptdir)) == 3, tree(ckptdir)
        kill_tree(ckptdir, b"rsync")
        wait_exit(root)
        copied = len(list(dst.glob("f*")))
        assert copied < FILES, "the copy was over before the checkpoint: nothing was tested"
        run = ScriptRun(script, tmp_path / "logs", "restart", "-p", str(free_port()))
        status = run.proc.wait(timeout=RUN_TIMEOUT)
        assert status == 0, run.report()
        # A temporary file (.NAME.XXXXXX) the killed run started after the checkpoint stays, as
        # it would after a SIGKILL without crac: it is no file of the restarted program's.
        copies = sorted(p.name for p in dst.iterdir() if not p.name.startswith("."))
        assert copies == sorted(p.name for p in src.iterdir())
        for f in src.iterdir():
            assert (dst / f.name).read_bytes() == f.read_bytes(), f"{f.name} differs"
        # One checkpoint: the generator's SIGUSR2 to its receiver took none.
        assert set(complete_generations(ckptdir).values()) == {1}, tree(ckptdir)
    except BaseException:
        print(root.report(), run.report() if run else "", sep="\n")
        raise
    finally:
        if run is not None:
            run.kill()
        kill_tree(ckptdir, b"rsync")
        root.stop()
