"""What a checkpoint cannot save (a packet socket) is said at checkpoint time, once, on stderr, and
`crac verify` and `crac inspect` show it from the manifest's "not_saved"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ckpt_harness import base_env, checkpoint, launch, restart, wait_exit, wait_for_step
from conftest import APPS_DIR, crac_cmd, describe


def test_losses_are_said_once_and_shown(tmp_path):
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    program = APPS_DIR / "py" / "ckpt_losses.py"
    probe = subprocess.run([sys.executable, str(program), "0"], capture_output=True, text=True)
    if probe.returncode == 3:
        pytest.skip(probe.stdout.strip())
    proc = launch(Path(sys.executable), [str(program), "100000"], ckptdir, out_dir=logs)
    try:
        wait_for_step(proc, 5)
        gen1 = checkpoint(proc, ckptdir)
        gen2 = checkpoint(proc, ckptdir)
    finally:
        proc.stop()
    wait_exit(proc)
    warnings = [ln for ln in proc.stderr_text().splitlines() if ln.startswith("crac: warning:")]
    sockets = [w for w in warnings if "socket:" in w and "/dev/null" in w]
    assert len(sockets) == 2, proc.report()  # once each, not per checkpoint
    for gen in (gen1, gen2):
        lost = json.loads((gen / "MANIFEST.json").read_text())["not_saved"]
        assert len(lost) == 2 and all("socket:" in x for x in lost), lost
    env = base_env()
    cp = subprocess.run(
        [*crac_cmd(), "verify", "--json", str(gen2)], capture_output=True, env=env, timeout=120
    )
    assert cp.returncode == 0, describe(cp)
    checks = json.loads(cp.stdout)[0]["checks"]
    assert sum(c["name"] == "not saved" and c["status"] == "WARN" for c in checks) == 2, checks
    cp = subprocess.run(
        [*crac_cmd(), "inspect", str(gen2)], capture_output=True, env=env, timeout=120
    )
    assert cp.stdout.decode().count("not saved:") == 2, describe(cp)
    # A restart says what the program runs without, in one line, before the program runs.
    proc = restart(gen2, out_dir=logs, label="restart")
    try:
        wait_for_step(proc, 1)
        said = [ln for ln in proc.stderr_text().splitlines() if "could not save 2" in ln]
        assert len(said) == 1 and "socket:" in said[0], proc.report()
    finally:
        proc.stop()
