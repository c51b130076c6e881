"""The upper half's vDSO (docs/DECISIONS.md "The upper half's vDSO"): the program reads the clocks
through the proxy at the real vDSO's speed, and a thread a checkpoint stops inside the real vDSO
starts its call again, so the restarted process (whose vDSO is elsewhere) goes on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ckpt_harness import (
    CracProc,
    base_env,
    build_app,
    checkpoint,
    fail,
    kill9,
    launch,
    restart,
    run_cycles,
    wait_exit,
    wait_for_step,
)
from conftest import APPS_DIR

ROLLED_BACK = "was inside the vDSO: its call starts again"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_app(tmp_path_factory, APPS_DIR / "ckpt_vdso.c")


@pytest.mark.parametrize("mode", [[], ["signals"], ["storm"]], ids=["plain", "signals", "storm"])
def test_two_cycles(app: Path, tmp_path: Path, mode: list[str]) -> None:
    """Also with a SIGUSR1 to each reader every step: the program's handler never sees its thread
    inside the real vDSO (the signal wrapper starts the call again from the proxy's stub). With a
    storm of SIGUSR1s, one is often pending when the checkpoint's suspend signal comes: the kernel
    delivers both at once, the suspend signal inside the SIGUSR1 wrapper before it has started
    the call again (the restart then returned into the old process's vDSO: SIGSEGV) - unless the
    wrapper holds the suspend signal off until it has."""
    run_cycles(app, ["120", *mode], tmp_path, cycles=2)


def test_checkpoint_inside_the_vdso_restarts(app: Path, tmp_path: Path) -> None:
    """Checkpoints until one stopped a thread inside the real vDSO (the two readers spend most
    of their time there), then a restart from that generation goes on reading the clocks for 20
    more steps, every reading checked (without the rewind it died with SIGSEGV at once)."""
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    env = base_env({"CRAC_DEBUG": "1"})
    proc: CracProc = launch(app, ["100000"], ckptdir, out_dir=logs, env=env)
    try:
        gen = None
        for _ in range(20):
            wait_for_step(proc, proc.last_step() + 2)
            gen = checkpoint(proc, ckptdir)
            if ROLLED_BACK in proc.stderr_text():
                break
        else:
            fail("20 checkpoints and no thread was stopped inside the vDSO", proc)
        kill9(proc)
        done_at = proc.last_step()
        proc = restart(gen, out_dir=logs, label="restart", env=env, opts=[])
        wait_for_step(proc, done_at + 20)
        os.kill(proc.pid, 9)
        status = wait_exit(proc)
        if status != -9:
            fail(f"the restarted program ended on its own (status {status})", proc)
        if "FAIL" in proc.stderr_text():
            fail("the restarted program found a bad clock reading", proc)
    finally:
        proc.stop()


# loader/boot/vdso_proxy.h: VDSO_PROXY_ADDR, the top of W less four pages.
PROXY_ADDR = 0x300000000000 - 4 * 4096


def proxy_mapped(pid: int) -> bool:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return any(int(line.split("-")[0], 16) == PROXY_ADDR for line in maps.splitlines())


@pytest.mark.parametrize("off", [False, True], ids=["proxy", "CRAC_NO_VDSO"])
def test_proxy_switch(app: Path, tmp_path: Path, off: bool) -> None:
    """The proxy is mapped at its place in W, and not at all with CRAC_NO_VDSO=1 (the upper libc
    then makes system calls, as before it existed); the program checkpoints either way."""
    env = base_env({"CRAC_NO_VDSO": "1"} if off else None)
    ckptdir, logs = tmp_path / "ckpt", tmp_path / "logs"
    proc = launch(app, ["20"], ckptdir, out_dir=logs, env=env)
    try:
        wait_for_step(proc, 5)
        if proxy_mapped(proc.pid) == off:
            fail(f"the proxy is {'mapped' if off else 'missing'} at {PROXY_ADDR:#x}", proc)
        checkpoint(proc, ckptdir)
        if wait_exit(proc) != 0:
            fail("ckpt_vdso failed", proc)
    finally:
        proc.stop()
