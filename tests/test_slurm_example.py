"""examples/slurm/job.sbatch run without Slurm: the batch shell gets USR2 (as `--signal=B:USR2@T`
would send it), checkpoints the job and calls `scontrol requeue` (a stand-in that records the
call); everything is then killed, as Slurm does on a requeue, and the second run
(SLURM_RESTART_COUNT=1) restarts from the restart script and finishes with the output of an
uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ckpt_harness import RUN_TIMEOUT, base_env
from conftest import crac_cmd
from coord_harness import request, wait_until
from job_harness import Output, check_chain, segments_of, wait_past, wait_steps

SBATCH = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "job.sbatch"
TAGS = ["1", "2", "3", "4"]


def run_batch(tmp_path: Path, bindir: Path, app: Path, restart_count: int, label: str):
    env = base_env(
        {
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "SLURM_JOB_ID": "4242",
            "SLURM_SUBMIT_DIR": str(tmp_path),
            "SLURM_RESTART_COUNT": str(restart_count),
            "APP": str(app),
            "APP_ARGS": "300 20",
            "NPROC": str(len(TAGS)),
            "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
        }
    )
    out = Output(tmp_path / f"{label}.out", label)
    with open(out.path, "ab") as fh:
        proc = subprocess.Popen(
            ["bash", str(SBATCH)],
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
            start_new_session=True,
        )
    return proc, out


def test_slurm_example_checkpoints_requeues_and_restarts(apps, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    crac = bindir / "crac"  # the crac under test, as `crac` on PATH
    crac.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in crac_cmd()) + ' "$@"\n')
    scontrol = bindir / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "$@" >> "$SCONTROL_LOG"\n')
    for f in (crac, scontrol):
        f.chmod(0o755)
    ckpt = tmp_path / "ckpt-4242"
    log = tmp_path / "scontrol.log"
    app = apps["coord_counter"]

    proc, out1 = run_batch(tmp_path, bindir, app, 0, "run1")
    try:
        wait_steps(out1, TAGS, 40, proc)
        port = int((ckpt / "coordinator.port").read_text())
        assert request(port, "status")["num_peers"] == len(TAGS)
        before = {t: out1.last_step(t) for t in TAGS}
        os.kill(proc.pid, signal.SIGUSR2)  # Slurm, 120 s before the limit (B: = the shell)
        # The stub's `>>` creates the log before echo writes the line: wait for the whole line.
        wait_until(
            lambda: log.exists() and log.read_text().endswith("\n"), "scontrol requeue", timeout=60
        )
        after = {t: out1.last_step(t) for t in TAGS}
        assert log.read_text() == "requeue 4242\n"
        assert (ckpt / "crac_restart_script.sh").is_file()
        wait_past(out1, TAGS, after, 2, proc)
        # Slurm ends the job for the requeue: everything goes (the coordinator too).
        coord_pid = request(port, "status")["pid"]
        os.killpg(proc.pid, signal.SIGKILL)
        os.kill(coord_pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    text = out1.text()
    assert "checkpointing the job" in text and "GENERATION=1" in text, text[-2000:]
    chains = {t: [s] for t, s in segments_of(out1, TAGS, before, after).items()}

    time.sleep(0.2)
    proc2, out2 = run_batch(tmp_path, bindir, app, 1, "run2")
    try:
        status = proc2.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc2.pid, signal.SIGKILL)
        pytest.fail(f"the requeued run did not end:\n{out2.text()[-3000:]}")
    assert status == 0, out2.text()[-3000:]
    assert "run 2 of job 4242" in out2.text()
    for t, seg in segments_of(out2, TAGS, None, None).items():
        chains[t].append(seg)
    check_chain(chains, 300)
