"""crac_py.api in a Python program: it checkpoints itself at a step through crac.checkpoint(),
is killed, restarts and continues; its before_checkpoint and after_restart hooks run in order;
a buffer it excluded is not in the image (and reads as zeros after the restart); outside crac
every call is a no-op."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import (
    base_env,
    complete_generations,
    kill9,
    launch,
    restart,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR, crac_cmd, describe

PROGRAM = APPS_DIR / "py" / "ckpt_api.py"
STEPS, CKPT_AT = 300, 40


def test_outside_crac_every_call_is_a_no_op(tmp_path):
    log = tmp_path / "log"
    cp = subprocess.run(
        [sys.executable, str(PROGRAM), str(STEPS), str(CKPT_AT), str(log), "1"],
        capture_output=True,
        env=base_env(),
        timeout=120,
    )
    assert cp.returncode == 0, describe(cp)
    assert log.read_text().splitlines() == [
        "excluded 1048576",
        f"checkpoint at {CKPT_AT}: None (generation 0)",
    ]


@pytest.mark.parametrize("exclude_mib", [0, 64])
def test_program_checkpoints_itself_and_restarts(tmp_path, exclude_mib):
    log, ckptdir, logs = tmp_path / "log", tmp_path / "ckpt", tmp_path / "logs"
    args = [str(PROGRAM), str(STEPS), str(CKPT_AT), str(log), str(exclude_mib)]
    proc = launch(Path(sys.executable), args, ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, CKPT_AT + 5)
        gens = complete_generations(ckptdir)
        assert len(gens) == 1, gens
        kill9(proc)
    finally:
        proc.stop()
    proc = restart(ckptdir, out_dir=logs, label="restart")
    assert wait_exit(proc) == 0, proc.report()
    lines = proc.lines()
    assert lines[0] == f"step {CKPT_AT}" and lines[-1] == f"DONE steps={STEPS}", proc.report()
    excluded = [f"excluded {exclude_mib << 20}"] if exclude_mib else []
    assert log.read_text().splitlines() == [
        *excluded,
        "before 1",
        "before 2",
        f"checkpoint at {CKPT_AT}: checkpoint (generation 1)",
        "after 1",
        "after 2",
        f"checkpoint at {CKPT_AT}: restart (generation 1)",
    ]
    if exclude_mib:
        (core_file,) = ckptdir.glob("ckpt_*/gen-*/upper.core")
        core = core_file.stat().st_blocks * 512
        assert core < (exclude_mib << 20), f"upper.core holds {core} bytes: the buffer was saved"
        cp = subprocess.run(
            [*crac_cmd(), "inspect", str(core_file.parent)],
            capture_output=True,
            env=base_env(),
            timeout=120,
        )
        assert f"(MADV_DONTDUMP): {exclude_mib:.1f} MiB" in cp.stdout.decode(), describe(cp)
