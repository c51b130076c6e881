"""The process shows the program's name and arguments, not crac's: `comm` (ps, top, pidof,
pgrep) and /proc/PID/cmdline (ps -f, pgrep -f, pkill -f), after a launch and after a restart, and
no crac option (the coordinator's token included) is on its command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from ckpt_harness import build_ckpt_apps, checkpoint, kill9, launch, restart, wait_for_step
from coord_harness import free_port


@pytest.fixture(scope="module")
def counter(tmp_path_factory) -> Path:
    return build_ckpt_apps(tmp_path_factory)["ckpt_counter"]


def shown(pid: int) -> tuple[str, list[str]]:
    comm = Path(f"/proc/{pid}/comm").read_text().rstrip("\n")
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    return comm, [a.decode() for a in cmdline]


def test_name_and_command_line_after_launch_and_restart(counter, tmp_path):
    ckptdir = tmp_path / "ckpt"
    logs = tmp_path / "logs"
    token = "sEcReT-t0ken"
    # Its own port: the default one may be held by another test or a second suite beside.
    port = str(free_port())
    proc = launch(
        counter,
        ["4000", "10"],
        ckptdir,
        out_dir=logs,
        opts=["--new-coordinator", "-p", port, "--coord-token", token],
    )
    try:
        wait_for_step(proc, 2)
        comm, argv = shown(proc.pid)
        assert comm == "ckpt_counter", comm
        assert argv == [str(counter), "4000", "10"], argv
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert token.encode() not in b"\0".join(a.encode() for a in argv) + environ
        checkpoint(proc, ckptdir)
        kill9(proc)
        proc = restart(
            ckptdir, out_dir=logs, label="restart", opts=["--new-coordinator", "-p", port]
        )
        wait_for_step(proc, 1)
        comm, argv = shown(proc.pid)
        assert comm == "ckpt_counter", comm
        assert Path(argv[0]).name == "ckpt_counter" and argv[1:] == ["4000", "10"], argv
    finally:
        proc.stop()
